"""Iterative forecasting with a growing training set (Damianou et al. 2016, Sec. 6.1): without augmentation
or propagation it is the deterministic recursion of the predictive mean; with augmentation each step
equals a prediction from q(u) rebuilt from scratch on the grown training set."""

import jax.numpy as jnp
import numpy as np

from gpdsl.inference.predict.augmented_forecast import augmented_forecast
from gpdsl.inference.predict.free_simulation import lag_matrix
from gpdsl.inference.predict.uncertain_inputs import gaussian_input_moments, inducing_posterior, point_moments
from gpdsl.kernels import RBF
from gpdsl.kernels.psi import PsiMethod, psi_statistics

KERNEL = RBF(variance=1.3, lengthscale=jnp.asarray([0.8, 1.1, 1.5]))
NOISE = 0.01


def series_data(n=60, lag=3):
    t = np.arange(n)
    series = np.sin(0.3 * t) + 0.5 * np.cos(0.11 * t)
    X, y = lag_matrix(series, lag)
    Z = X[::4]
    return X, y, Z, X[-1]


def test_without_augmentation_or_propagation_it_is_the_mean_recursion():
    X, y, Z, window = series_data()
    result = augmented_forecast(KERNEL, NOISE, Z, X, np.zeros_like(X), y, window, 12, augment=False,
                                propagate=False)
    stats = psi_statistics(KERNEL, jnp.asarray(Z), jnp.asarray(X), jnp.zeros_like(jnp.asarray(X)), PsiMethod())
    posterior = inducing_posterior(KERNEL(jnp.asarray(Z)), stats.psi1, stats.psi2, y[:, None], NOISE)
    current = window.copy()
    for step in range(12):
        mean, variance = point_moments(posterior, KERNEL, jnp.asarray(Z), current[None], include_noise=True)
        np.testing.assert_allclose(result.mean[step], float(mean[0, 0]), rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(result.variance[step], float(variance[0, 0]), rtol=1e-7)
        current = np.concatenate([[float(mean[0, 0])], current[:-1]])


def test_each_augmented_step_equals_a_posterior_rebuilt_on_the_grown_training_set():
    X, y, Z, window = series_data()
    X_variance = np.full_like(X, 1e-4)
    for psi in (PsiMethod("analytic"), PsiMethod("unscented")):
        result = augmented_forecast(KERNEL, NOISE, Z, X, X_variance, y, window, 4, psi=psi, window_variance=0.02)
        means, variances = list(X), list(X_variance)
        targets = list(y)
        current, current_var = window.copy(), np.full(3, 0.02)
        for step in range(4):
            stats = psi_statistics(KERNEL, jnp.asarray(Z), jnp.asarray(np.array(means)),
                                   jnp.asarray(np.array(variances)), psi)
            posterior = inducing_posterior(KERNEL(jnp.asarray(Z)), stats.psi1, stats.psi2,
                                           np.array(targets)[:, None], NOISE)
            test = psi_statistics(KERNEL, jnp.asarray(Z), current[None], current_var[None], psi,
                                  row_weights=jnp.eye(1))
            mean, covariance = gaussian_input_moments(posterior, test.psi0, test.psi1, test.psi2)
            mean, variance = float(mean[0, 0]), float(covariance[0, 0, 0])
            np.testing.assert_allclose(result.mean[step], mean, rtol=1e-8)
            np.testing.assert_allclose(result.variance[step], variance, rtol=1e-6)
            means.append(current.copy())
            variances.append(current_var.copy())
            targets.append(mean)
            current, current_var = np.concatenate([[mean], current[:-1]]), np.concatenate([[variance], current_var[:-1]])
