"""GP regression around a location: ``f ~ gp(x, k, mean = mu)`` and ``y ~ normal(b * z + u[level] + f, sigma)``
integrate ``f`` out as ``y - m(theta) ~ N(0, K + sigma^2 I)``, ``m`` the GP's mean plus the added terms. The view's
marginal equals that density written out with SciPy (dense) and the Kalman one (state space); ``ml`` and ``pm``
accept such models (``sgpr`` and predictions with per-point terms say why not); predictions, imputations and
replicates carry the location."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import gpdsl
from gpdsl.api import check_text
from gpdsl.data.validation import validate_data
from gpdsl.errors import MethodError
from gpdsl.inference.families.gp_regression import GPRegression, StateSpaceRegression, gp_regression_view
from gpdsl.inference.predict import draws
from gpdsl.ir.families import GP_REGRESSION, STATE_SPACE_REGRESSION, classify
from gpdsl.kernels import Matern32
from gpdsl.registry import methods

jax.config.update("jax_enable_x64", True)

TERMS = """
data {{ int N; vector[N] x; vector[N] z; array[N] int<lower=1, upper=3> level; vector[N] y; }}
parameters {{
  real mu ~ normal(0, 5);
  real b ~ normal(0, 2);
  vector[3] u ~ normal(0, 1);
  real<lower=0> ell ~ lognormal(0, 1);
  real<lower=0> sigma ~ half_normal(1);
}}
model {{
  f ~ gp(x, matern32(lengthscale = ell), mean = mu{approx});
  y ~ normal(b * z + u[level] + f, sigma);
}}
"""

MEAN_ONLY = """
data {{ int N; vector[N] x; vector[N] y; }}
parameters {{
  real mu ~ normal(0, 5);
  real c ~ normal(0, 5);
  real<lower=0> ell ~ lognormal(0, 1);
  real<lower=0> sigma ~ half_normal(1);
}}
model {{
  f ~ gp(x, matern32(lengthscale = ell), mean = mu{approx});
  y ~ normal(c + f, sigma);
}}
"""
THETA = {"mu": 1.7, "b": 0.4, "u": [0.3, -0.2, 0.1], "ell": 1.9, "sigma": 0.3, "c": 0.6}


def series(n=30, seed=0, missing=()):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 10, n)
    z, level = rng.normal(size=n), rng.integers(1, 4, n)
    y = 2 + 0.5 * z + np.array([0.3, -0.2, 0.1])[level - 1] + np.sin(x) + 0.1 * rng.normal(size=n)
    y[list(missing)] = np.nan
    return {"N": n, "x": x, "z": z, "level": level, "y": y}


def view(text, data, approx=""):
    model = check_text(text.format(approx=approx))[0]
    family = STATE_SPACE_REGRESSION if approx else GP_REGRESSION
    names = set(model.data)
    return gp_regression_view(model, validate_data(model, {k: v for k, v in data.items() if k in names},
                                                   allow_missing=("y",))[0], classify(model).facts[family])


def theta_of(problem):
    return problem.unconstrain_theta({name: jnp.asarray(THETA[name]) for name in problem.theta_names})


def location(data):
    return THETA["mu"] + THETA["b"] * data["z"] + np.asarray(THETA["u"])[data["level"] - 1]


def test_the_marginal_is_that_of_y_less_its_location():
    data = series(missing=(4,))
    problem = view(TERMS, data)
    assert type(problem) is GPRegression and problem.has_location
    keep = ~np.isnan(data["y"])
    K = np.asarray(Matern32(1.0, THETA["ell"])(data["x"][keep, None])) + (THETA["sigma"] ** 2 + 1e-8) * np.eye(29)
    expected = stats.multivariate_normal(location(data)[keep], K).logpdf(data["y"][keep])
    assert float(problem.log_marginal(theta_of(problem))) == pytest.approx(expected, abs=1e-8, rel=0)


def test_the_state_space_marginal_with_a_location_is_the_dense_one():
    data = series(missing=(4, 11))
    dense, state_space = view(TERMS, data), view(TERMS, data, ", approx = state_space")
    assert isinstance(state_space, StateSpaceRegression)
    theta = theta_of(dense)
    assert float(state_space.log_marginal(theta)) == pytest.approx(float(dense.log_marginal(theta)), abs=1e-8, rel=0)


def test_ml_and_pm_take_a_located_gp_regression_and_sgpr_says_why_not():
    model = check_text(TERMS.format(approx=""))[0]
    assert methods()["ml"].refusal(model) is None
    assert methods()["pm"].refusal(model) is None
    assert "around a zero-mean GP; 'f' has terms added to it in the likelihood: use ml" in \
        methods()["sgpr"].refusal(model)
    assert "read level, z, which have no values at new inputs" in methods()["ml"].prediction_refusal(model)
    assert methods()["ml"].prediction_refusal(check_text(MEAN_ONLY.format(approx=""))[0]) is None


@pytest.mark.parametrize("approx", ["", ", approx = state_space"])
def test_predictions_imputations_and_replicates_carry_the_location(approx):
    data = series(n=25, seed=2, missing=(3,))
    data = {k: data[k] for k in ("N", "x", "y")}
    problem = view(MEAN_ONLY, data, approx)
    theta = theta_of(problem)
    keep = ~np.isnan(data["y"])
    x_new = np.array([-1.0, 2.5, 11.0])
    points = np.concatenate([data["x"], x_new])
    K = np.asarray(Matern32(1.0, THETA["ell"])(points[:, None])) + 1e-8 * np.eye(28)
    shift = THETA["mu"] + THETA["c"]
    noise = THETA["sigma"] ** 2 + 1e-8
    rows = np.flatnonzero(keep)
    gain = np.linalg.solve(K[np.ix_(rows, rows)] + THETA["sigma"] ** 2 * np.eye(rows.size), data["y"][rows] - shift)
    f_mean = K[:, rows] @ gain
    got = draws.gp_regression_new_draws(problem, np.asarray(theta)[None, None], x_new[:, None], jax.random.PRNGKey(0))
    np.testing.assert_allclose(got["y_mean"][0, 0], shift + f_mean[25:], rtol=1e-7, atol=1e-8)
    mean, variance = draws.gp_regression_imputation_moments(problem, theta)
    np.testing.assert_allclose(mean, shift + f_mean[:25], rtol=1e-7, atol=1e-8)
    f_variance = np.diag(K[:25, :25]) - np.einsum("ij,ji->i", K[:25, rows], np.linalg.solve(
        K[np.ix_(rows, rows)] + THETA["sigma"] ** 2 * np.eye(rows.size), K[rows, :25]))
    np.testing.assert_allclose(variance, f_variance + noise, rtol=1e-6)
    replicates = draws.gp_regression_replicates(problem, np.repeat(np.asarray(theta)[None, None], 400, axis=1),
                                                jax.random.PRNGKey(1))
    z = (replicates[0].mean(axis=0) - mean) / np.sqrt(np.asarray(variance) / 400)
    assert np.all(np.abs(z) < 4.5), z


def test_predictions_with_per_point_terms_are_refused_before_the_run():
    data = series(n=20)
    model = check_text(TERMS.format(approx=""))[0]
    with pytest.raises(MethodError, match="read level, z, which have no values at new inputs"):
        gpdsl.fit(model, data, "ml", seed=1, new_inputs=np.array([[1.0], [2.0]]))


def test_ml_recovers_the_terms_and_a_state_space_fit_equals_the_dense_one():
    data = series(n=40, seed=5)
    fits = [gpdsl.fit(check_text(TERMS.format(approx=approx))[0], data, "ml", seed=1)
            for approx in ("", ", approx = state_space")]
    for name in ("mu", "b", "u", "ell", "sigma"):
        a, b = (np.asarray(fit.posterior[name]).reshape(-1) for fit in fits)
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=name)
    assert float(fits[0].posterior["b"].values.ravel()[0]) == pytest.approx(0.5, abs=0.1)
