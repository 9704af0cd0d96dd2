"""Independent series under one state-space GP, ``gp((t, g), k(t) * same(g), approx = state_space)``, against the
exact GP of the same model file without ``approx`` (the dense block-diagonal kernel): the Kalman log density equals
the dense one to 1e-8 for each kernel form, the groups in any order of the data and of the input components;
predictions at new times of old and new groups equal the exact predictive; a sampled latent's map from innovations
has the dense covariance; Laplace and EP by smoothing equal the dense ones to 1e-6; and predictions of a latent equal
the dense conditional of the same prior draw."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gpdsl
from gpdsl.api import check_text
from gpdsl.backends.jax.lowering import lower
from gpdsl.data.validation import validate_data
from gpdsl.errors import DataError
from gpdsl.inference.approximations.ep import ep
from gpdsl.inference.approximations.laplace import laplace
from gpdsl.inference.families.gp_regression import StateSpaceRegression, gp_regression_view
from gpdsl.inference.families.latent_gp import latent_gp_view
from gpdsl.inference.families.state_space_latent import StateSpaceLatent
from gpdsl.inference.mcmc.pseudo_marginal import make_latent_estimator
from gpdsl.inference.predict import draws
from gpdsl.inference.predict.state_space_latent import conditional_draw
from gpdsl.ir.families import GP_REGRESSION, STATE_SPACE_LATENT_GP, STATE_SPACE_REGRESSION, classify
from gpdsl.kernels import kalman

jax.config.update("jax_enable_x64", True)

KERNELS = {
    "matern12": "matern12(t, lengthscale = ell)",
    "matern32": "matern32(t, lengthscale = ell)",
    "matern52": "matern52(t, lengthscale = ell)",
    "sum": "(matern32(t, lengthscale = ell) + square(0.7) * periodic(t, lengthscale = 1.3, period = 2))",
    "product": "(matern32(t, lengthscale = ell) * periodic(t, lengthscale = 1.1, period = 3))",
}

REGRESSION = """
data {{ int N; vector[N] t; vector[N] g; vector[N] y; }}
parameters {{
  real<lower=0> ell ~ lognormal(0, 1);
  real<lower=0> s ~ half_normal(1);
  real<lower=0> sigma ~ half_normal(1);
}}
model {{
  f ~ gp({inputs}, square(s) * {kernel}{approx});
  y ~ normal(f, sigma);
}}
"""

POISSON = """
data {{ int N; vector[N] t; vector[N] g; array[N] int<lower=0> y; }}
parameters {{
  real mu ~ normal(0, 1);
  real<lower=0> ell ~ inv_gamma(5, 5);
}}
model {{
  f ~ gp((t, g), matern32(t, lengthscale = ell) * same(g), mean = mu{approx});
  y ~ poisson_log(f);
}}
"""
APPROX = ", approx = state_space(order = 30)"


def regression_pair(kernel="sum", group_first=False):
    """The state-space model and its exact twin; with ``group_first`` the inputs are ``(g, t)`` and ``same(g)`` the
    first factor."""
    inputs, body = ("(g, t)", f"same(g) * {KERNELS[kernel]}") if group_first else \
        ("(t, g)", f"{KERNELS[kernel]} * same(g)")
    return tuple(check_text(REGRESSION.format(inputs=inputs, kernel=body, approx=approx), name)[0]
                 for approx, name in ((APPROX, "ss.gpm"), ("", "exact.gpm")))


def series(n=40, seed=0, missing=(), counts=False):
    """Three interleaved series (labels 0, 3 and 7), a repeated time within one and a time shared by two."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(0, 10, n)
    g = rng.choice([0.0, 3.0, 7.0], n)
    t[5], g[5] = t[9], g[9]
    t[11] = t[9]
    g[11] = 3.0 if g[9] != 3.0 else 7.0
    if counts:
        return {"N": n, "t": t, "g": g, "y": rng.poisson(np.exp(0.3 * g / 7 + np.sin(t)))}
    y = np.sin(t) + 0.3 * g + 0.2 * rng.normal(size=n)
    y[list(missing)] = np.nan
    return {"N": n, "t": t, "g": g, "y": y}


def regression_views(data, **pair):
    approx, exact = regression_pair(**pair)
    ss = gp_regression_view(approx, validate_data(approx, data, allow_missing=("y",))[0],
                            classify(approx).facts[STATE_SPACE_REGRESSION])
    dense = gp_regression_view(exact, validate_data(exact, data, allow_missing=("y",))[0],
                               classify(exact).facts[GP_REGRESSION])
    return ss, dense


@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_kalman_log_density_over_groups_equals_the_dense_block_diagonal_one(kernel):
    data = series(missing=(3, 17))
    ss, dense = regression_views(data, kernel=kernel)
    assert isinstance(ss, StateSpaceRegression)
    K = np.asarray(dense.kernel(jnp.zeros(3))(dense.all_inputs(jnp.zeros(3))))
    assert K[0, np.flatnonzero(data["g"] != data["g"][0])].max() == 0.0  # the exact twin is block diagonal
    for theta in ([0.2, -0.3, -1.0], [-0.5, 0.4, -2.5], [0.9, 0.0, 0.1]):
        theta = jnp.asarray(theta)
        assert float(ss.log_marginal(theta)) == pytest.approx(float(dense.log_marginal(theta)), abs=1e-8, rel=0)


def test_the_group_may_be_the_first_input_and_same_the_first_factor():
    data = series(seed=1)
    approx, exact = regression_pair("matern52", group_first=True)
    lowered = [lower(model, validate_data(model, data)[0]) for model in (approx, exact)]
    free = {"ell": jnp.asarray(0.9), "s": jnp.asarray(1.3), "sigma": jnp.asarray(0.2)}
    ss, dense = (float(m.log_density(m.unconstrain_values(free))) for m in lowered)
    assert ss == pytest.approx(dense, abs=1e-8, rel=0)


def test_one_group_is_one_series():
    data = series(seed=2)
    data["g"] = np.full(data["N"], 4.0)
    ss, _ = regression_views(data)
    approx = check_text(REGRESSION.format(inputs="t", kernel=KERNELS["sum"], approx=APPROX))[0]
    one = gp_regression_view(approx, validate_data(approx, data)[0], classify(approx).facts[STATE_SPACE_REGRESSION])
    theta = jnp.asarray([0.1, 0.2, -1.0])
    assert float(ss.log_marginal(theta)) == pytest.approx(float(one.log_marginal(theta)), abs=1e-10, rel=0)


def test_predictions_at_old_and_new_groups_equal_the_exact_predictive():
    data = series(n=36, seed=4, missing=(7,))
    ss, dense = regression_views(data)
    theta = np.asarray([0.1, 0.2, -1.2])[None, None]
    new = np.array([[-1.0, 0.0], [2.2, 3.0], [data["t"][4], data["g"][4]], [12.0, 7.0], [5.5, 9.0], [5.6, 9.0]])
    key = jax.random.PRNGKey(0)
    for joint in (False, True):
        got = draws.gp_regression_new_draws(ss, theta, new, key, joint=joint)
        want = draws.gp_regression_new_draws(dense, theta, new, key, joint=joint)
        for name in ("y_mean", "y_variance", "f_variance"):
            np.testing.assert_allclose(got[name], want[name], rtol=1e-7, atol=1e-9, err_msg=name)
    np.testing.assert_allclose(draws.gp_regression_log_likelihood(ss, theta),
                               draws.gp_regression_log_likelihood(dense, theta), rtol=1e-7, atol=1e-9)


def test_new_points_of_grouped_series_need_their_group():
    ss, _ = regression_views(series())
    with pytest.raises(DataError, match=r"new inputs like \(t, g\) must be a finite matrix with 2 column\(s\); got shape \(2, 1\)"):
        draws.gp_regression_new_draws(ss, np.zeros((1, 1, 3)), np.array([[1.0], [2.0]]), jax.random.PRNGKey(0))


def latent_views(data):
    approx, exact = (check_text(POISSON.format(approx=a))[0] for a in (APPROX, ""))
    ss = latent_gp_view(approx, validate_data(approx, data)[0], classify(approx).facts[STATE_SPACE_LATENT_GP])
    dense_model_data = validate_data(exact, data)[0]
    return ss, lower(exact, dense_model_data)


def dense_kernel(data, ell):
    """The exact twin's ``matern32(t) * same(g)`` at ``ell``, from the model's own lowering."""
    _, exact = latent_views(data)
    statement = exact.gp_nodes[0].statement
    kernel = exact.gp_kernel(statement, {**exact.data, "ell": jnp.asarray(ell)})
    return np.asarray(kernel(exact.gp_inputs(statement, exact.data)))


def test_the_latent_map_from_innovations_has_the_dense_block_diagonal_covariance():
    data = series(n=25, seed=3, counts=True)
    problem, _ = latent_views(data)
    assert isinstance(problem, StateSpaceLatent) and problem.n == 2 * data["N"]
    theta = jnp.asarray([0.0, np.log(1.4)])
    M = np.asarray(problem.likelihood_map(theta))
    np.testing.assert_allclose(M @ M.T, dense_kernel(data, 1.4), atol=1e-8)


@pytest.mark.parametrize("approximation", ["laplace", "ep"])
def test_laplace_and_ep_by_smoothing_over_groups_equal_the_dense_ones(approximation):
    data = series(n=30, seed=6, counts=True)
    problem, _ = latent_views(data)
    theta = jnp.asarray([0.3, np.log(1.4)])
    estimate = make_latent_estimator(problem, approximation, use_approximate_marginal=True, tol=1e-20, max_iter=500)
    result = jax.jit(estimate)(jax.random.PRNGKey(1), theta)
    K = dense_kernel(data, 1.4) + 1e-8 * np.eye(data["N"])
    offset = np.full(data["N"], 0.3)
    dense = laplace(K, data["y"], "poisson_log", offset=offset, tol=1e-20, max_iter=500) \
        if approximation == "laplace" else \
        ep(K, data["y"], schedule="parallel", likelihood="poisson_log", offset=offset, tol=1e-20, max_sweeps=500)
    assert float(result.log_marginal) == pytest.approx(float(dense.log_marginal), abs=1e-6)


def test_a_latent_prediction_over_groups_is_the_dense_conditional_of_the_same_prior_draw():
    data = series(n=20, seed=8)
    times = np.stack([data["t"], data["g"]], axis=1)
    new = np.array([[-1.0, 0.0], [4.4, 3.0], [11.0, 7.0], [3.0, 5.0], times[2]])
    approx, _ = regression_pair("matern32")
    kernel = lower(approx, validate_data(approx, data)[0]).state_space_kernel(
        approx.gp_statements()[0], {"ell": jnp.asarray(1.2), "s": jnp.asarray(1.0)})
    order = 30
    values = np.asarray(kalman.prior_draws(jax.random.PRNGKey(8), kernel, jnp.asarray(times), 1, order)[0])
    key = jax.random.PRNGKey(3)
    every = np.concatenate([times, new])
    prior = np.asarray(kalman.prior_draws(key, kernel, jnp.asarray(every), 1, order)[0])
    same = every[:, 1][:, None] == every[:, 1][None, :]
    K = np.asarray(kernel(jnp.asarray(every[:, :1]))) * same
    unique = np.setdiff1d(np.arange(20), [5])  # the repeated point (t, g) of rows 5 and 9 once
    draw = np.asarray(conditional_draw(key, kernel, jnp.asarray(times), jnp.asarray(values), jnp.asarray(new), order))
    K_nn, K_sn = K[np.ix_(unique, unique)], K[20:, unique]
    expected = prior[20:] + K_sn @ np.linalg.solve(K_nn, values[unique] - prior[unique])
    np.testing.assert_allclose(draw, expected, atol=1e-6)
    assert abs(draw[-1] - values[2]) < 1e-6


def test_gibbs_samples_grouped_series_and_predicts_at_new_points():
    data = series(n=24, seed=9, counts=True)
    model = check_text(POISSON.format(approx=APPROX))[0]
    results = gpdsl.sample(model, data, "gibbs", seed=1, chains=1, warmup=10, draws=10,
                           new_inputs=np.array([[2.5, 0.0], [9.0, 7.0], [1.0, 11.0]]))
    assert results.posterior["f_z"].shape == (1, 10, 2 * data["N"])
    assert results.predictions["f_new"].shape == (1, 10, 3)
    assert np.all(np.isfinite(results.predictions["f_new"]))


@pytest.mark.slow
def test_ml_over_groups_finds_the_exact_models_optimum():
    data = series(n=60, seed=10)
    fits = [gpdsl.fit(model, data, "ml", seed=1) for model in regression_pair("matern32")]
    for name in ("ell", "s", "sigma"):
        a, b = (float(np.asarray(fit.posterior[name]).reshape(-1)[0]) for fit in fits)
        assert a == pytest.approx(b, rel=1e-5, abs=1e-6), name
