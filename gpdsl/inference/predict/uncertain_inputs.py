"""GP predictions at Gaussian test inputs through Psi statistics (Girard et al. 2003; Damianou et al. 2016).

The training data enter through ``q(u)``, the optimal inducing-output posterior of a Bayesian GPLVM
or of a sparse GP with uncertain training inputs: for training inputs ``q(X) = N(mu, diag(S))``,
inducing inputs ``Z`` and noise variance ``s^2`` (eq. 39 of Damianou, Titsias & Lawrence 2016),

    B = s^-2 (Kuu + s^-2 Psi2)^-1 Psi1^T Y.

At a test input ``q(x*) = N(mu*, diag(v*))`` the output moments are eqs. (40)-(41),

    E[f*] = B^T psi1*,
    Cov(f*) = B^T (Psi2* - psi1* psi1*^T) B + (psi0* - tr[(Kuu^-1 - (Kuu + s^-2 Psi2)^-1) Psi2*]) I,

plus ``s^2 I`` for ``y*``. Everything goes through ``L = chol(Kuu + jitter I)`` and
``L_B = chol(I + s^-2 L^-1 Psi2 L^-T)`` (the form GPflow uses), never through ``Kuu^-1``: with
``Z`` the training inputs, zero training variances and no jitter this is the exact GP predictive.

:func:`inducing_posterior` builds ``q(u)`` from training Psi statistics; :func:`gaussian_input_moments`
and :func:`point_moments` predict from it at Gaussian or fixed inputs; :func:`predict_gaussian_inputs`
does all three steps from a kernel and data.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.errors import DataError, NumericalError
from gpdsl.kernels.psi import PsiMethod, psi_statistics
from gpdsl.numerics.linalg import cholesky, solve_triangular
from gpdsl.numerics import GPFLOW_JITTER

DEFAULT_JITTER = GPFLOW_JITTER
"""Jitter added to ``Kuu`` by default, as GPflow does (``gpflow.settings.jitter``)."""


class InducingPosterior(NamedTuple):
    """``q(u)`` summarised for predictions.

    Attributes
    ----------
    chol_kuu : jax.Array, shape (M, M)
        ``L = chol(Kuu + jitter I)``.
    chol_b : jax.Array, shape (G, M, M)
        ``chol(I + s^-2 L^-1 Psi2_g L^-T)`` for each group of output columns (``G`` is 1, or ``J``
        when each column has its own ``Psi2`` because of missing entries).
    weights : jax.Array, shape (J, M)
        ``B`` of eq. (39), one row per output column.
    noise_variance : jax.Array
        ``s^2``.
    """

    chol_kuu: jax.Array
    chol_b: jax.Array
    weights: jax.Array
    noise_variance: jax.Array


class UncertainPrediction(NamedTuple):
    """Moments of the outputs at Gaussian test inputs.

    Attributes
    ----------
    mean : numpy.ndarray, shape (n*, J)
    variance : numpy.ndarray, shape (n*, J)
        The diagonal of ``covariance``.
    covariance : numpy.ndarray, shape (n*, J, J)
        Covariance between the output columns at each test input.
    """

    mean: np.ndarray
    variance: np.ndarray
    covariance: np.ndarray


def inducing_posterior(Kuu, psi1, psi2, Y, noise_variance, jitter: float = DEFAULT_JITTER) -> InducingPosterior:
    """``q(u)`` from the training Psi statistics.

    Parameters
    ----------
    Kuu : array_like, shape (M, M)
        Kernel matrix of the inducing inputs (no jitter).
    psi1 : array_like, shape (N, M)
        ``E[k(x_n, z_m)]`` under the training ``q(X)``.
    psi2 : array_like, shape (M, M) or (J, M, M)
        ``sum_n E[k(z, x_n) k(x_n, z)]``, shared by all output columns or one per column.
    Y : array_like, shape (N, J)
        Training outputs (zero where a column's entry is missing and left out of its ``psi2``).
    noise_variance : float
        ``s^2``.
    jitter : float
        Added to the diagonal of ``Kuu``.

    Returns
    -------
    InducingPosterior
    """
    Kuu, psi1, psi2, Y = (jnp.asarray(a, dtype=jnp.float64) for a in (Kuu, psi1, psi2, Y))
    psi2 = psi2[None] if psi2.ndim == 2 else psi2
    M = Kuu.shape[0]
    L = cholesky(Kuu + jitter * jnp.eye(M))
    scaled = _sandwich(L, psi2) / noise_variance
    chol_b = cholesky(jnp.eye(M)[None] + scaled)
    rhs = solve_triangular(L, psi1.T @ Y, lower=True) / noise_variance         # (M, J)
    chol_b_per_column = jnp.broadcast_to(chol_b, (Y.shape[1], M, M))
    c = jax.vmap(lambda LB, r: solve_triangular(LB, r, lower=True))(chol_b_per_column, rhs.T)
    inner = jax.vmap(lambda LB, v: solve_triangular(LB, v, trans=1, lower=True))(chol_b_per_column, c)
    weights = solve_triangular(L, inner.T, trans=1, lower=True).T             # (J, M)
    return InducingPosterior(L, chol_b, weights, jnp.asarray(noise_variance, dtype=jnp.float64))


def gaussian_input_moments(posterior: InducingPosterior, psi0, psi1, psi2, include_noise: bool = True):
    """Eqs. (40)-(41): output moments at each Gaussian test input.

    Parameters
    ----------
    posterior : InducingPosterior
    psi0 : array_like, shape (n*,)
    psi1 : array_like, shape (n*, M)
    psi2 : array_like, shape (n*, M, M)
        Psi statistics of each test input separately (``psi2`` not summed over test inputs).
    include_noise : bool
        Add ``s^2`` to the variances (moments of ``y*``; else of ``f*``).

    Returns
    -------
    mean : jax.Array, shape (n*, J)
    covariance : jax.Array, shape (n*, J, J)
    """
    beta = posterior.weights
    mean = psi1 @ beta.T
    second = jnp.einsum("jm,nmk,lk->njl", beta, psi2, beta)
    covariance = second - mean[:, :, None] * mean[:, None, :]
    P = _sandwich(posterior.chol_kuu, psi2)                                  # L^-1 Psi2* L^-T
    shrunk = jax.vmap(lambda LB: jnp.trace(_sandwich(LB, P), axis1=-2, axis2=-1))(posterior.chol_b)  # (G, n*)
    diagonal = psi0[:, None] - (jnp.trace(P, axis1=-2, axis2=-1)[:, None] - shrunk.T)              # (n*, G)
    diagonal = jnp.broadcast_to(diagonal, mean.shape)
    if include_noise:
        diagonal = diagonal + posterior.noise_variance
    covariance = covariance + jax.vmap(jnp.diag)(diagonal)
    return mean, covariance


def point_moments(posterior: InducingPosterior, kernel, Z, X, include_noise: bool = False):
    """The projected-process prediction at fixed inputs (eq. 39), eqs. (40)-(41) with ``v* = 0``.

    Parameters
    ----------
    posterior : InducingPosterior
    kernel : Kernel
    Z : array_like, shape (M, Q)
        The inducing inputs ``posterior`` was built with.
    X : array_like, shape (n*, Q)
        Test inputs.
    include_noise : bool
        Add ``s^2`` to the variances.

    Returns
    -------
    mean, variance : jax.Array, shape (n*, J)
    """
    X = jnp.asarray(X, dtype=jnp.float64)
    return cross_moments(posterior, kernel.cross(X, Z), kernel.diag(X), include_noise)


def cross_moments(posterior: InducingPosterior, Ksu, prior_variance, include_noise: bool = False):
    """:func:`point_moments` from the test points' covariance with the inducing variables and their prior variance.

    Parameters
    ----------
    posterior : InducingPosterior
    Ksu : array_like, shape (n*, M)
        ``cov(f(x*), u)``.
    prior_variance : array_like, shape (n*,)
        ``k(x*, x*)``.
    include_noise : bool
        Add ``s^2`` to the variances.

    Returns
    -------
    mean, variance : jax.Array, shape (n*, J)
    """
    mean = Ksu @ posterior.weights.T
    a = solve_triangular(posterior.chol_kuu, Ksu.T, lower=True)                # (M, n*)
    b = jax.vmap(lambda LB: solve_triangular(LB, a, lower=True))(posterior.chol_b)
    variance = prior_variance[:, None] - jnp.sum(a ** 2, axis=0)[:, None] + jnp.sum(b ** 2, axis=1).T
    variance = jnp.broadcast_to(variance, mean.shape)
    if include_noise:
        variance = variance + posterior.noise_variance
    return mean, variance


def predict_gaussian_inputs(kernel, noise_variance, Z, X_mean, X_variance, Y, mean, variance,
                            psi: PsiMethod = PsiMethod(), *, key=None, include_noise: bool = True,
                            jitter: float = DEFAULT_JITTER) -> UncertainPrediction:
    """Predict outputs at Gaussian test inputs ``q(x*) = N(mean, diag(variance))``.

    Parameters
    ----------
    kernel : Kernel
    noise_variance : float
        Gaussian noise variance ``s^2``.
    Z : array_like, shape (M, Q)
        Inducing inputs (the training input means for an exact GP).
    X_mean, X_variance : array_like, shape (N, Q)
        Training ``q(X)``; zero variances are certain inputs.
    Y : array_like, shape (N,) or (N, J)
        Training outputs, fully observed.
    mean, variance : array_like, shape (n*, Q)
        Test inputs' means and diagonal variances.
    psi : PsiMethod
        How the Psi statistics are computed (the same rule for training and test inputs).
    key : jax.Array, optional
        PRNG key, needed for ``"monte_carlo"`` (split between the training and test statistics).
    include_noise : bool
        Moments of ``y*`` (True) or of ``f*``.
    jitter : float
        Added to ``Kuu``.

    Returns
    -------
    UncertainPrediction

    Raises
    ------
    DataError
        Shapes that do not fit together, non-finite values or negative variances.
    MethodError
        ``"analytic"`` for a kernel without closed forms, or ``"monte_carlo"`` without a key.
    NumericalError
        A factorisation failed (the prediction is not finite).
    """
    Z, X_mean, X_variance, mean, variance = (_matrix(name, value) for name, value in (
        ("Z", Z), ("X_mean", X_mean), ("X_variance", X_variance), ("mean", mean), ("variance", variance)))
    Y = np.asarray(Y, dtype=float)
    Y = Y[:, None] if Y.ndim == 1 else Y
    width = Z.shape[1]
    if X_mean.shape != X_variance.shape or X_mean.shape[1] != width or Y.shape[0] != X_mean.shape[0]:
        raise DataError(f"training inputs and outputs must have shapes (N, {width}) and (N, J); got X_mean "
                        f"{X_mean.shape}, X_variance {X_variance.shape}, Y {Y.shape}")
    if mean.shape != variance.shape or mean.shape[1] != width:
        raise DataError(f"test means and variances must both have shape (n, {width}); got {mean.shape} and "
                        f"{variance.shape}")
    if not np.all(np.isfinite(Y)):
        raise DataError("training outputs must be finite")
    if (X_variance < 0).any() or (variance < 0).any():
        raise DataError("input variances must be non-negative")
    train_key, test_key = jax.random.split(key) if key is not None else (None, None)
    result = _predict(kernel, jnp.asarray(noise_variance, dtype=jnp.float64), Z, X_mean, X_variance, Y, mean,
                      variance, psi, train_key, test_key, include_noise, jitter)
    mean_out, covariance = (np.asarray(a) for a in result)
    if not (np.all(np.isfinite(mean_out)) and np.all(np.isfinite(covariance))):
        raise_not_positive_definite(jitter, noise_variance)
    return UncertainPrediction(mean_out, np.einsum("njj->nj", covariance), covariance)


def raise_not_positive_definite(jitter: float, noise_variance) -> None:
    """Raise the error of a failed factorisation (a NaN prediction: JAX's Cholesky returns NaN, not an error).

    Raises
    ------
    NumericalError
        Always.
    """
    raise NumericalError(
        f"the prediction is not finite: Kuu + {jitter:g} I or I + L^-1 Psi2 L^-T / s^2 (s^2 = {float(noise_variance):.3g}) "
        "is not numerically positive definite",
        hint="raise the jitter, or the noise variance if it is far below the jitter")


def training_posterior(kernel, noise_variance, Z, X_mean, X_variance, Y, psi: PsiMethod, key=None,
                       jitter: float = DEFAULT_JITTER) -> InducingPosterior:
    """``q(u)`` of fully observed training data under ``q(X) = N(X_mean, diag(X_variance))`` (traceable)."""
    stats = psi_statistics(kernel, Z, X_mean, X_variance, psi, key=key)
    return inducing_posterior(kernel(Z), stats.psi1, stats.psi2, Y, noise_variance, jitter)


def predictive_moments(posterior: InducingPosterior, kernel, Z, mean, variance, psi: PsiMethod, key=None,
                 include_noise: bool = True):
    """Eqs. (40)-(41) at ``q(x*) = N(mean, diag(variance))`` from ``q(u)`` (traceable); see
    :func:`gaussian_input_moments`."""
    stats = psi_statistics(kernel, Z, mean, variance, psi, key=key, row_weights=jnp.eye(mean.shape[0]))
    return gaussian_input_moments(posterior, stats.psi0, stats.psi1, stats.psi2, include_noise)


def _predict(kernel, noise_variance, Z, X_mean, X_variance, Y, mean, variance, psi, train_key, test_key,
             include_noise, jitter):
    posterior = training_posterior(kernel, noise_variance, Z, X_mean, X_variance, Y, psi, train_key, jitter)
    return predictive_moments(posterior, kernel, Z, mean, variance, psi, test_key, include_noise)


_predict = jax.jit(_predict, static_argnames=("psi", "include_noise", "jitter"))


def _sandwich(L, A):
    """``L^-1 A L^-T`` for a lower-triangular ``L`` and a (batch of) square ``A``."""
    half = solve_triangular(L, A, lower=True)
    return jnp.swapaxes(solve_triangular(L, jnp.swapaxes(half, -1, -2), lower=True), -1, -2)


def _matrix(name: str, value) -> np.ndarray:
    value = np.asarray(value, dtype=float)
    if value.ndim != 2 or not np.all(np.isfinite(value)):
        raise DataError(f"{name} must be a finite matrix (n, Q); got shape {value.shape}")
    return value
