"""pm on a latent state-space GP (``approx = state_space``, sampled through its innovations ``f_z``): the importance
estimate of p(y | theta) from the Laplace approximation or EP by Kalman smoothing is unbiased for the marginal by
Gauss-Hermite quadrature; the approximations' log marginals are the dense ones with the kernel matrix; and (slow) pm
on the state-space model agrees with pm on the same model with the dense exact GP within four combined Monte Carlo
standard errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.polynomial.hermite_e import hermegauss
from scipy import stats

from gpdsl.api import check_text
from gpdsl.data.validation import validate_data
from gpdsl.inference.approximations.ep import ep
from gpdsl.inference.approximations.laplace import laplace
from gpdsl.inference.families.latent_gp import latent_gp_view
from gpdsl.inference.families.state_space_latent import StateSpaceLatent
from gpdsl.inference.mcmc.pseudo_marginal import make_importance_estimator, make_latent_estimator
from gpdsl.ir.families import STATE_SPACE_LATENT_GP, classify
from gpdsl.kernels import Matern32

jax.config.update("jax_enable_x64", True)

STATE_SPACE_POISSON = """
data { int N; vector[N] t; array[N] int<lower=0> y; }
parameters {
  real mu ~ normal(0, 1);
  real<lower=0> sigma ~ half_normal(1);
  real<lower=0> ell ~ inv_gamma(5, 5);
}
model {
  f ~ gp(t, square(sigma) * matern32(lengthscale = ell), mean = mu, approx = state_space);
  y ~ poisson_log(f);
}
"""
DENSE_POISSON = STATE_SPACE_POISSON.replace(", approx = state_space", "")
THETA = jnp.asarray([0.3, np.log(0.9), np.log(1.4)])  # mu, log sigma, log ell


def view(text, data):
    model = check_text(text)[0]
    return latent_gp_view(model, validate_data(model, data)[0], classify(model).facts[STATE_SPACE_LATENT_GP])


def counts(n, seed=7, repeat=True):
    rng = np.random.default_rng(seed)
    t = rng.uniform(0, 2 * n / 10, n)
    if repeat:
        t[3] = t[1]
    return {"N": n, "t": t, "y": rng.poisson(np.exp(0.5 + np.sin(t)))}


@pytest.mark.parametrize("approximation", ["laplace", "ep", "ep with frozen sites"])
def test_the_estimate_is_unbiased_for_the_marginal_by_quadrature(approximation):
    # N = 3 times: p(y | theta) = integral of p(y | mu + f) N(f | 0, K) df by 40^3 Gauss-Hermite nodes
    data = counts(3, repeat=False)
    problem = view(STATE_SPACE_POISSON, data)
    assert isinstance(problem, StateSpaceLatent) and problem.n == 6  # two innovations per time
    mu, sigma, ell = 0.3, 0.9, 1.4
    K = np.asarray(Matern32(sigma ** 2, ell)(data["t"][:, None]))
    nodes, weights = hermegauss(40)
    grid = np.stack(np.meshgrid(nodes, nodes, nodes, indexing="ij"), axis=-1).reshape(-1, 3)
    f = grid @ np.linalg.cholesky(K).T
    log_lik = stats.poisson.logpmf(data["y"][None, :], np.exp(mu + f)).sum(axis=1)
    log_w = np.log(np.einsum("i,j,k->ijk", weights, weights, weights).ravel() / (2 * np.pi) ** 1.5)
    exact = np.logaddexp.reduce(log_lik + log_w)
    estimate = make_importance_estimator(problem, approximation.split()[0], num_importance=1)
    sites, frozen = None, False
    if approximation == "ep with frozen sites":  # q from EP's sites at other hyperparameters, no sweep (pm's default)
        fit = make_latent_estimator(problem, "ep")(jax.random.PRNGKey(9), THETA + jnp.asarray([0.2, 0.3, -0.2]))
        sites, frozen = fit.sites, True
    values = jax.jit(jax.vmap(lambda key: estimate(key, THETA, sites, frozen)[0]))(
        jax.random.split(jax.random.PRNGKey(0), 4000))
    ratios = np.exp(np.asarray(values) - exact)
    assert abs(ratios.mean() - 1.0) <= 4 * ratios.std() / np.sqrt(ratios.size), (ratios.mean(), ratios.std())
    assert ratios.std() > 0  # a real Monte Carlo estimate, not the exact value


@pytest.mark.parametrize("approximation", ["laplace", "ep"])
def test_the_approximate_marginal_is_the_dense_one_and_the_selection_gives_its_f(approximation):
    data = counts(30)
    problem = view(STATE_SPACE_POISSON, data)
    estimate = make_latent_estimator(problem, approximation, use_approximate_marginal=True, tol=1e-20, max_iter=500)
    result = jax.jit(estimate)(jax.random.PRNGKey(1), THETA)
    K = np.asarray(Matern32(0.9 ** 2, 1.4)(data["t"][:, None]))
    offset = np.full(30, 0.3)
    dense = laplace(K, data["y"], "poisson_log", offset=offset, tol=1e-20, max_iter=500) if approximation == "laplace" \
        else ep(K, data["y"], schedule="parallel", likelihood="poisson_log", offset=offset, tol=1e-20, max_sweeps=500)
    assert float(result.log_marginal) == pytest.approx(float(dense.log_marginal), abs=1e-6)
    z = result.selection.f
    assert z.shape == (problem.n,)
    f = problem.latent(THETA, z)
    assert float(result.selection.loglik) == pytest.approx(float(stats.poisson.logpmf(data["y"], np.exp(f)).sum()),
                                                           rel=1e-10)
    np.testing.assert_allclose(f[1], f[3], atol=1e-9)  # the repeated time


@pytest.mark.slow
@pytest.mark.parametrize("approximation", ["laplace", "ep"])
def test_pm_on_the_state_space_model_agrees_with_pm_on_the_dense_gp(approximation):
    from gpdsl.api import run
    from gpdsl.settings import PseudoMarginalSettings
    from tests.inference.methods.test_kernels_vs_nuts import convergence_problems
    from tests.inference.methods.test_pm_vs_nuts import disagreements

    data = counts(100)
    names = ["mu", "sigma", "ell"]
    settings = PseudoMarginalSettings(chains=4, warmup=1000, draws=4000, approximation=approximation,
                                      num_importance=8, sample_latent=True)
    ours = run(check_text(STATE_SPACE_POISSON)[0], data, "pm", settings, seed=5)
    dense = run(check_text(DENSE_POISSON)[0], data, "pm", settings, seed=6)
    problems = convergence_problems(ours, names, "state space") + convergence_problems(dense, names, "dense")
    assert not problems, problems
    assert ours.posterior["f_z"].shape[-1] == 2 * 100
    failures = disagreements(ours, dense, names + ["f"])
    assert not failures, f"posterior means differ by more than 4 combined MCSEs for {failures}"


def test_pm_without_sample_latent_predicts_from_innovations_drawn_from_q():
    """With the hyperparameters alone in the draws, predictions draw the innovations from the Laplace approximation at
    each draw: at a training time (and at it twice) ``f_new`` is the latent value those innovations give there, so two
    copies of one time agree and all are finite; no pointwise groups are written."""
    from gpdsl.api import run
    from gpdsl.settings import PseudoMarginalSettings

    data = counts(25)
    new = np.array([data["t"][4], 1.7, data["t"][4]])
    result = run(check_text(STATE_SPACE_POISSON)[0], data, "pm",
                 PseudoMarginalSettings(chains=1, warmup=20, draws=20, approximation="laplace"), seed=3,
                 new_inputs=new)
    assert "f_z" not in result.posterior and "mu" in result.posterior
    f_new = np.asarray(result.predictions["f_new"].values)
    assert f_new.shape == (1, 20, 3) and np.all(np.isfinite(f_new))
    np.testing.assert_allclose(f_new[..., 0], f_new[..., 2], atol=1e-8)


def test_pm_with_sample_latent_records_refreshed_innovations_and_their_f():
    """``--sample-latent``: the draws hold the innovations (refreshed by elliptical slice steps under their identity
    prior) and ``f`` computed from them by the model's recursion; the pointwise log-likelihood is that of ``f``."""
    from gpdsl.api import run
    from gpdsl.settings import PseudoMarginalSettings

    data = counts(25)
    problem = view(STATE_SPACE_POISSON, data)
    result = run(check_text(STATE_SPACE_POISSON)[0], data, "pm",
                 PseudoMarginalSettings(chains=1, warmup=20, draws=20, approximation="ep", sample_latent=True,
                                        refresh_steps=2), seed=4)
    z = np.asarray(result.posterior["f_z"].values)[0]
    f = np.asarray(result.posterior["f"].values)[0]
    assert z.shape == (20, problem.n) and len(np.unique(z[:, 0])) > 1
    theta = np.stack([np.asarray(result.posterior["mu"].values)[0], np.log(result.posterior["sigma"].values[0]),
                      np.log(result.posterior["ell"].values[0])], axis=-1)
    np.testing.assert_allclose(f[-1], problem.latent(jnp.asarray(theta[-1]), jnp.asarray(z[-1])), atol=1e-9)
    log_lik = np.asarray(result.log_likelihood["y"].values)[0]
    np.testing.assert_allclose(log_lik.sum(-1), stats.poisson.logpmf(data["y"], np.exp(f)).sum(-1), rtol=1e-10)


def test_mcmc_ep_on_the_state_space_model_is_mcmc_ep_on_the_dense_gp():
    """mcmc-ep's target, EP's log marginal by Kalman smoothing, is the dense EP's (to the GP's jitter): from the same
    keys the two chains of the same model with and without ``approx = state_space`` take the same 30 steps."""
    from pathlib import Path

    from gpdsl.inference.mcmc.pseudo_marginal import make_pseudo_marginal
    from gpdsl.ir.families import LATENT_GP, STATE_SPACE_LATENT_GP, classify

    text = (Path(__file__).resolve().parents[3] / "models" / "gp_state_space_poisson.gpm").read_text()
    rng = np.random.default_rng(0)
    t = np.sort(rng.uniform(0, 30, 40))
    values = {"N": 40, "t": t, "y": rng.poisson(np.exp(1 + np.sin(t / 3)))}
    chains = []
    for model_text, family in ((text, STATE_SPACE_LATENT_GP), (text.replace(", approx = state_space", ""), LATENT_GP)):
        model, _ = check_text(model_text)
        problem = latent_gp_view(model, validate_data(model, values)[0], classify(model).facts[family])
        init, step = make_pseudo_marginal(problem, "ep", 1, use_approximate_marginal=True)
        state, step, thetas, marginals = init(jax.random.PRNGKey(0), jnp.asarray([1.0, 0.0, 1.5])), jax.jit(step), [], []
        for key in jax.random.split(jax.random.PRNGKey(1), 30):
            state, _ = step(key, state)
            thetas.append(np.asarray(state.theta))
            marginals.append(float(state.log_marginal))
        chains.append((np.array(thetas), np.array(marginals)))
    (ss_theta, ss_marginal), (dense_theta, dense_marginal) = chains
    assert len(np.unique(ss_theta[:, 0])) > 3  # the chain moved
    np.testing.assert_allclose(ss_theta, dense_theta, atol=1e-8)
    np.testing.assert_allclose(ss_marginal, dense_marginal, atol=1e-5)


def test_ep_ml_on_the_state_space_model_finds_the_dense_gps_ep_ml_optimum():
    """ep-ml maximises EP's log marginal by Kalman smoothing: the same optimum, log marginal and predictions as on
    the same model without ``approx = state_space``, from the same starts (EP converged tightly in both)."""
    from pathlib import Path

    import gpdsl

    text = (Path(__file__).resolve().parents[3] / "models" / "gp_state_space_poisson.gpm").read_text()
    rng = np.random.default_rng(2)
    t = np.sort(rng.uniform(0, 30, 40))
    values = {"N": 40, "t": t, "y": rng.poisson(np.exp(1 + np.sin(t / 3)))}
    fits = [gpdsl.sample(check_text(model_text)[0], values, "ep-ml", starts=2, seed=4, tol=1e-10,
                         new_inputs=t[:3] + 0.5) for model_text in (text, text.replace(", approx = state_space", ""))]
    state_space, dense = fits
    for name in ("mu", "alpha", "ell"):
        assert float(state_space.posterior[name].values.ravel()[0]) == pytest.approx(
            float(dense.posterior[name].values.ravel()[0]), rel=2e-3)
    assert float(state_space.sample_stats["log_marginal"].values.ravel()[0]) == pytest.approx(
        float(dense.sample_stats["log_marginal"].values.ravel()[0]), abs=1e-4)
    assert state_space.predictions["f_new"].shape == (1, 1, 3)
