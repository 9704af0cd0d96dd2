"""Elliptical slice sampling against the exact GP posterior of a Gaussian likelihood."""

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gpdsl.api import check_file
from gpdsl.inference.driver import run_chains
from gpdsl.inference.families.latent_gp import latent_gp
from gpdsl.inference.mcmc.ess import ESSInfo, ess_step, make_ess_kernel, mapped_ess_step, standard_normal_ess_step

NUM_CHAINS, NUM_DRAWS = 4, 4000


@pytest.fixture(scope="module")
def regression():
    model, _ = check_file("models/gp_regression.gpm")
    rng = np.random.default_rng(3)
    x = np.sort(rng.uniform(0, 4, size=(8, 1)), axis=0)
    y = np.sin(2 * x[:, 0]) + 0.3 * rng.normal(size=8)
    problem = latent_gp(model, {"N": 8, "D": 1, "X": x, "y": y}, "ESS", marginalise=False)
    theta = problem.unconstrain_theta({"variance": 1.2, "lengthscale": np.array([0.8]), "noise": 0.4})
    return problem, theta, y


def exact_posterior(problem, theta, y):
    K = np.asarray(problem.covariance(theta))
    noise = float(problem.theta_values(theta)["noise"])
    gain = K @ np.linalg.inv(K + noise**2 * np.eye(len(y)))
    return gain @ y, K - gain @ K


def test_ess_matches_exact_gp_posterior(regression):
    problem, theta, y = regression
    loglik = lambda f: problem.log_likelihood(f, theta)
    init, step = make_ess_kernel(jnp.linalg.cholesky(problem.covariance(theta)), loglik)
    starts = jax.vmap(init)(jax.random.split(jax.random.key(10), NUM_CHAINS), jnp.zeros((NUM_CHAINS, problem.n)))
    result = run_chains(step, starts, jax.random.key(11), 500, NUM_DRAWS, segment_size=1000, progress=False)
    f = np.asarray(result.draws)
    assert f.shape == (NUM_CHAINS, NUM_DRAWS, problem.n)
    assert result.infos.num_shrinks.shape == (NUM_CHAINS, NUM_DRAWS)
    assert result.infos.num_shrinks.mean() > 0 and not result.infos.gave_up.any()

    mean, cov = exact_posterior(problem, theta, y)
    squared = (f - mean) ** 2
    for i in range(problem.n):
        print(f"f[{i}] mean {f[..., i].mean():.4f} exact {mean[i]:.4f} MCSE {float(az.mcse(f[..., i])):.4f}; "
              f"var {squared[..., i].mean():.4f} exact {cov[i, i]:.4f} MCSE {float(az.mcse(squared[..., i])):.4f}")
        assert abs(f[..., i].mean() - mean[i]) < 4 * float(az.mcse(f[..., i])), f"mean of f[{i}]"
        assert abs(squared[..., i].mean() - cov[i, i]) < 4 * float(az.mcse(squared[..., i])), f"variance of f[{i}]"


def test_ess_step_keeps_the_slice_and_counts_shrinks(regression):
    problem, theta, _ = regression
    loglik = lambda f: problem.log_likelihood(f, theta)
    chol = jnp.linalg.cholesky(problem.covariance(theta))
    f = jnp.zeros(problem.n)
    step = jax.jit(lambda key, f, value: ess_step(key, f, value, chol, loglik))
    value = loglik(f)
    for key in jax.random.split(jax.random.key(0), 20):
        f_new, value_new, info = step(key, f, value)
        assert isinstance(info, ESSInfo) and int(info.num_shrinks) >= 0
        assert float(value_new) == pytest.approx(float(loglik(f_new)), rel=1e-10)
        f, value = f_new, value_new


def test_ess_with_an_impossible_likelihood_keeps_f():
    chol = jnp.eye(3)
    f = jnp.ones(3)
    f_new, value, info = ess_step(jax.random.key(1), f, jnp.asarray(0.0), chol, lambda v: jnp.asarray(jnp.nan),
                                  max_shrinks=5)
    np.testing.assert_array_equal(f_new, f)
    assert bool(info.gave_up) and int(info.num_shrinks) == 5 and float(value) == 0.0


def test_the_mapped_step_is_the_step_on_the_composed_likelihood():
    """Through a linear map the image of the ellipse is searched: the same points, shrinks and acceptances."""
    rng = np.random.default_rng(5)
    M = jnp.asarray(rng.normal(size=(40, 12))) / 4
    y = jnp.asarray(rng.poisson(2.0, size=40))
    image_loglik = lambda g: jnp.sum(y * g - jnp.exp(g))
    apply = lambda v: M @ v
    scale = jnp.asarray(rng.uniform(0.5, 2.0, 12))
    plain = jax.jit(lambda key, z, value: ess_step(key, z, value, scale, lambda v: image_loglik(apply(v))))
    mapped = jax.jit(lambda key, z, g, value: mapped_ess_step(key, z, g, value, scale, apply, image_loglik))
    z_plain = z_mapped = jnp.zeros(12)
    value_plain = value_mapped = image_loglik(apply(z_plain))
    image = apply(z_mapped)
    for key in jax.random.split(jax.random.key(2), 40):
        z_plain, value_plain, info_plain = plain(key, z_plain, value_plain)
        z_mapped, image, value_mapped, info_mapped = mapped(key, z_mapped, image, value_mapped)
        assert int(info_plain.num_shrinks) == int(info_mapped.num_shrinks)
    np.testing.assert_allclose(z_mapped, z_plain, atol=1e-12)
    np.testing.assert_allclose(image, apply(z_mapped), atol=1e-10)
    assert float(value_mapped) == pytest.approx(float(image_loglik(image)), rel=1e-12)


def test_the_standard_normal_step_samples_a_tilted_pytree_of_normals():
    """``loglik(u) = c . u`` tilts ``N(0, I)`` to ``N(c, I)``: every leaf of the pytree, mean and sd within 4 MCSE."""
    tilt = {"a": jnp.array([1.5, -0.5]), "b": jnp.array(0.8)}
    loglik = lambda u: jnp.sum(tilt["a"] * u["a"]) + tilt["b"] * u["b"]  # noqa: E731

    def chain(key):
        def one(carry, k):
            u, value = carry
            u, value, _ = standard_normal_ess_step(k, u, value, loglik)
            return (u, value), u

        start = {"a": jnp.zeros(2), "b": jnp.zeros(())}
        return jax.lax.scan(one, (start, loglik(start)), jax.random.split(key, 3000))[1]

    draws = jax.jit(jax.vmap(chain))(jax.random.split(jax.random.key(4), NUM_CHAINS))
    for name in ("a", "b"):
        values = np.asarray(draws[name]).reshape(NUM_CHAINS, 3000, -1)
        for j, expected in enumerate(np.atleast_1d(np.asarray(tilt[name]))):
            x = values[:, :, j]
            assert abs(x.mean() - expected) < 4 * float(az.mcse(x)), (name, j, x.mean())
            assert abs(x.std() - 1.0) < 4 * float(az.mcse(x, method="sd")), (name, j, x.std())
