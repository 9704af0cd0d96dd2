"""SDSS's surrogate noise from the likelihood's curvature (spec decision 14) against closed forms."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gpdsl import api
from gpdsl.errors import MethodError
from gpdsl.inference.mcmc.surrogate_curvature import CURVATURE_FLOOR, curvature_surrogate_variance
from gpdsl.testing.external_likelihoods import normal_numpy

F = np.array([-0.7, 0.1, 1.3])


def test_a_normal_likelihood_gives_its_noise_variance():
    y, sigma = np.array([0.2, -0.4, 1.0]), 0.3
    S = curvature_surrogate_variance(lambda f: jnp.sum(jax.scipy.stats.norm.logpdf(y, f, sigma)), F)
    np.testing.assert_allclose(S, sigma ** 2, rtol=1e-6)


def test_a_poisson_log_likelihood_gives_the_inverse_rate():
    counts = np.array([0.0, 3.0, 7.0])
    S = curvature_surrogate_variance(lambda f: jnp.sum(counts * f - jnp.exp(f)), F)
    np.testing.assert_allclose(S, np.exp(-F), rtol=1e-6)


def test_a_host_likelihood_gives_what_its_jax_twin_gives():
    y, sigma = np.array([0.2, -0.4, 1.0]), 0.3

    def on_host(f):
        return jax.pure_callback(lambda v: np.float64(normal_numpy(y, v, sigma)), jax.ShapeDtypeStruct((), jnp.float64),
                                 f, vmap_method="sequential")

    np.testing.assert_allclose(curvature_surrogate_variance(on_host, F), sigma ** 2, rtol=1e-6)


def test_a_flat_or_convex_direction_is_floored():
    S = curvature_surrogate_variance(lambda f: f[1] ** 2 - 2.0 * f[2] ** 2, F)
    np.testing.assert_allclose(S, [1 / CURVATURE_FLOOR, 1 / CURVATURE_FLOOR, 0.25], rtol=1e-6)


def test_a_likelihood_that_is_not_finite_at_the_reference_is_refused():
    with pytest.raises(MethodError, match=r"log likelihood is -inf 0.001 away from it along f\[2\]"):
        curvature_surrogate_variance(lambda f: jnp.where(f[2] > 1.3005, -jnp.inf, -jnp.sum(f ** 2)), F)


@pytest.mark.parametrize("step_kappa_update", ["fixed_nu", "sdss"])
def test_the_sequential_sampler_runs_with_it_on_an_external_likelihood(step_kappa_update):
    from tests.inference.mcmc.test_sequential import NOISY, SMALL

    rng = np.random.default_rng(6)
    data = {"T": 3, "N": 3, "t": np.array([0.0, 0.5, 1.0]), "X": rng.uniform(0, 1, size=(3, 3, 1)),
            "y": rng.normal(size=(3, 3))}
    text = NOISY.replace("y[i] ~ normal(f[i], s);",
                         'y[i] ~ external("gpdsl.testing.external_likelihoods:normal_numpy", f[i], s);')
    fit = api.sample(text, data, "sequential", seed=2, allow_external=True, surrogate="curvature",
                     step_kappa_update=step_kappa_update, **SMALL)
    assert fit.posterior["f"].shape == (1, 20, 3, 3) and np.isfinite(fit.posterior["f"].values).all()
    assert np.isfinite(fit.posterior["s"].values).all()
