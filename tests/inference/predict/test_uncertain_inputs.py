"""GP predictions at Gaussian inputs (eqs. 40-41 of Damianou et al. 2016) against independent answers."""

import jax
import numpy as np
import pytest

from gpdsl.errors import DataError, MethodError, NumericalError
from gpdsl.kernels import build_kernel
from gpdsl.kernels.psi import PsiMethod
from gpdsl.inference.predict.uncertain_inputs import predict_gaussian_inputs

NOISE = 0.05


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, size=(15, 2))
    Y = np.column_stack([np.sin(X[:, 0]) + 0.5 * X[:, 1], np.cos(X[:, 1]) - 0.3 * X[:, 0]])
    Y = Y + 0.1 * rng.normal(size=Y.shape)
    kernel = build_kernel("rbf", variance=1.3, lengthscale=np.array([0.9, 1.4])) + \
        build_kernel("linear", variance=np.array([0.2, 0.1]))
    return X, Y, kernel


def exact_gp(kernel, X, Y, X_new, noise):
    """Exact GP predictive of y* (noise included), by dense NumPy solves."""
    K = np.asarray(kernel(X)) + noise * np.eye(len(X))
    K_star = np.asarray(kernel.cross(X, X_new))
    mean = K_star.T @ np.linalg.solve(K, Y)
    variance = np.asarray(kernel.diag(X_new)) - np.sum(K_star * np.linalg.solve(K, K_star), axis=0) + noise
    return mean, variance


def point_moments(kernel, X, Y, points, noise):
    """Predictive means (n, J) and variances of f (n,) at fixed points, exact GP."""
    mean, variance = exact_gp(kernel, X, Y, points, noise)
    return mean, variance - noise


@pytest.mark.parametrize("jitter, tolerance", [(0.0, 1e-9), (1e-6, 1e-4)])
def test_zero_input_variances_give_the_exact_gp(data, jitter, tolerance):
    X, Y, kernel = data
    X_new = np.array([[0.3, -0.4], [1.7, 0.2], [-2.5, 2.5]])
    prediction = predict_gaussian_inputs(kernel, NOISE, X, X, np.zeros_like(X), Y, X_new, np.zeros_like(X_new),
                                         PsiMethod("analytic"), jitter=jitter)
    mean, variance = exact_gp(kernel, X, Y, X_new, NOISE)
    np.testing.assert_allclose(prediction.mean, mean, rtol=tolerance, atol=tolerance)
    np.testing.assert_allclose(prediction.variance, variance[:, None].repeat(2, axis=1), rtol=tolerance)
    latent = predict_gaussian_inputs(kernel, NOISE, X, X, np.zeros_like(X), Y, X_new, np.zeros_like(X_new),
                                     PsiMethod("analytic"), jitter=jitter, include_noise=False)
    np.testing.assert_allclose(prediction.variance - latent.variance, NOISE, rtol=1e-9)


def test_analytic_moments_equal_gauss_hermite_with_many_nodes(data):
    X, Y, kernel = data
    mean, variance = np.array([[0.3, -0.4], [1.1, 0.9]]), np.array([[0.2, 0.05], [0.4, 0.3]])
    X_variance = np.full_like(X, 0.02)
    analytic = predict_gaussian_inputs(kernel, NOISE, X[:8], X, X_variance, Y, mean, variance, PsiMethod("analytic"))
    gh = predict_gaussian_inputs(kernel, NOISE, X[:8], X, X_variance, Y, mean, variance,
                                 PsiMethod("gauss_hermite", nodes=30))
    np.testing.assert_allclose(gh.mean, analytic.mean, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(gh.covariance, analytic.covariance, rtol=1e-9, atol=1e-11)
    unscented = predict_gaussian_inputs(kernel, NOISE, X[:8], X, X_variance, Y, mean, variance,
                                        PsiMethod("unscented"))
    assert not np.allclose(unscented.mean, analytic.mean, rtol=1e-6)  # a different rule, close but not exact
    np.testing.assert_allclose(unscented.mean, analytic.mean, atol=0.05)


def total_moments(kernel, X, Y, mean, variance, noise, points_per_input, rng):
    """Law of total (co)variance over draws of x*, with the Monte Carlo standard errors of each entry."""
    results = []
    for m, v in zip(mean, variance):
        draws = m + np.sqrt(v) * rng.normal(size=(points_per_input, len(m)))
        f_mean, f_var = point_moments(kernel, X, Y, draws, noise)
        centred = f_mean - f_mean.mean(axis=0)
        products = centred[:, :, None] * centred[:, None, :]
        total = products.mean(axis=0) + np.diag(np.full(Y.shape[1], f_var.mean() + noise))
        error = (products.std(axis=0) + np.diag(np.full(Y.shape[1], f_var.std()))) / np.sqrt(points_per_input)
        results.append((f_mean.mean(axis=0), f_mean.std(axis=0) / np.sqrt(points_per_input), total, error))
    return [np.array(part) for part in zip(*results)]


def test_analytic_moments_agree_with_monte_carlo_over_the_test_input(data):
    X, Y, kernel = data
    mean, variance = np.array([[0.3, -0.4], [1.1, 0.9]]), np.array([[0.2, 0.05], [0.4, 0.3]])
    analytic = predict_gaussian_inputs(kernel, NOISE, X, X, np.zeros_like(X), Y, mean, variance,
                                       PsiMethod("analytic"), jitter=0.0)
    mc_mean, mean_error, mc_cov, cov_error = total_moments(kernel, X, Y, mean, variance, NOISE, 40000,
                                                           np.random.default_rng(1))
    assert np.all(np.abs(analytic.mean - mc_mean) < 4 * mean_error)
    assert np.all(np.abs(analytic.covariance - mc_cov) < 4 * cov_error)
    assert np.all(np.abs(analytic.covariance[:, 0, 1]) > 4 * cov_error[:, 0, 1])  # the columns covary


def test_monte_carlo_psi_statistics_are_within_their_standard_error(data):
    X, Y, kernel = data
    mean, variance = np.array([[0.3, -0.4]]), np.array([[0.3, 0.2]])
    samples = 4000
    analytic = predict_gaussian_inputs(kernel, NOISE, X, X, np.zeros_like(X), Y, mean, variance,
                                       PsiMethod("analytic"), jitter=0.0)
    mc = predict_gaussian_inputs(kernel, NOISE, X, X, np.zeros_like(X), Y, mean, variance,
                                 PsiMethod("monte_carlo", samples=samples), key=jax.random.PRNGKey(3), jitter=0.0)
    _, mean_error, _, cov_error = total_moments(kernel, X, Y, mean, variance, NOISE, samples,
                                                np.random.default_rng(2))
    assert np.all(np.abs(mc.mean - analytic.mean) < 4 * mean_error)
    assert np.all(np.abs(mc.covariance - analytic.covariance) < 4 * cov_error)
    again = predict_gaussian_inputs(kernel, NOISE, X, X, np.zeros_like(X), Y, mean, variance,
                                    PsiMethod("monte_carlo", samples=samples), key=jax.random.PRNGKey(4), jitter=0.0)
    assert not np.allclose(again.mean, mc.mean)


def test_training_input_variances_change_the_prediction(data):
    X, Y, kernel = data
    mean, variance = np.array([[0.3, -0.4]]), np.array([[0.1, 0.1]])
    certain = predict_gaussian_inputs(kernel, NOISE, X, X, np.zeros_like(X), Y, mean, variance)
    uncertain = predict_gaussian_inputs(kernel, NOISE, X, X, np.full_like(X, 0.3), Y, mean, variance)
    gh = predict_gaussian_inputs(kernel, NOISE, X, X, np.full_like(X, 0.3), Y, mean, variance,
                                 PsiMethod("gauss_hermite", nodes=20))
    assert np.abs(uncertain.mean - certain.mean).max() > 1e-3
    np.testing.assert_allclose(gh.mean, uncertain.mean, rtol=1e-8)


def test_bad_inputs_are_refused(data):
    X, Y, kernel = data
    with pytest.raises(DataError, match="test means and variances"):
        predict_gaussian_inputs(kernel, NOISE, X, X, np.zeros_like(X), Y, np.zeros((1, 2)), np.zeros((1, 3)))
    with pytest.raises(DataError, match="non-negative"):
        predict_gaussian_inputs(kernel, NOISE, X, X, np.zeros_like(X), Y, np.zeros((1, 2)), -np.ones((1, 2)))
    with pytest.raises(DataError, match="training inputs and outputs"):
        predict_gaussian_inputs(kernel, NOISE, X, X, np.zeros_like(X), Y[:3], np.zeros((1, 2)), np.ones((1, 2)))
    periodic = build_kernel("periodic", variance=1.0, lengthscale=1.0, period=2.0)
    with pytest.raises(MethodError, match="no closed-form psi statistics"):
        predict_gaussian_inputs(periodic, NOISE, X, X, np.zeros_like(X), Y, np.zeros((1, 2)), np.ones((1, 2)),
                                PsiMethod("analytic"))
    with pytest.raises(MethodError, match="PRNG key"):
        predict_gaussian_inputs(kernel, NOISE, X, X, np.zeros_like(X), Y, np.zeros((1, 2)), np.ones((1, 2)),
                                PsiMethod("monte_carlo"))


def test_a_failed_factorisation_is_an_error_not_nan(data):
    X, Y, kernel = data
    with pytest.raises(NumericalError, match="not numerically positive definite"):
        predict_gaussian_inputs(kernel, NOISE, np.vstack([X, X]), X, np.zeros_like(X), Y, np.zeros((1, 2)),
                                np.ones((1, 2)), jitter=0.0)  # repeated inducing inputs: Kuu is singular
