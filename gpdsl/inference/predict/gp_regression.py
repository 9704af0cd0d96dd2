"""Predictions of a fitted GP regression at fixed and at Gaussian (uncertain) inputs.

* :func:`exact_posterior` and :func:`exact_moments`: the exact GP predictive
  ``N(k*^T (K + s^2 I)^-1 y, k** - k*^T (K + s^2 I)^-1 k*)`` (plus ``s^2`` for ``y*``), from one
  Cholesky factor; traceable, so free simulation scans over it.
* :func:`loo_log_densities`: the exact leave-one-out predictive log densities ``log p(y_i | y_-i, theta)``
  (Sundararajan & Keerthi 2001), and :func:`posterior_replicate`: a replicate of ``y`` from its posterior
  predictive given ``theta``; both traceable, one Cholesky factor each.
* :func:`predict`: that predictive at new inputs of a :class:`~gpdsl.inference.optimise.marginal_likelihood.GPRegressionFit`.
* :func:`predict_gaussian`: the predictive at ``q(x*) = N(mean, diag(variance))`` by eqs. (40)-(41) of
  Damianou et al. (2016) with the training inputs as inducing inputs
  (:mod:`gpdsl.inference.predict.uncertain_inputs`); with zero training variances and zero test
  variances it is :func:`predict` up to the jitter on ``Kuu``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.errors import DataError, MethodError
from gpdsl.inference.optimise.marginal_likelihood import GPRegressionFit
from gpdsl.inference.predict.latent_gp import check_new_inputs
from gpdsl.inference.predict.uncertain_inputs import DEFAULT_JITTER, UncertainPrediction, predict_gaussian_inputs
from gpdsl.kernels.psi import PsiMethod
from gpdsl.numerics.linalg import cho_solve, cholesky, solve_triangular
from gpdsl.numerics import GP_JITTER


class ExactPosterior(NamedTuple):
    """The exact GP posterior summarised for predictions.

    Attributes
    ----------
    chol : jax.Array, shape (n, n)
        ``chol(K + (s^2 + GP_JITTER) I)``, the same matrix as the marginal likelihood's.
    alpha : jax.Array, shape (n,)
        ``(K + s^2 I)^-1 y``.
    noise_variance : jax.Array
        ``s^2``.
    """

    chol: jax.Array
    alpha: jax.Array
    noise_variance: jax.Array


class Prediction(NamedTuple):
    """Predictive moments at fixed inputs.

    Attributes
    ----------
    mean : numpy.ndarray, shape (n*,)
    variance : numpy.ndarray, shape (n*,)
        Of ``y*`` (noise included) or of ``f*``, as asked.
    """

    mean: np.ndarray
    variance: np.ndarray


def exact_posterior(kernel, X, y, noise_variance) -> ExactPosterior:
    """:class:`ExactPosterior` of training inputs ``X`` (n, d) and outputs ``y`` (n,) (traceable)."""
    K = kernel(X)
    L = cholesky(K + (noise_variance + GP_JITTER) * jnp.eye(K.shape[0]))
    return ExactPosterior(L, cho_solve((L, True), y), jnp.asarray(noise_variance))


def exact_moments(posterior: ExactPosterior, kernel, X, X_new, include_noise: bool = True, full: bool = False):
    """Exact predictive mean and variance at ``X_new`` (n*, d) (traceable).

    Returns
    -------
    mean : jax.Array, shape (n*,)
    variance : jax.Array, shape (n*,), or with ``full`` the covariance (n*, n*)
    """
    K_star = kernel.cross(X, X_new)
    v = solve_triangular(posterior.chol, K_star, lower=True)
    if full:
        variance = kernel(X_new) - v.T @ v
        noise = posterior.noise_variance * jnp.eye(variance.shape[0])
    else:
        variance = kernel.diag(X_new) - jnp.sum(v ** 2, axis=0)
        noise = posterior.noise_variance
    if include_noise:
        variance = variance + noise
    return K_star.T @ posterior.alpha, variance


def loo_log_densities(posterior: ExactPosterior) -> jax.Array:
    """``log p(y_i | y_-i, theta)`` for each training point, shape ``(n,)`` (traceable).

    With ``P = (K + s^2 I)^-1``, ``y_i | y_-i ~ N(y_i - (P y)_i / P_ii, 1 / P_ii)``; ``P y`` is ``alpha``.
    """
    precision = cho_solve((posterior.chol, True), jnp.eye(posterior.chol.shape[0]))
    diagonal = jnp.diag(precision)
    return 0.5 * (jnp.log(diagonal) - posterior.alpha ** 2 / diagonal - jnp.log(2 * jnp.pi))


def posterior_replicate(posterior: ExactPosterior, y, key) -> jax.Array:
    """A replicate of ``y`` from ``p(y_rep | y, theta)``, shape ``(n,)`` (traceable).

    ``f | y`` has mean ``y - s^2 alpha`` and covariance ``s^2 (I - s^2 P)`` (the jitter counted in ``K``), so
    ``y_rep = f + e`` has covariance ``s^2 (2 I - s^2 P)``, whose eigenvalues lie in ``[s^2, 2 s^2)``.
    """
    s2 = posterior.noise_variance
    n = posterior.chol.shape[0]
    precision = cho_solve((posterior.chol, True), jnp.eye(n))
    covariance = s2 * (2.0 * jnp.eye(n) - s2 * precision)
    factor = cholesky(0.5 * (covariance + covariance.T))
    return jnp.asarray(y) - s2 * posterior.alpha + factor @ jax.random.normal(key, (n,))


def predict(fit: GPRegressionFit, X_new, include_noise: bool = True) -> Prediction:
    """Exact predictive moments of a fitted GP regression at new inputs.

    Parameters
    ----------
    fit : GPRegressionFit
    X_new : array_like, shape (n*, d)
        New inputs, with the training inputs' columns.
    include_noise : bool
        Moments of ``y*`` (True) or of ``f*``.

    Returns
    -------
    Prediction

    Raises
    ------
    DataError
        ``X_new`` is not a finite matrix with the training inputs' number of columns.
    MethodError
        The GP's mean or the terms added to ``f`` read data that have no values at new inputs.
    """
    X_new = check_new_inputs(fit.problem, X_new)
    fit.problem.require_location_at_new_inputs()
    X = fit.inputs()
    kernel = fit.kernel()
    theta = jnp.asarray(fit.theta)
    posterior = exact_posterior(kernel, X, fit.problem.centred_y(theta), fit.noise_variance())
    mean, variance = exact_moments(posterior, kernel, X, jnp.asarray(X_new), include_noise)
    if fit.problem.has_location:
        f_shift, y_shift = fit.problem.location_at(theta, jnp.asarray(X_new))
        mean = mean + (y_shift if include_noise else f_shift)
    return Prediction(np.asarray(mean), np.asarray(variance))


def predict_gaussian(fit: GPRegressionFit, mean, variance, psi: PsiMethod = PsiMethod(), *,
                     training_variance=0.0, key=None, include_noise: bool = True,
                     jitter: float = DEFAULT_JITTER) -> UncertainPrediction:
    """Predictive moments of a fitted GP regression at Gaussian inputs (eqs. 40-41).

    Parameters
    ----------
    fit : GPRegressionFit
    mean, variance : array_like, shape (n*, d)
        Means and diagonal variances of the test inputs.
    training_variance : float or array_like, shape (n, d)
        Variances of ``q(X)`` around the training inputs (0: certain inputs, the exact GP).
    psi, key, include_noise, jitter
        As in :func:`~gpdsl.inference.predict.uncertain_inputs.predict_gaussian_inputs`.

    Returns
    -------
    UncertainPrediction
        ``mean`` and ``variance`` of shape (n*, 1), ``covariance`` (n*, 1, 1).
    """
    if fit.problem.has_location:
        raise MethodError(f"predictions at Gaussian inputs take GP regression around a zero-mean GP; "
                          f"'{fit.problem.name}' has a mean or terms added to it")
    X = fit.inputs()
    mean = check_new_inputs(fit.problem, mean)
    variance = np.asarray(variance, dtype=float).reshape(mean.shape) if np.size(variance) == mean.size else None
    if variance is None:
        raise DataError(f"test input variances must have the shape of the means, {mean.shape}")
    try:
        X_variance = np.broadcast_to(np.asarray(training_variance, dtype=float), X.shape)
    except ValueError:
        raise DataError(f"training input variances must broadcast to the inputs' shape {X.shape}") from None
    return predict_gaussian_inputs(fit.kernel(), fit.noise_variance(), X, X, X_variance, fit.problem.y, mean,
                                   variance, psi, key=key, include_noise=include_noise, jitter=jitter)
