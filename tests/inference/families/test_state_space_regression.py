"""GP regression with a state-space GP (``approx = state_space``) against the exact GP of the same model file without
``approx``: the Kalman log density equals the dense one to 1e-8 (Matérn-1/2, 3/2, 5/2, periodic at a high order, a
sum and a product), ``ml`` finds the same optimum, and the smoother's predictions, leave-one-out densities and
imputations equal the dense ones; joint draws have the exact predictive's moments."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gpdsl
from gpdsl.api import check_text
from gpdsl.backends.jax.lowering import lower
from gpdsl.data.validation import validate_data
from gpdsl.inference.families.gp_regression import GPRegression, StateSpaceRegression, gp_regression_view
from gpdsl.inference.predict import draws
from gpdsl.ir.families import GP_REGRESSION, STATE_SPACE_REGRESSION, classify
from gpdsl.registry import methods

jax.config.update("jax_enable_x64", True)

POISSON_STATE_SPACE = """
data {
  int N;
  vector[N] t;
  array[N] int<lower=0> y;
}
parameters {
  real<lower=0> ell ~ inv_gamma(5, 5);
}
model {
  f ~ gp(t, matern32(lengthscale = ell), approx = state_space);
  y ~ poisson_log(f);
}
"""

KERNELS = {
    "matern12": "matern12(lengthscale = ell)",
    "matern32": "matern32(lengthscale = ell)",
    "matern52": "matern52(lengthscale = ell)",
    "periodic": "periodic(lengthscale = ell, period = 2.5)",
    "sum": "matern52(lengthscale = ell) + square(0.7) * periodic(lengthscale = 1.3, period = 2)",
    "product": "matern32(lengthscale = ell) * periodic(lengthscale = 1.1, period = 3)",
}

TEMPLATE = """
data {{ int N; vector[N] t; vector[N] y; }}
parameters {{
  real<lower=0> ell ~ lognormal(0, 1);
  real<lower=0> s ~ half_normal(1);
  real<lower=0> sigma ~ half_normal(1);
}}
model {{
  f ~ gp(t, square(s) * {kernel}{approx});
  y ~ normal(f, sigma);
}}
"""


def model_pair(kernel: str, order: int = 30):
    """The state-space model (order ``order``) and its exact twin."""
    approx = check_text(TEMPLATE.format(kernel=KERNELS[kernel], approx=f", approx = state_space(order = {order})"),
                        "ss.gpm")[0]
    exact = check_text(TEMPLATE.format(kernel=KERNELS[kernel], approx=""), "exact.gpm")[0]
    return approx, exact


def series(n=40, seed=0, missing=()):
    rng = np.random.default_rng(seed)
    t = rng.uniform(0, 10, n)
    t[5] = t[9]  # a repeated time: a step of zero
    y = np.sin(t) + 0.5 * np.cos(2.3 * t) + 0.2 * rng.normal(size=n)
    y[list(missing)] = np.nan
    return {"N": n, "t": t, "y": y}


def views(kernel, data, order=30):
    approx, exact = model_pair(kernel, order)
    ss_data, _ = validate_data(approx, data, allow_missing=("y",))
    exact_data, _ = validate_data(exact, data, allow_missing=("y",))
    ss = gp_regression_view(approx, ss_data, classify(approx).facts[STATE_SPACE_REGRESSION])
    dense = gp_regression_view(exact, exact_data, classify(exact).facts[GP_REGRESSION])
    return ss, dense


@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_kalman_log_density_equals_the_dense_one(kernel):
    approx, exact = model_pair(kernel)
    data = series()
    lowered_ss = lower(approx, validate_data(approx, data)[0])
    lowered_exact = lower(exact, validate_data(exact, data)[0])
    assert lowered_ss.dim == lowered_exact.dim == 3  # f is integrated out in both
    for values in ({"ell": 0.8, "s": 1.2, "sigma": 0.3}, {"ell": 1.7, "s": 0.6, "sigma": 0.05},
                   {"ell": 0.5, "s": 2.0, "sigma": 1.1}):
        free = {name: jnp.asarray(value) for name, value in values.items()}
        ss = float(lowered_ss.log_density(lowered_ss.unconstrain_values(free)))
        dense = float(lowered_exact.log_density(lowered_exact.unconstrain_values(free)))
        assert ss == pytest.approx(dense, abs=1e-8, rel=0), (kernel, values)


def test_log_density_with_missing_outputs_equals_the_dense_one():
    data = series(missing=(3, 17))
    ss, dense = views("sum", data)
    assert isinstance(ss, StateSpaceRegression) and type(dense) is GPRegression
    theta = jnp.asarray([0.2, -0.3, -1.0])
    assert float(ss.log_marginal(theta)) == pytest.approx(float(dense.log_marginal(theta)), abs=1e-8, rel=0)


@pytest.mark.slow
def test_ml_finds_the_exact_models_optimum():
    data = series(n=60, seed=3)
    approx, exact = model_pair("matern32")
    fits = [gpdsl.fit(model, data, "ml", seed=1) for model in (approx, exact)]
    for name in ("ell", "s", "sigma"):
        a, b = (float(np.asarray(fit.posterior[name]).reshape(-1)[0]) for fit in fits)
        assert a == pytest.approx(b, rel=1e-5, abs=1e-6), name


@pytest.mark.slow
def test_predictions_equal_the_exact_predictive():
    data = series(n=50, seed=4, missing=(7,))
    ss, dense = views("sum", data)
    theta = np.asarray([0.1, 0.2, -1.2])[None, None]
    new_t = np.array([[-1.0], [2.2], [data["t"][4]], [12.0], [5.5]])
    key = jax.random.PRNGKey(0)
    for joint in (False, True):
        got = draws.gp_regression_new_draws(ss, theta, new_t, key, joint=joint)
        want = draws.gp_regression_new_draws(dense, theta, new_t, key, joint=joint)
        for name in ("y_mean", "y_variance", "f_variance"):
            np.testing.assert_allclose(got[name], want[name], rtol=1e-7, atol=1e-9, err_msg=name)
    np.testing.assert_allclose(draws.gp_regression_log_likelihood(ss, theta),
                               draws.gp_regression_log_likelihood(dense, theta), rtol=1e-7, atol=1e-9)
    for got, want in zip(draws.gp_regression_imputation_moments(ss, jnp.asarray(theta[0, 0])),
                         draws.gp_regression_imputation_moments(dense, jnp.asarray(theta[0, 0]))):
        np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-9)


@pytest.mark.slow
def test_joint_draws_have_the_exact_predictive_moments():
    data = series(n=30, seed=5, missing=(2,))
    ss, dense = views("matern32", data)
    theta = jnp.asarray([0.1, 0.2, -1.2])
    new_t = jnp.asarray([-0.5, 3.3, 11.0])
    n_draws = 4000
    keys = jax.random.split(jax.random.PRNGKey(7), n_draws)
    from gpdsl.inference.predict.state_space import posterior_draw

    samples = np.asarray(jax.vmap(lambda k: posterior_draw(ss, theta, new_t, k))(keys))
    mean, covariance = __import__("gpdsl.inference.predict.gp_regression", fromlist=["x"]).exact_moments(
        draws._posterior_at(dense, theta), dense.kernel(theta), dense.inputs(theta),
        jnp.concatenate([dense.all_inputs(theta), new_t[:, None]]), include_noise=False, full=True)
    sd = np.sqrt(np.diag(np.asarray(covariance)))
    z = (samples.mean(0) - np.asarray(mean)) / (sd / np.sqrt(n_draws))
    assert np.all(np.abs(z) < 4.5), z
    sample_cov = np.cov(samples.T)
    pairs = [(0, 1), (2, 2), (30, 31), (31, 32), (2, 30)]
    for i, j in pairs:  # the variance of a sample covariance of normals: (S_ij^2 + S_ii S_jj) / n
        c = np.asarray(covariance)
        tolerance = 4.5 * np.sqrt((c[i, j] ** 2 + c[i, i] * c[j, j]) / n_draws)
        assert abs(sample_cov[i, j] - c[i, j]) < tolerance, (i, j)


@pytest.mark.parametrize("method", ["sgpr", "svgp", "gibbs", "mcmc-ep"])
def test_exact_gp_engines_refuse_the_state_space_model(method):
    approx, _ = model_pair("matern32")
    assert "uses approx = state_space(...), which these engines do not take" in methods()[method].refusal(approx)


@pytest.mark.parametrize("method", ["ml", "pm", "nuts"])
def test_ml_pm_and_nuts_run_the_state_space_model(method):
    approx, _ = model_pair("matern32")
    assert methods()[method].refusal(approx) is None


def test_a_state_space_gp_under_another_likelihood_runs_on_gibbs_pm_mcmc_ep_and_nuts_and_others_say_so():
    """gibbs, pm and mcmc-ep sample its innovations (:mod:`gpdsl.inference.families.state_space_latent`,
    :mod:`gpdsl.inference.mcmc.state_space_pm`) and nuts its Stan program; ml (which needs a normal likelihood) refuses
    it and names gibbs and nuts."""
    from gpdsl.ir.families import STATE_SPACE_LATENT_GP

    model, _ = check_text(POISSON_STATE_SPACE)
    assert STATE_SPACE_LATENT_GP in classify(model).facts
    assert methods()["gibbs"].refusal(model) is None
    assert methods()["nuts"].refusal(model) is None
    assert methods()["pm"].refusal(model) is None
    assert methods()["mcmc-ep"].refusal(model) is None
    refusal = methods()["ml"].refusal(model)
    assert "under a poisson_log likelihood: gibbs samples it through its innovations and nuts runs its Stan " \
           "program" in refusal
    assert "approx = hsgp(...) or the exact GP" in refusal


def test_memory_check_counts_no_kernel_matrix_for_a_state_space_gp(monkeypatch):
    from gpdsl.data import preflight
    from gpdsl.errors import MethodError
    from gpdsl.settings.fields import RunPlan

    approx, exact = model_pair("matern32")
    data = series(n=2000)
    monkeypatch.setattr(preflight, "available_memory", lambda: 4_000_000)  # below 2000 x 2000 doubles (32 MB)
    preflight.verify_memory(approx, validate_data(approx, data)[0], RunPlan())
    with pytest.raises(MethodError, match="kernel matrices of f"):
        preflight.verify_memory(exact, validate_data(exact, data)[0], RunPlan())
