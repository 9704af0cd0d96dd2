"""The sparse variational GP bound (Hensman et al. 2015): exact with Z = X, Titsias's bound at the optimal q(u),
natural-gradient steps, and unbiased minibatch gradients."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

from gpdsl.inference.variational import svgp
from gpdsl.inference.variational.sgpr import sgpr_bound
from gpdsl.kernels import RBF, Matern32
from gpdsl.likelihoods import LIKELIHOODS
from tests.inference.variational.test_sgpr import exact_gp, regression_data

NOISE = 0.05


def gaussian_expected(y, noise_variance):
    return lambda mean, var: LIKELIHOODS["normal"].expected_log_density(y, mean, var, jnp.sqrt(noise_variance))


def bound_at_optimum(kernel, X, y, Z, whiten, jitter):
    mean, covariance = svgp.gaussian_optimal_moments(kernel, Z, X, y, NOISE, whiten=whiten, jitter=jitter)
    return svgp.svgp_bound_moments(gaussian_expected(jnp.asarray(y), NOISE), kernel, Z, X, mean, covariance,
                                   whiten=whiten, jitter=jitter), (mean, covariance)


@pytest.mark.parametrize("whiten", [True, pytest.param(False, marks=pytest.mark.slow)])
def test_inducing_inputs_at_the_training_inputs_give_the_exact_gp(whiten):
    """Z = X (M = N) at the optimal q(u): the bound is the exact log marginal likelihood and q(f*) the exact
    predictive of f*."""
    kernel = 1.3 * RBF(lengthscale=jnp.array([0.7, 1.2]))
    X, y = regression_data()
    X_new = np.random.default_rng(1).uniform(-3, 3, size=(7, 2))
    log_marginal, mean, variance = exact_gp(kernel, X, y, NOISE, X_new)
    bound, (q_mean, q_covariance) = jax.jit(bound_at_optimum, static_argnums=(4, 5))(kernel, X, y, X, whiten, 0.0)
    assert float(bound) == pytest.approx(log_marginal, abs=1e-7)
    f_mean, f_variance = jax.jit(svgp.latent_marginals, static_argnames=("whiten", "jitter"))(
        kernel, X, X_new, q_mean, q_covariance, whiten=whiten, jitter=0.0)
    np.testing.assert_allclose(f_mean, mean, atol=1e-7)
    np.testing.assert_allclose(f_variance, variance, atol=1e-7)


@pytest.mark.parametrize("whiten", [True, pytest.param(False, marks=pytest.mark.slow)])
def test_optimal_q_gives_titsias_bound_and_is_the_maximum(whiten):
    """M < N: at the closed-form optimal q(u) the bound equals sgpr's collapsed bound at the same Z and
    hyperparameters, its gradient in q(u)'s moments vanishes, and moving q(u) lowers it."""
    kernel = Matern32(variance=0.8, lengthscale=0.9)
    X, y = regression_data(60, seed=3)
    Z = X[::6] + 0.05
    expected = gaussian_expected(jnp.asarray(y), NOISE)
    nudge = 1e-2 * np.random.default_rng(0).normal(size=Z.shape[0])

    def of_moments(m, S):
        return svgp.svgp_bound_moments(expected, kernel, Z, X, m, S, whiten=whiten)

    @jax.jit
    def everything():
        bound, (mean, covariance) = bound_at_optimum(kernel, X, y, Z, whiten, 1e-8)
        gradients = jax.grad(of_moments, argnums=(0, 1))(mean, covariance)
        scale = jnp.max(jnp.abs(jax.grad(of_moments)(jnp.zeros_like(mean), covariance)))
        moved = of_moments(mean + nudge, covariance), of_moments(mean, 1.05 * covariance)
        return bound, sgpr_bound(kernel, X, y, Z, NOISE), gradients, scale, moved

    bound, titsias, (gradient_mean, gradient_covariance), scale, moved = everything()
    assert float(bound) == pytest.approx(float(titsias), abs=1e-7)
    assert float(jnp.max(jnp.abs(gradient_mean))) < 1e-6 * float(scale)
    assert float(jnp.max(jnp.abs(gradient_covariance))) < 1e-5 * float(scale)
    assert all(float(value) < float(bound) for value in moved)


@pytest.mark.parametrize("whiten", [True, pytest.param(False, marks=pytest.mark.slow)])
def test_a_unit_natural_gradient_step_reaches_the_optimal_q(whiten):
    """Gaussian likelihood, whole data: from the prior, one natural-gradient step of size 1 lands on Titsias's q(u)
    (Salimbeni et al. 2018, Sec. 3)."""
    kernel = RBF(lengthscale=0.8) * 1.1
    X, y = regression_data(40, seed=5)
    Z = X[:12]
    expected = gaussian_expected(jnp.asarray(y), NOISE)
    prior_covariance = jnp.eye(12) if whiten else svgp.inducing_covariance(kernel, Z, 1e-8)

    def of_moments(m, S):
        return svgp.svgp_bound_moments(expected, kernel, Z, X, m, S, whiten=whiten)

    @jax.jit
    def both(prior_covariance):
        mean, covariance = svgp.natural_gradient_step(of_moments, jnp.zeros(12), prior_covariance, 1.0)
        best = svgp.gaussian_optimal_moments(kernel, Z, X, y, NOISE, whiten=whiten)
        return mean, covariance, *best, of_moments(mean, covariance), sgpr_bound(kernel, X, y, Z, NOISE)

    mean, covariance, best_mean, best_covariance, bound, titsias = both(prior_covariance)
    np.testing.assert_allclose(mean, best_mean, rtol=1e-6, atol=1e-6 * float(jnp.max(jnp.abs(best_mean))))
    np.testing.assert_allclose(covariance, best_covariance, atol=1e-6 * float(jnp.max(jnp.abs(best_covariance))))
    assert float(bound) == pytest.approx(float(titsias), abs=1e-6)


def test_minibatch_gradient_is_unbiased():
    """Bernoulli-logit (Gauss-Hermite expectations): over 4000 batches of 10 of 50 points drawn with replacement, the
    mean gradient of the scaled batch bound in q(u)'s mean and factor, the inducing inputs and the kernel's
    hyperparameters equals the full-data gradient within 4.5 Monte Carlo standard errors in every coordinate."""
    rng = np.random.default_rng(7)
    X = rng.uniform(-2, 2, size=(50, 1))
    y = jnp.asarray((np.sin(2 * X[:, 0]) + 0.5 * rng.normal(size=50) > 0).astype(float))
    X = jnp.asarray(X)
    likelihood = LIKELIHOODS["bernoulli_logit"]
    M = 6
    start = {"mean": jnp.asarray(rng.normal(size=M)), "chol": jnp.asarray(np.tril(0.3 * rng.normal(size=(M, M)))
                                                                         + np.eye(M)),
             "Z": jnp.asarray(np.linspace(-2, 2, M)[:, None]), "log_lengthscale": jnp.asarray(-0.3),
             "log_variance": jnp.asarray(0.2)}

    def estimate(params, index):
        kernel = jnp.exp(params["log_variance"]) * RBF(lengthscale=jnp.exp(params["log_lengthscale"]))
        expected = lambda m, v: likelihood.expected_log_density(y[index], m, v)  # noqa: E731
        return svgp.svgp_bound(expected, kernel, params["Z"], X[index], params["mean"], params["chol"],
                               scale=50 / index.shape[0])

    full = ravel_pytree(jax.jit(jax.grad(estimate))(start, jnp.arange(50)))[0]
    batches = jax.random.randint(jax.random.PRNGKey(3), (4000, 10), 0, 50)
    per_batch = jax.jit(jax.vmap(lambda b: ravel_pytree(jax.grad(estimate)(start, b))[0]))(batches)
    per_batch = np.asarray(per_batch)
    mcse = per_batch.std(axis=0, ddof=1) / np.sqrt(len(per_batch))
    moving = mcse > 0  # coordinates a batch changes (the strict upper triangle of chol does not enter)
    z = np.abs(per_batch.mean(axis=0) - np.asarray(full))[moving] / mcse[moving]
    assert moving.sum() == M + M * (M + 1) // 2 + M + 2 and z.max() < 4.5, z.max()


@pytest.mark.parametrize("name", ["poisson_log", "bernoulli_logit"])
def test_the_optimum_under_a_non_gaussian_likelihood_is_opper_and_archambeaus_fixed_point(name):
    """M = N, fixed kernel: natural-gradient steps (size 0.5) reach the Gaussian variational posterior, whose mean
    and covariance at the inputs satisfy m = K E_q[d log p / df] and S^-1 = K^-1 - diag(E_q[d2 log p / df2])
    (Opper & Archambeau 2009); the expectations of the reference by NumPy's 200-node Gauss-Hermite rule."""
    rng = np.random.default_rng(8)
    X = np.linspace(-2, 2, 15)[:, None]
    kernel = Matern32(variance=1.2, lengthscale=0.8)
    eta = np.sin(2 * X[:, 0])
    y = rng.poisson(np.exp(eta)) if name == "poisson_log" else (rng.uniform(size=15) < 1 / (1 + np.exp(-eta)))
    y = jnp.asarray(y, dtype=float)
    likelihood = LIKELIHOODS[name]

    def of_moments(m, S):
        return svgp.svgp_bound_moments(lambda mean, var: likelihood.expected_log_density(y, mean, var), kernel, X, X,
                                       m, S)

    @jax.jit
    def optimum():
        def step(_, q):
            return svgp.natural_gradient_step(of_moments, *q, 0.5)

        mean, covariance = jax.lax.fori_loop(0, 300, step, (jnp.zeros(15), jnp.eye(15)))
        L = svgp.inducing_factor(kernel, X)
        return L @ mean, L @ covariance @ L.T, svgp.inducing_covariance(kernel, X, svgp.DEFAULT_JITTER)

    mean, covariance, K = (np.asarray(a) for a in optimum())
    nodes, weights = np.polynomial.hermite.hermgauss(200)
    f = mean[:, None] + np.sqrt(2 * np.diag(covariance))[:, None] * nodes
    rate = np.exp(f) if name == "poisson_log" else 1 / (1 + np.exp(-f))
    first = np.asarray(y) - (rate @ weights) / np.sqrt(np.pi)
    curvature = (rate if name == "poisson_log" else rate * (1 - rate)) @ weights / np.sqrt(np.pi)
    np.testing.assert_allclose(mean, K @ first, atol=1e-6)
    np.testing.assert_allclose(covariance, np.linalg.inv(np.linalg.inv(K) + np.diag(curvature)), atol=1e-6)
