"""The view of a latent state-space GP under a non-normal likelihood (:mod:`gpdsl.inference.families.state_space_latent`)
and its predictions (:mod:`gpdsl.inference.predict.state_space_latent`): predictions at new times condition the
state-space prior on a draw of ``f`` and equal the dense GP conditional (pathwise, the same prior draw) to 1e-6; the
view's linear map reproduces ``f``; gibbs stores ``f_z``, ``f`` and the pointwise groups, which equal the likelihood
at the stored ``f``."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import gpdsl
from gpdsl.api import check_text
from gpdsl.data.validation import validate_data
from gpdsl.errors import DataError
from gpdsl.inference.families.latent_gp import latent_gp_view
from gpdsl.inference.families.state_space_latent import StateSpaceLatent
from gpdsl.inference.predict.state_space_latent import conditional_draw
from gpdsl.ir.families import STATE_SPACE_LATENT_GP, classify
from gpdsl.kernels import kalman
from gpdsl.kernels.composite import Sum
from gpdsl.kernels.stationary import Matern32, Periodic
from gpdsl.results.arviz_compat import groups

jax.config.update("jax_enable_x64", True)

POISSON = """
data { int N; vector[N] t; array[N] int<lower=0> y; }
parameters {
  real<lower=0> ell ~ inv_gamma(5, 5);
  real mu ~ normal(0, 1);
}
model {
  f ~ gp(t, matern32(lengthscale = ell), mean = mu, approx = state_space);
  y ~ poisson_log(f);
}
"""


def series(n=30, seed=2):
    rng = np.random.default_rng(seed)
    t = rng.uniform(0, 8, n)
    t[7] = t[12]
    return {"N": n, "t": t, "y": rng.poisson(np.exp(np.sin(t)))}


@pytest.mark.parametrize("kernel", [Matern32(1.3, 0.9),
                                    Sum(Matern32(1.0, 1.5), Periodic(0.5, 1.0, 2.0))])
def test_a_prediction_is_the_dense_gp_conditional_of_the_same_prior_draw(kernel):
    rng = np.random.default_rng(0)
    times = rng.uniform(0, 6, 25)
    times[3] = times[4]
    new = np.concatenate([rng.uniform(-1, 7, 10), times[[5]]])  # before, between, after, and at a training time
    order = 30
    values = np.asarray(kalman.prior_draws(jax.random.PRNGKey(8), kernel, jnp.asarray(times), 1, order)[0])
    key = jax.random.PRNGKey(3)
    every = np.concatenate([times, new])
    prior = np.asarray(kalman.prior_draws(key, kernel, jnp.asarray(every), 1, order)[0])
    K = np.asarray(kernel(jnp.asarray(every)[:, None]))
    unique = np.r_[0:3, 4:25]  # the repeated time's rows once (a draw of f has one value there)
    draw = np.asarray(conditional_draw(key, kernel, jnp.asarray(times), jnp.asarray(values), jnp.asarray(new), order))
    K_nn = K[np.ix_(unique, unique)]
    K_sn = K[25:, unique]
    expected = prior[25:] + K_sn @ np.linalg.solve(K_nn, values[unique] - prior[unique])
    np.testing.assert_allclose(draw, expected, atol=1e-6)
    assert abs(draw[-1] - values[5]) < 1e-6


def view(data=None):
    model, _ = check_text(POISSON)
    data = validate_data(model, data or series())[0]
    return model, data, latent_gp_view(model, data, classify(model).facts[STATE_SPACE_LATENT_GP])


def test_the_view_samples_innovations_with_an_identity_prior_and_maps_them_to_f():
    _, data, problem = view()
    assert isinstance(problem, StateSpaceLatent)
    assert problem.n == 2 * data["N"] and problem.weights == "f_z"
    theta = jnp.asarray([0.3, 0.5])
    z = jnp.asarray(np.random.default_rng(1).normal(size=problem.n))
    f = problem.latent(theta, z)
    np.testing.assert_allclose(problem.likelihood_map(theta) @ z + problem.location_offset(theta), f, atol=1e-10)
    np.testing.assert_allclose(problem.covariance(theta), np.eye(problem.n))
    expected = stats.poisson.logpmf(data["y"], np.exp(np.asarray(f))).sum()
    assert float(problem.log_likelihood(z, theta)) == pytest.approx(expected, rel=1e-10)


def test_new_times_must_be_one_column():
    _, _, problem = view()
    with pytest.raises(DataError, match="new times of 'f'"):
        problem.check_new_inputs(np.zeros((3, 2)))


def test_gibbs_stores_innovations_f_and_the_pointwise_groups():
    model, _ = check_text(POISSON)
    data = series()
    results = gpdsl.sample(model, data, "gibbs", seed=1, chains=1, warmup=10, draws=10,
                           new_inputs=np.array([[2.5], [9.0]]))
    posterior = results.posterior
    assert posterior["f_z"].shape == (1, 10, 2 * data["N"]) and posterior["f"].shape == (1, 10, data["N"])
    log_likelihood = groups(results)["log_likelihood"]["y"].values
    expected = stats.poisson.logpmf(data["y"], np.exp(posterior["f"].values))
    np.testing.assert_allclose(log_likelihood, expected, rtol=1e-8)
    assert results.predictions["f_new"].shape == (1, 10, 2)
    assert np.all(results.predictions["y_new"] >= 0)
