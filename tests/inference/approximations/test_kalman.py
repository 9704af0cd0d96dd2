"""The state-space GP in O(N) (gpdsl.kernels.kalman) against the dense GP computed by NumPy/SciPy.

Every reference is a dense computation with the kernel matrix: the Cholesky factor of ``K + sigma^2 I`` for the
log marginal likelihood and the posterior, ``(K^-1 + diag(lambda))^-1`` for Gaussian sites, the dense Laplace and
EP approximations of gpdsl for their sites, and the sample covariance of many draws against ``K`` within its Monte
Carlo standard error. A periodic kernel is compared with the covariance of its truncated cosine series, written
out from SciPy's Bessel functions, and with the exact periodic kernel within the truncation bound.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
import scipy.special
import scipy.stats

from gpdsl.errors import DataError, MethodError
from gpdsl.kernels import kalman
from gpdsl.inference.approximations.ep import ep
from gpdsl.inference.approximations.gaussian import posterior_mean_cov
from gpdsl.inference.approximations.laplace import laplace
from gpdsl.kernels import RBF, Matern12, Matern32, Matern52, Periodic

ORDER = 12  # harmonics past which the periodic kernels here (length-scales >= 0.6) drop nothing above 1e-15
NOISE = 0.09


def kernels():
    """Each supported kernel (as a function of its hyperparameters, for gradients) and its hyperparameters."""
    return {
        "matern12": (lambda v, l: Matern12(v, l), (1.3, 0.7)),
        "matern32": (lambda v, l: Matern32(v, l), (1.3, 0.7)),
        "matern52": (lambda v, l: Matern52(v, l), (1.3, 0.7)),
        "periodic": (lambda v, l, p: Periodic(v, l, p), (1.2, 0.6, 2.3)),
        "matern32 + periodic": (lambda v, l, w, p: Matern32(v, l) + Periodic(w, 0.7, p), (1.0, 2.0, 0.5, 1.5)),
        "quasi-periodic": (lambda v, l, p: Matern52(v, l) * Periodic(1.0, 0.7, p), (1.1, 3.0, 1.5)),
        "scaled": (lambda s, l: s * Matern32(1.0, l), (2.5, 0.5)),
    }


KERNELS = kernels()


@pytest.fixture(scope="module")
def data():
    """Unsorted times with a repeated one, and outcomes with two missing."""
    rng = np.random.default_rng(3)
    t = rng.uniform(0.0, 8.0, 50)
    t[7] = t[19]
    t[30] = t[31]
    y = np.sin(1.3 * t) + 0.5 * np.cos(4.0 * t) + np.sqrt(NOISE) * rng.normal(size=t.size)
    y[[4, 40]] = np.nan
    return t, y


def dense_log_marginal(K, y, noise):
    observed = ~np.isnan(y)
    C = K[np.ix_(observed, observed)] + noise * np.eye(observed.sum())
    factor = np.linalg.cholesky(C)
    alpha = scipy.linalg.cho_solve((factor, True), y[observed])
    return -0.5 * y[observed] @ alpha - np.log(np.diag(factor)).sum() - 0.5 * observed.sum() * np.log(2 * np.pi)


def dense_posterior(K, y, noise, K_new=None, K_new_diag=None):
    observed = ~np.isnan(y)
    C = K[np.ix_(observed, observed)] + np.diag(np.broadcast_to(noise, y.shape)[observed])
    cross = K[:, observed] if K_new is None else K_new[:, observed]
    diag = np.diag(K) if K_new_diag is None else K_new_diag
    mean = cross @ np.linalg.solve(C, y[observed])
    return mean, diag - np.einsum("ij,ji->i", cross, np.linalg.solve(C, cross.T))


def gram(kernel, t, s=None):
    return np.asarray(kernel(t[:, None], None if s is None else s[:, None]), dtype=float)


def series_periodic(variance, lengthscale, period, tau, order):
    """The periodic kernel's cosine series truncated after ``order`` harmonics, from SciPy's Bessel functions."""
    weights = scipy.special.ive(np.arange(order + 1), 0.25 / lengthscale ** 2) * np.r_[1.0, np.full(order, 2.0)]
    return variance * np.cos(np.multiply.outer(tau, np.arange(order + 1)) * 2 * np.pi / period) @ weights


@pytest.mark.parametrize("name", KERNELS)
def test_the_log_marginal_likelihood_is_the_dense_one(data, name):
    t, y = data
    make, theta = KERNELS[name]
    kernel = make(*theta)
    expected = dense_log_marginal(gram(kernel, t), y, NOISE)
    value = float(kalman.log_marginal_likelihood(kernel, t, y, NOISE, periodic_order=ORDER))
    assert value == pytest.approx(expected, rel=1e-8)


@pytest.mark.parametrize("name", KERNELS)
def test_the_gradient_is_the_dense_gradient(data, name):
    t, y = data
    make, theta = KERNELS[name]
    observed = ~np.isnan(y)

    def dense(theta, noise):
        K = make(*theta)(t[observed][:, None])
        factor = jax.scipy.linalg.cho_factor(K + noise * jnp.eye(observed.sum()), lower=True)
        alpha = jax.scipy.linalg.cho_solve(factor, y[observed])
        return -0.5 * y[observed] @ alpha - jnp.log(jnp.diag(factor[0])).sum()

    def state_space(theta, noise):
        return kalman.log_marginal_likelihood(make(*theta), t, y, noise, periodic_order=ORDER)

    theta = tuple(jnp.asarray(v) for v in theta)
    expected = jax.grad(dense, argnums=(0, 1))(theta, NOISE)
    gradient = jax.jit(jax.grad(state_space, argnums=(0, 1)))(theta, NOISE)
    np.testing.assert_allclose(np.hstack(gradient), np.hstack(expected), rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("name", ["matern52", "matern32 + periodic"])
@pytest.mark.parametrize("segment, regular", [(7, False), (7, True), (64, False)])
def test_the_lean_filter_over_sorted_times_is_the_plain_filter(data, name, segment, regular, monkeypatch):
    """Times given as data run the filter in segments (of 7 steps: several, the last padded, recomputed for the
    gradient; of 64: one, kept),
    the transitions looked up among few distinct steps (whole-number times, a repeated one: steps 0, 1 and 2) or computed
    in each segment (50 irregular times: 48 distinct steps); times traced by JAX run the plain scan. Same value and
    gradient."""
    monkeypatch.setattr(kalman, "SEGMENT_STEPS", segment)
    monkeypatch.setattr(kalman, "CHECKPOINT_BYTES", 0 if segment == 7 else 2 ** 30)  # recomputed segments at 7
    t, y = data
    if regular:
        t = np.arange(50.0)
        t[11] = t[10]
    make, theta = KERNELS[name]
    theta = tuple(jnp.asarray(v) for v in theta)

    def lean(theta, noise):
        return kalman.log_marginal_likelihood(make(*theta), t, y, noise, periodic_order=ORDER)

    def plain(theta, noise, times):
        return kalman.log_marginal_likelihood(make(*theta), times, y, noise, periodic_order=ORDER)

    value, gradient = jax.value_and_grad(lean, argnums=(0, 1))(theta, NOISE)
    plain_value, plain_gradient = jax.jit(jax.value_and_grad(plain, argnums=(0, 1)))(theta, NOISE, jnp.asarray(t))
    assert float(value) == pytest.approx(float(plain_value), rel=1e-12)
    np.testing.assert_allclose(np.hstack(gradient), np.hstack(plain_gradient), rtol=1e-10, atol=1e-12)
    grid = kalman.time_grid(t)
    assert grid.distinct.size == (3 if regular else 48)  # 49 steps; the repeated time's 0 (and 2 after it)
    assert float(kalman.log_marginal_likelihood(make(*theta), grid, y, NOISE, periodic_order=ORDER)) == float(value)


@pytest.mark.parametrize("name", KERNELS)
@pytest.mark.parametrize("segment", [7, 64])
def test_groups_restart_the_state_as_independent_series(data, name, segment, monkeypatch):
    """``time_grid(t, groups)``: the kernel ``k(t) * same(group)``, block-diagonal over three interleaved groups with
    overlapping times; its log marginal and gradient equal the dense block-diagonal ones, with the transitions of the
    distinct steps looked up (segments of 64) and computed in each segment (7)."""
    monkeypatch.setattr(kalman, "SEGMENT_STEPS", segment)
    t, y = data
    groups = np.arange(t.size) % 3
    make, theta = KERNELS[name]
    same = groups[:, None] == groups[None, :]
    grid = kalman.time_grid(t, groups)
    assert np.isinf(grid.distinct).any() and np.sum(np.isinf(grid.distinct[grid.index[1:]])) == 2
    observed = ~np.isnan(y)

    def dense(theta, noise):
        K = make(*theta)(t[observed][:, None]) * same[np.ix_(observed, observed)]
        factor = jax.scipy.linalg.cho_factor(K + noise * jnp.eye(observed.sum()), lower=True)
        alpha = jax.scipy.linalg.cho_solve(factor, y[observed])
        return (-0.5 * y[observed] @ alpha - jnp.log(jnp.diag(factor[0])).sum()
                - 0.5 * observed.sum() * jnp.log(2 * jnp.pi))

    def grouped(theta, noise):
        return kalman.log_marginal_likelihood(make(*theta), grid, y, noise, periodic_order=ORDER)

    theta = tuple(jnp.asarray(v) for v in theta)
    value, gradient = jax.value_and_grad(grouped, argnums=(0, 1))(theta, NOISE)
    expected, expected_gradient = jax.value_and_grad(dense, argnums=(0, 1))(theta, NOISE)
    assert float(value) == pytest.approx(float(expected), rel=1e-8)
    np.testing.assert_allclose(np.hstack(gradient), np.hstack(expected_gradient), rtol=1e-7, atol=1e-9)


def test_groups_need_a_label_per_time():
    with pytest.raises(DataError, match="2 labels for 3 times"):
        kalman.time_grid([0.0, 1.0, 2.0], [1, 2])


def test_a_truncated_periodic_kernel_is_its_series_and_near_the_exact_kernel(data):
    t, y = data
    variance, lengthscale, period, order = 1.2, 0.35, 2.3, 5
    kernel = Periodic(variance, lengthscale, period)
    truncated = series_periodic(variance, lengthscale, period, np.subtract.outer(t, t), order)
    value = float(kalman.log_marginal_likelihood(kernel, t, y, NOISE, periodic_order=order))
    assert value == pytest.approx(dense_log_marginal(truncated, y, NOISE), rel=1e-8)
    # the dropped harmonics are a PSD matrix E with diagonal eps: log det and quadratic form move by at most
    # tr(C^-1 E) <= n eps / sigma^2 and y^T C^-1 E C^-1 y <= n eps |C^-1 y|^2
    eps = float(kernel.truncation_error(order))
    observed = ~np.isnan(y)
    C = truncated[np.ix_(observed, observed)] + NOISE * np.eye(observed.sum())
    solved = np.linalg.solve(C, y[observed])
    bound = 0.5 * observed.sum() * eps * (1.0 / NOISE + solved @ solved)
    difference = abs(value - dense_log_marginal(gram(kernel, t), y, NOISE))
    assert 1e-6 < difference <= bound  # a visible truncation, inside its bound


@pytest.mark.parametrize("name", ["matern32", "periodic", "matern32 + periodic", "quasi-periodic"])
def test_the_smoother_gives_the_dense_posterior_marginals(data, name):
    t, y = data
    make, theta = KERNELS[name]
    kernel = make(*theta)
    mean, variance = dense_posterior(gram(kernel, t), y, NOISE)
    smoothed = kalman.posterior_marginals(kernel, t, y, NOISE, periodic_order=ORDER)
    np.testing.assert_allclose(smoothed.mean, mean, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(smoothed.variance, variance, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("name", ["matern52", "matern32 + periodic"])
def test_predictions_at_new_times_are_the_dense_predictions(data, name):
    t, y = data
    make, theta = KERNELS[name]
    kernel = make(*theta)
    new = np.array([9.5, -1.0, 3.3, t[7], 4.0, 4.0])  # outside, inside, on a data time, repeated
    noise = np.full(t.size, NOISE) * np.linspace(0.5, 1.5, t.size)  # one variance per point
    K_new = gram(kernel, new, t)
    mean, variance = dense_posterior(gram(kernel, t), y, noise, K_new, np.diag(gram(kernel, new)))
    predicted = kalman.predict(kernel, t, y, noise, new, periodic_order=ORDER)
    np.testing.assert_allclose(predicted.mean, mean, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(predicted.variance, variance, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("name", ["matern12", "matern52", "quasi-periodic"])
def test_gaussian_sites_give_the_dense_posterior_and_normaliser(data, name):
    t, _ = data
    make, theta = KERNELS[name]
    kernel = make(*theta)
    rng = np.random.default_rng(5)
    precision = rng.gamma(2.0, 1.0, t.size)
    precision[[3, 11]] = 0.0  # no site
    natural_mean = rng.normal(size=t.size) * precision
    K = gram(kernel, t)
    Sigma = K - K @ np.linalg.solve(np.eye(t.size) + np.diag(precision) @ K, np.diag(precision) @ K)
    log_normaliser = 0.5 * natural_mean @ Sigma @ natural_mean - 0.5 * np.linalg.slogdet(
        np.eye(t.size) + K @ np.diag(precision))[1]
    posterior = kalman.smooth(kernel, t, precision, natural_mean, periodic_order=ORDER)
    np.testing.assert_allclose(posterior.mean, Sigma @ natural_mean, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(posterior.variance, np.diag(Sigma), rtol=1e-8, atol=1e-10)
    assert float(posterior.log_normaliser) == pytest.approx(log_normaliser, rel=1e-8)
    assert float(kalman.site_normaliser(kernel, t, precision, natural_mean, ORDER)) == pytest.approx(
        log_normaliser, rel=1e-8)


@pytest.fixture(scope="module")
def count_series():
    rng = np.random.default_rng(11)
    t = rng.uniform(0.0, 10.0, 40)
    kernel = Matern32(1.5, 1.2) + Periodic(0.4, 0.8, 3.0)
    return rng, t, kernel, gram(kernel, t)


def test_laplace_by_smoothing_is_the_dense_laplace(count_series):
    rng, t, kernel, K = count_series
    y = rng.poisson(np.exp(1.0 + np.sin(t)))
    dense = laplace(K, y, "poisson_log", tol=1e-24, max_iter=200)
    sites = kalman.smooth(kernel, t, dense.site_precision, dense.site_location, periodic_order=ORDER)
    np.testing.assert_allclose(sites.mean, dense.mean, rtol=1e-6, atol=1e-8)
    f = np.asarray(sites.mean)
    log_likelihood = float(np.sum(scipy.stats.poisson.logpmf(y, np.exp(f))))
    log_marginal = (log_likelihood + 0.5 * f @ (dense.site_precision * f) - dense.site_location @ f
                    + float(sites.log_normaliser))
    assert log_marginal == pytest.approx(float(dense.log_marginal), rel=1e-6)


def test_ep_marginals_by_smoothing_are_the_dense_ones(count_series):
    rng, t, kernel, K = count_series
    labels = (np.sin(t) + 0.3 * rng.normal(size=t.size) > 0).astype(float)
    approximation = ep(K, labels, tol=1e-20, max_sweeps=200, likelihood="bernoulli_probit")
    mean, cov = posterior_mean_cov(approximation, K)
    by_smoothing = kalman.smooth(kernel, t, approximation.site_precision, approximation.site_location,
                                 periodic_order=ORDER)
    np.testing.assert_allclose(by_smoothing.mean, mean, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(by_smoothing.variance, np.diag(cov), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", ["matern52", "matern32 + periodic"])
def test_prior_draws_have_the_kernel_covariance(name):
    make, theta = KERNELS[name]
    kernel = make(*theta)
    t = np.array([2.0, 0.3, 1.1, 1.1, 4.7, 0.9, 2.05, 3.0])  # unsorted, one repeat
    n = 20_000
    draws = np.asarray(kalman.prior_draws(jax.random.PRNGKey(0), kernel, t, n, periodic_order=ORDER))
    assert draws.shape == (n, t.size)
    K = gram(kernel, t)
    np.testing.assert_allclose(draws[:, 2], draws[:, 3])  # the repeated time draws one value
    sample_cov = draws.T @ draws / n  # the mean is known to be zero
    mcse = np.sqrt((np.outer(np.diag(K), np.diag(K)) + K ** 2) / n)  # sd of the mean of f_i f_j
    z = (sample_cov - K) / mcse
    mean_z = draws.mean(0) / np.sqrt(np.diag(K) / n)
    assert np.abs(z).max() < 4.5 and np.abs(mean_z).max() < 4.5, (np.abs(z).max(), np.abs(mean_z).max())


def test_bad_input_is_refused_with_the_reason():
    t = np.linspace(0.0, 1.0, 5)
    with pytest.raises(DataError, match=r"y has shape \(4,\); expected \(5,\)"):
        kalman.log_marginal_likelihood(Matern32(1.0, 0.5), t, np.zeros(4), 0.1)
    with pytest.raises(DataError, match=r"a time per point, or a time and a group label; got inputs of shape \(5, 3\)"):
        kalman.prior_draws(jax.random.PRNGKey(0), Matern32(1.0, 0.5), np.zeros((5, 3)))
    with pytest.raises(MethodError, match="RBF has no state-space form"):
        kalman.log_marginal_likelihood(RBF(1.0, lengthscale=0.5), t, np.zeros(5), 0.1)
