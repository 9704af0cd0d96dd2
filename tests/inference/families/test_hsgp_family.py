"""The HSGP family's view: a latent GP over the basis weights (identity prior covariance) whose likelihood reads
f = PHI (sqrt(S) .* z) + mean; its pieces add up to the lowered model's log density, and the methods that cannot
take it refuse it at the start with the reason."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.scipy.stats import norm

import gpdsl
from gpdsl.api import check_file
from gpdsl.data.validation import validate_data
from gpdsl.errors import MethodError
from gpdsl.inference.families.hsgp import hsgp_view
from gpdsl.ir.families import HSGP_LATENT_GP, classify
from gpdsl.registry import methods

jax.config.update("jax_enable_x64", True)


def hsgp_problem(seed=0):
    model = check_file("models/gp_hsgp.gpm")[0]
    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(0, 10, 30))
    data, _ = validate_data(model, {"N": 30, "t": t, "y": rng.poisson(2, 30)})
    return model, data, hsgp_view(model, data, classify(model).facts[HSGP_LATENT_GP])


def test_view_pieces_add_up_to_the_lowered_log_density():
    _, _, problem = hsgp_problem()
    rng = np.random.default_rng(1)
    assert problem.n == 40 and problem.theta_names == ["mu", "sigma", "ell"]
    np.testing.assert_array_equal(problem.covariance(jnp.zeros(problem.theta_dim)), np.eye(40))
    for _ in range(3):
        theta, z = rng.normal(size=problem.theta_dim), rng.normal(size=problem.n)
        free = {**problem.theta_values(theta), "f_z": jnp.asarray(z)}
        whole = problem.jax_model.log_density(problem.jax_model.unconstrain_values(free))
        parts = problem.log_prior(theta) + jnp.sum(norm.logpdf(z)) + problem.log_likelihood(jnp.asarray(z), theta)
        assert float(whole) == pytest.approx(float(parts), rel=1e-12)


def test_latent_is_the_basis_expansion_plus_the_mean():
    _, data, problem = hsgp_problem()
    rng = np.random.default_rng(2)
    theta, z = rng.normal(size=problem.theta_dim), rng.normal(size=problem.n)
    values = problem.theta_values(theta)
    basis = problem.basis
    kernel = problem.jax_model.gp_kernel(problem.node.statement, {**data, **values})
    expected = basis.phi @ (np.sqrt(np.asarray(kernel.spectral_density(basis.omega))) * z) + float(values["mu"])
    np.testing.assert_allclose(problem.latent(theta, jnp.asarray(z)), expected, rtol=1e-12)


@pytest.mark.parametrize("method", ["sgpr"])
def test_methods_of_exact_gps_refuse_the_model_at_the_start(method):
    model, data, _ = hsgp_problem()
    reason = methods()[method].refusal(model)
    assert "'f' uses approx = hsgp(...), which these engines do not take" in reason
    with pytest.raises(MethodError, match="uses approx = hsgp"):
        gpdsl.sample(model, data, method, seed=1) if methods()[method].command == "sample" else \
            gpdsl.fit(model, data, method, seed=1)


def test_pm_mcmc_ep_and_ep_ml_run_the_weights_and_refuse_what_their_approximation_lacks():
    from gpdsl.settings import PseudoMarginalSettings

    model, data, _ = hsgp_problem()
    pm = methods()["pm"]
    for approximation in ("laplace", "ep"):
        assert pm.refusal(model, settings=PseudoMarginalSettings(approximation=approximation)) is None
    assert methods()["mcmc-ep"].refusal(model) is None and methods()["ep-ml"].refusal(model) is None
    from gpdsl.api import check_text

    zero_inflated = check_text(open("models/gp_hsgp.gpm").read().replace(
        "real<lower=0> ell ~ inv_gamma(5, 5);", "real<lower=0> ell ~ inv_gamma(5, 5);\n  real<lower=0, upper=1> zi "
        "~ beta(1, 1);").replace("y ~ poisson_log(f);", "y ~ zero_inflated_poisson_log(f, zi);"))[0]
    reason = pm.refusal(zero_inflated, settings=PseudoMarginalSettings(approximation="laplace"))
    assert "concave" in reason
    with pytest.raises(MethodError, match="concave"):
        gpdsl.sample(zero_inflated, data, "pm", approximation="laplace", chains=1, warmup=5, draws=5, seed=1)


@pytest.mark.slow
def test_a_basis_too_small_for_the_length_scales_is_reported_by_the_summary():
    # m = 5 over t of half range 5 with c = 1.5 represents Matérn-3/2 length-scales down to 3.42 * 1.5 * 5 / 5 = 5.13,
    # far above the prior inv_gamma(5, 5)'s bulk: every run of it gets the paper's warning, naming the m to use
    from gpdsl.api import check_text
    from gpdsl.results.summary import sampler_warnings
    from gpdsl.settings import GibbsSettings

    model = check_text(open("models/gp_hsgp.gpm").read().replace("hsgp(m = 40, c = 1.5)", "hsgp(m = 5, c = 1.5)"))[0]
    rng = np.random.default_rng(3)
    t = np.r_[0.0, np.sort(rng.uniform(0, 10, 28)), 10.0]
    results = gpdsl.run(model, {"N": 30, "t": t, "y": rng.poisson(2, 30)}, "gibbs",
                        GibbsSettings(chains=1, warmup=50, draws=50), seed=1)
    warnings = [w for w in sampler_warnings(results) if w.startswith("hsgp of 'f'")]
    assert len(warnings) == 1
    assert "length-scale draws lie below 5.13, the shortest that m = 5 basis functions with c = 1.5 represent" \
        in warnings[0]


def test_memory_check_counts_the_basis_not_an_n_by_n_kernel_matrix(monkeypatch):
    """A sampler's memory check on an HSGP (N = 100,000, the size the benchmark met) counts its N x M basis, which
    fits, not the N x N kernel matrix it never builds; the exact GP of the same size is still refused."""
    from gpdsl.api import check_text
    from gpdsl.data import preflight
    from gpdsl.settings import GibbsSettings

    model = check_file("models/gp_hsgp.gpm")[0]
    exact = check_text(open("models/gp_hsgp.gpm").read().replace(", approx = hsgp(m = 40, c = 1.5)", ""))[0]
    n = 100_000
    data = {"N": n, "t": np.linspace(0.0, 10.0, n), "y": np.ones(n, dtype=int)}
    plan = GibbsSettings(chains=2, draws=10).run_plan()
    monkeypatch.setattr(preflight, "available_memory", lambda: 1e9)  # 1 GB: 2 x 100,000 x 40 doubles are 64 MB
    preflight.verify_memory(model, validate_data(model, data)[0], plan)
    with pytest.raises(MethodError, match=r"kernel matrices of f \(--chains 2 x 100000 x 100000\)"):
        preflight.verify_memory(exact, validate_data(exact, data)[0], plan)
    monkeypatch.setattr(preflight, "available_memory", lambda: 5e7)  # below the basis's 64 MB
    with pytest.raises(MethodError, match=r"the basis of f \(--chains 2 x 100000 x about 40 basis functions\)"):
        preflight.verify_memory(model, validate_data(model, data)[0], plan)


def test_sa_keeping_the_basis_coefficients_leaves_the_prior_invariant():
    """With the likelihood removed, gibbs with SA (the basis coefficients ``sqrt(S_theta) .* z`` fixed as ``theta``
    moves, the change of variables' Jacobian in the target) must draw the hyperparameters from their prior: ``sigma ~
    half_normal(1)``, ``ell ~ inv_gamma(5, 5)``; means within four Monte Carlo standard errors."""
    import arviz as az

    from gpdsl.inference.mcmc.gibbs import make_gibbs

    _, _, problem = hsgp_problem()
    problem.log_likelihood = lambda z, theta: jnp.zeros(())
    problem.image = lambda theta: ((lambda v: v), (lambda g: jnp.zeros(())))
    assert problem.centring_scale(jnp.zeros(3)).shape == (problem.n,)
    init, step = make_gibbs(problem, "sa", repeat_theta=2, initial_scale=1.0)

    @jax.jit
    def chain(key):
        def one(state, key):
            state, _ = step(key, state)
            return state, state.latent.theta

        return jax.lax.scan(one, init(None, jnp.asarray([0.0, 0.0, 0.2])), jax.random.split(key, 20000))[1]

    theta = np.asarray(jax.vmap(chain)(jax.random.split(jax.random.key(3), 4)))[:, 2000:]
    sigma, ell = np.exp(theta[..., 1]), np.exp(theta[..., 2])
    for name, draws, exact in (("sigma", sigma, np.sqrt(2 / np.pi)), ("ell", ell, 5 / 4)):
        mcse = float(az.mcse(draws))
        print(f"{name}: {draws.mean():.4f} exact {exact:.4f} MCSE {mcse:.4f}")
        assert abs(draws.mean() - exact) < 4 * mcse
