"""A diagonal prior factor held as its diagonal (:mod:`gpdsl.inference.mcmc.prior_factor`, the innovations of a latent
state-space GP) gives gibbs exactly the chain of the dense identity factor: from the same keys, ESS with each
hyperparameter update (SA, AA, SURR, SURR-slice) reaches the same state to 1e-10; and each helper equals its dense
counterpart on a random diagonal factor."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gpdsl.api import check_text
from gpdsl.data.validation import validate_data
from gpdsl.inference.families.latent_gp import latent_gp_view
from gpdsl.inference.mcmc import prior_factor
from gpdsl.inference.mcmc.gibbs import make_gibbs
from gpdsl.ir.families import STATE_SPACE_LATENT_GP, classify
from gpdsl.numerics.linalg import mvn_logpdf_chol

jax.config.update("jax_enable_x64", True)

MODEL = """
data { int N; vector[N] t; array[N] int<lower=0> y; }
parameters { real<lower=0> ell ~ inv_gamma(5, 5); real<lower=0> alpha ~ half_normal(1); }
model {
  f ~ gp(t, square(alpha) * matern32(lengthscale = ell), approx = state_space);
  y ~ poisson_log(f);
}
"""


def test_the_helpers_equal_their_dense_counterparts():
    rng = np.random.default_rng(0)
    d, x, s = rng.uniform(0.5, 2, 6), rng.normal(size=6), rng.uniform(0.5, 2, 6)
    D = np.diag(d)
    np.testing.assert_allclose(prior_factor.times(d, x), D @ x)
    np.testing.assert_allclose(prior_factor.solve(d, x), np.linalg.solve(D, x))
    np.testing.assert_allclose(prior_factor.transpose_solve(d, x), np.linalg.solve(D.T, x))
    np.testing.assert_allclose(prior_factor.logpdf(jnp.asarray(x), d), mvn_logpdf_chol(jnp.asarray(x), jnp.asarray(D)))
    np.testing.assert_allclose(np.diag(np.asarray(prior_factor.surrogate_factor(jnp.asarray(D), s))),
                               prior_factor.surrogate_factor(d, s), rtol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("update", ["sa", "aa", "surr", "surr_slice"])
def test_gibbs_with_the_diagonal_factor_is_the_dense_chain(update):
    model, _ = check_text(MODEL)
    rng = np.random.default_rng(1)
    t = np.sort(rng.uniform(0, 10, 20))
    data = validate_data(model, {"N": 20, "t": t, "y": rng.poisson(np.exp(np.sin(t)))})[0]
    problem = latent_gp_view(model, data, classify(model).facts[STATE_SPACE_LATENT_GP])
    dense = latent_gp_view(model, data, classify(model).facts[STATE_SPACE_LATENT_GP])
    dense.prior_factor = lambda theta: jnp.eye(dense.n)  # the identity's Cholesky factor as a matrix
    theta, f = jnp.asarray([0.1, -0.2]), jnp.asarray(rng.normal(size=problem.n))
    states = []
    for view in (problem, dense):
        init, step = make_gibbs(view, update, repeat_f=2, repeat_theta=2)
        state = init(None, theta, f)
        for key in jax.random.split(jax.random.PRNGKey(4), 3):
            state, _ = step(key, state)
        states.append(state.latent)
    np.testing.assert_allclose(states[0].theta, states[1].theta, atol=1e-10)
    np.testing.assert_allclose(states[0].f, states[1].f, atol=1e-10)
    assert np.ndim(states[0].chol_K) == 1


@pytest.mark.parametrize("update", ["aa", "surr"])
def test_gibbs_through_the_image_of_the_innovations_is_the_plain_chain(update):
    """ESS on the innovations searching the image ``f`` of the ellipse (one scan per step) gives the chain of ESS
    that recomputes ``f`` at every point it tries."""
    model, _ = check_text(MODEL)
    rng = np.random.default_rng(2)
    t = np.sort(rng.uniform(0, 10, 25))
    data = validate_data(model, {"N": 25, "t": t, "y": rng.poisson(np.exp(np.sin(t)))})[0]
    mapped = latent_gp_view(model, data, classify(model).facts[STATE_SPACE_LATENT_GP])
    plain = latent_gp_view(model, data, classify(model).facts[STATE_SPACE_LATENT_GP])
    plain.image = lambda theta: None
    assert mapped.image(jnp.zeros(2)) is not None
    theta, f = jnp.asarray([0.1, -0.2]), jnp.asarray(rng.normal(size=mapped.n))
    states = []
    for view in (mapped, plain):
        init, step = make_gibbs(view, update, repeat_f=3, repeat_theta=1)
        state = init(None, theta, f)
        for key in jax.random.split(jax.random.PRNGKey(7), 4):
            state, _ = step(key, state)
        states.append(state.latent)
    np.testing.assert_allclose(states[0].theta, states[1].theta, atol=1e-8)
    np.testing.assert_allclose(states[0].f, states[1].f, atol=1e-8)
    np.testing.assert_allclose(states[0].loglik, states[1].loglik, atol=1e-8)
