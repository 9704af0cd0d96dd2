"""The Laplace approximation and EP of a latent state-space GP by Kalman smoothing
(gpdsl.inference.approximations.state_space) against the dense Laplace approximation and parallel EP of gpdsl with
the kernel matrix of the same kernel (a periodic term as its truncated cosine series, written out from SciPy's Bessel
functions), the draws of q against q's dense mean and covariance within Monte Carlo error, and the importance weight
against SciPy's Gaussian densities."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from gpdsl.inference.approximations import state_space
from gpdsl.inference.approximations.ep import ep, gaussian_from_sites
from gpdsl.inference.approximations.gaussian import posterior_mean_cov
from gpdsl.inference.approximations.laplace import laplace
from gpdsl.kernels import kalman
from gpdsl.kernels import Matern12, Matern32, Matern52, Periodic
from tests.inference.approximations.test_kalman import series_periodic

jax.config.update("jax_enable_x64", True)

ORDER = 12
TIGHT = {"tol": 1e-24, "max_iter": 200}
TIGHT_EP = {"tol": 1e-24, "max_sweeps": 2000}


def matern_gram(kernel, t):
    return np.asarray(kernel(t[:, None]), dtype=float)


def kernels():
    """Kernels with their dense covariance at times ``t`` (a periodic term as its series of ``ORDER`` harmonics)."""
    tau = lambda t: np.subtract.outer(t, t)  # noqa: E731
    return {
        "matern12": (Matern12(1.3, 0.7), lambda t: matern_gram(Matern12(1.3, 0.7), t)),
        "matern32": (Matern32(1.3, 0.7), lambda t: matern_gram(Matern32(1.3, 0.7), t)),
        "matern52": (Matern52(1.3, 0.9), lambda t: matern_gram(Matern52(1.3, 0.9), t)),
        "matern32 + periodic": (Matern32(1.0, 2.0) + Periodic(0.5, 0.7, 1.5),
                                lambda t: matern_gram(Matern32(1.0, 2.0), t)
                                + series_periodic(0.5, 0.7, 1.5, tau(t), ORDER)),
        "matern52 * periodic": (Matern52(1.1, 3.0) * Periodic(1.0, 0.7, 1.5),
                                lambda t: matern_gram(Matern52(1.1, 3.0), t)
                                * series_periodic(1.0, 0.7, 1.5, tau(t), ORDER)),
    }


KERNELS = kernels()


def series(likelihood, n=40, seed=2, repeats=True):
    """Unsorted irregular times (with a time twice and one three times), outcomes of ``likelihood`` with one missing,
    and an offset."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(0.0, 8.0, n)
    if repeats:
        t[7] = t[19]
        t[30] = t[31] = t[2]
    offset = 0.2 * np.cos(t)
    if likelihood == "poisson_log":
        y = rng.poisson(np.exp(0.5 + np.sin(t))).astype(float)
    else:
        y = (rng.uniform(size=n) < 1 / (1 + np.exp(-2 * np.sin(1.3 * t)))).astype(float)
    y[11] = np.nan
    return t, y, offset


@pytest.mark.parametrize("likelihood", ["poisson_log", "bernoulli_logit"])
@pytest.mark.parametrize("name", KERNELS)
def test_laplace_by_smoothing_is_the_dense_laplace(name, likelihood):
    kernel, gram = KERNELS[name]
    t, y, offset = series(likelihood)
    K = gram(t)
    dense = laplace(K, y, likelihood, offset=offset, **TIGHT)
    by_smoothing = state_space.laplace(kernel, t, y, likelihood, offset=offset, periodic_order=ORDER, **TIGHT)
    assert bool(dense.converged) and bool(by_smoothing.converged)
    np.testing.assert_allclose(by_smoothing.mean, dense.mean, atol=1e-6)
    np.testing.assert_allclose(by_smoothing.alpha, dense.alpha, atol=1e-6)
    np.testing.assert_allclose(by_smoothing.site_precision, dense.site_precision, atol=1e-6)
    assert float(by_smoothing.log_marginal) == pytest.approx(float(dense.log_marginal), abs=1e-6)
    np.testing.assert_allclose(np.sum(np.log(by_smoothing.chol_b)), np.sum(np.log(np.diag(dense.chol_b))), atol=1e-6)
    assert_marginals_are_dense(kernel, t, by_smoothing, dense, K)


def assert_marginals_are_dense(kernel, t, by_smoothing, dense, K):
    """q's marginals from the sites by smoothing against the dense q's."""
    mean, cov = posterior_mean_cov(dense, K)
    marginals = kalman.smooth(kernel, t, by_smoothing.site_precision, by_smoothing.site_location, ORDER)
    np.testing.assert_allclose(marginals.mean, mean, atol=1e-6)
    np.testing.assert_allclose(marginals.variance, np.diag(cov), atol=1e-6)


def test_the_laplace_log_marginal_is_that_of_the_pseudo_observations():
    """``log p(y | f_hat) + log N(y~ | 0, K + W^-1) - log N(y~ | f_hat, W^-1)``, ``y~ = f_hat + g / W``, by SciPy."""
    kernel, gram = KERNELS["matern32"]
    t, y, offset = series("poisson_log")
    y[11] = 1.0  # every point observed: every W positive
    fit = state_space.laplace(kernel, t, y, "poisson_log", offset=offset, **TIGHT)
    f = np.asarray(fit.mean)
    rate = np.exp(f + offset)
    W, grad = rate, y - rate
    pseudo = f + grad / W
    log_likelihood = stats.poisson.logpmf(y, rate).sum()
    expected = (log_likelihood + stats.multivariate_normal(np.zeros(t.size), gram(t) + np.diag(1 / W)).logpdf(pseudo)
                - stats.norm(f, np.sqrt(1 / W)).logpdf(pseudo).sum())
    assert float(fit.log_marginal) == pytest.approx(expected, abs=1e-8)


@pytest.mark.parametrize("likelihood", ["poisson_log", "bernoulli_logit"])
@pytest.mark.parametrize("name", KERNELS)
def test_ep_by_smoothing_is_the_dense_parallel_ep(name, likelihood):
    kernel, gram = KERNELS[name]
    t, y, offset = series(likelihood)
    K = gram(t)
    dense = ep(K, y, schedule="parallel", likelihood=likelihood, offset=offset, **TIGHT_EP)
    by_smoothing = state_space.ep(kernel, t, y, likelihood, offset=offset, periodic_order=ORDER, **TIGHT_EP)
    assert bool(dense.converged) and bool(by_smoothing.converged)
    np.testing.assert_allclose(by_smoothing.mean, dense.mean, atol=1e-6)
    np.testing.assert_allclose(by_smoothing.alpha, dense.alpha, atol=1e-6)
    np.testing.assert_allclose(by_smoothing.site_precision, dense.site_precision, atol=1e-6)
    np.testing.assert_allclose(by_smoothing.site_location, dense.site_location, atol=1e-6)
    assert float(by_smoothing.log_marginal) == pytest.approx(float(dense.log_marginal), abs=1e-6)
    assert_marginals_are_dense(kernel, t, by_smoothing, dense, K)


def test_a_warm_start_and_fixed_sites_are_those_of_the_dense_ep():
    kernel, gram = KERNELS["matern32 + periodic"]
    t, y, offset = series("bernoulli_logit")
    K = gram(t)
    rng = np.random.default_rng(0)
    sites = (rng.gamma(2.0, 0.5, t.size), rng.normal(size=t.size))
    warm = state_space.ep(kernel, t, y, offset=offset, initial_sites=sites, periodic_order=ORDER, **TIGHT_EP)
    dense_warm = ep(K, y, schedule="parallel", likelihood="bernoulli_logit", offset=offset, initial_sites=sites,
                    **TIGHT_EP)
    assert float(warm.log_marginal) == pytest.approx(float(dense_warm.log_marginal), abs=1e-6)
    fixed = state_space.from_sites(kernel, t, *sites, ORDER)
    dense_fixed = gaussian_from_sites(K, *sites)
    np.testing.assert_allclose(fixed.mean, dense_fixed.mean, atol=1e-8)
    np.testing.assert_allclose(fixed.alpha, dense_fixed.alpha, atol=1e-8)
    assert np.sum(np.log(fixed.chol_b)) == pytest.approx(float(np.sum(np.log(np.diag(dense_fixed.chol_b)))), abs=1e-8)


def dense_q(fit, K):
    """Mean and covariance of the Gaussian of ``fit``'s sites under ``K`` (singular at a repeated time), by NumPy."""
    S = np.diag(np.asarray(fit.site_precision))
    Sigma = K - K @ np.linalg.solve(np.eye(K.shape[0]) + S @ K, S @ K)
    return Sigma @ np.asarray(fit.site_location), Sigma


@pytest.mark.parametrize("name", ["matern52", "matern32 + periodic"])
def test_draws_by_backward_sampling_have_the_mean_and_covariance_of_q(name):
    kernel, gram = KERNELS[name]
    t = np.array([2.0, 0.3, 1.1, 1.1, 4.7, 0.9, 2.05, 3.0])  # unsorted, one repeat
    y = np.array([3.0, 0.0, 1.0, 2.0, 5.0, 1.0, np.nan, 2.0])
    fit = state_space.laplace(kernel, t, y, "poisson_log", periodic_order=ORDER, **TIGHT)
    mean, Sigma = dense_q(fit, gram(t))
    np.testing.assert_allclose(fit.mean, mean, atol=1e-8)
    n = 20_000
    draws = np.asarray(state_space.sample(kernel, t, fit, jax.random.PRNGKey(1), n, ORDER))
    assert draws.shape == (n, t.size)
    np.testing.assert_allclose(draws[:, 2], draws[:, 3], rtol=1e-9, atol=1e-12)  # the repeated time: one value
    deviations = draws - mean
    sample_cov = deviations.T @ deviations / n
    mcse = np.sqrt((np.outer(np.diag(Sigma), np.diag(Sigma)) + Sigma ** 2) / n)
    z_cov = (sample_cov - Sigma) / mcse
    z_mean = deviations.mean(0) / np.sqrt(np.diag(Sigma) / n)
    assert np.abs(z_cov).max() < 4.5 and np.abs(z_mean).max() < 4.5, (np.abs(z_cov).max(), np.abs(z_mean).max())


def test_the_innovations_drawn_with_the_states_have_the_law_of_q():
    """Draws of ``(s, z)`` by :func:`state_space.sample_path` under sites on ``f = M z`` (``M`` the recursion written
    out densely): ``s`` is the recursion of ``z`` and ``z`` has the Gaussian law ``N(0, I) prod_k site_k(f_k)``."""
    kernel = Matern32(1.3, 0.7) + Periodic(0.5, 0.9, 1.5)
    order = 2
    t = np.array([0.0, 0.4, 0.4, 1.3, 1.5, 2.6])  # sorted, one repeat
    chain = state_space.markov_chain(kernel, t, order)
    R = np.asarray(kalman.symmetric_square_root(chain.Q.at[0].set(chain.P_inf)))
    A, H = np.asarray(chain.A), np.asarray(chain.H)
    n, d = A.shape[0], A.shape[-1]
    M = np.zeros((n, n * d))
    for column in range(n * d):
        z, s = np.eye(n * d)[column].reshape(n, d), np.zeros(d)
        for k in range(n):
            s = A[k] @ s + R[k] @ z[k]
            M[k, column] = H @ s
    rng = np.random.default_rng(1)
    precision, natural_mean = rng.gamma(2.0, 1.0, n), rng.normal(size=n)
    precision[3] = natural_mean[3] = 0.0  # no site
    covariance = np.linalg.inv(np.eye(n * d) + M.T @ (precision[:, None] * M))
    mean = covariance @ M.T @ natural_mean
    draws = 20_000
    states, innovations = state_space.sample_path(chain.A, jnp.asarray(R), chain.H, jnp.asarray(precision),
                                                  jnp.asarray(natural_mean), jax.random.PRNGKey(2), draws)
    z = np.asarray(innovations).reshape(draws, n * d)
    recursion = np.zeros((draws, d))
    for k in range(n):
        recursion = recursion @ A[k].T + np.asarray(innovations[:, k]) @ R[k].T
        np.testing.assert_allclose(recursion, states[:, k], atol=1e-9)
    deviations = z - mean
    sample_cov = deviations.T @ deviations / draws
    mcse = np.sqrt((np.outer(np.diag(covariance), np.diag(covariance)) + covariance ** 2) / draws)
    z_cov = (sample_cov - covariance) / mcse
    z_mean = deviations.mean(0) / np.sqrt(np.diag(covariance) / draws)
    assert np.abs(z_cov).max() < 5.0 and np.abs(z_mean).max() < 4.5, (np.abs(z_cov).max(), np.abs(z_mean).max())


@pytest.mark.parametrize("approximation", ["laplace", "ep"])
def test_the_importance_weight_is_prior_over_q_by_scipy(approximation):
    kernel, gram = KERNELS["matern32"]
    t, y, offset = series("poisson_log", n=30, repeats=False)  # K regular, for SciPy's densities
    fit = getattr(state_space, approximation)(kernel, t, y, "poisson_log", offset=offset)
    K = gram(t)
    mean, Sigma = dense_q(fit, K)
    draws = np.asarray(state_space.sample(kernel, t, fit, jax.random.PRNGKey(4), 6, ORDER))
    expected = (stats.multivariate_normal(np.zeros(t.size), K).logpdf(draws)
                - stats.multivariate_normal(mean, Sigma).logpdf(draws))
    np.testing.assert_allclose(state_space.log_prior_minus_log_q(fit, jnp.asarray(draws)), expected,
                               rtol=1e-8, atol=1e-8)


def test_the_approximations_run_under_vmap_over_kernels():
    t, y, offset = series("poisson_log", n=20, repeats=False)

    def log_marginal(lengthscale):
        return state_space.laplace(Matern32(1.0, lengthscale), t, y, "poisson_log", offset=offset).log_marginal

    lengthscales = jnp.asarray([0.5, 1.0, 2.0])
    batched = jax.vmap(log_marginal)(lengthscales)
    one_by_one = [float(laplace(matern_gram(Matern32(1.0, float(ell)), t), y, "poisson_log", offset=offset)
                        .log_marginal) for ell in lengthscales]
    np.testing.assert_allclose(batched, one_by_one, atol=1e-6)
