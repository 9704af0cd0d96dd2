"""Sparse GP regression (Titsias 2009): the collapsed bound and the projected-process predictive.

With inducing inputs ``Z`` and fixed training inputs ``X``, the Psi statistics of the Bayesian GPLVM's
collapsed bound are plain kernel matrices: ``psi0 = diag K(X)``, ``Psi1 = K(X, Z)`` and
``Psi2 = K(Z, X) K(X, Z)``. The bound

    log N(y; 0, Q + s^2 I) - tr(K - Q) / (2 s^2),   Q = Kxz Kzz^-1 Kzx,

is therefore :func:`~gpdsl.inference.variational.collapsed_bound.collapsed_bound` of those statistics,
and the optimal ``q(u)`` and the predictive at new inputs are those of
:mod:`gpdsl.inference.predict.uncertain_inputs` at zero input variance. Both are computed in the whitened
basis of :func:`whitened_statistics`, which keeps them accurate when ``K(Z)`` is ill-conditioned. ``Kzz = K(Z) + jitter I``
(the same-index Gram matrix, white-noise terms included, as GPy's ``VarDTC``). With ``Z = X`` and no
jitter the bound is the exact log marginal likelihood and the predictive the exact GP predictive.
Every kernel of the language works: nothing here needs more of a kernel than its matrices.
"""

from __future__ import annotations

import jax.numpy as jnp

from gpdsl.inference.predict.uncertain_inputs import InducingPosterior, inducing_posterior, point_moments
from gpdsl.inference.variational.collapsed_bound import collapsed_bound
from gpdsl.kernels.psi import PsiStatistics, analytic_supported
from gpdsl.kernels.psi.closed_form import kernel_terms
from gpdsl.numerics.linalg import cholesky_with_jitter, solve_triangular
from gpdsl.numerics import CHOLESKY_JITTER_CEILING, GP_JITTER

DEFAULT_JITTER = GP_JITTER
"""Jitter on ``Kzz``: GPy's ``VarDTC`` constant, which the variational EM of the Bayesian GPLVM uses too."""


def sgpr_statistics(kernel, X, Z) -> PsiStatistics:
    """``psi0 = diag K(X)``, ``Psi1 = K(X, Z)`` and ``Psi2 = K(Z, X) K(X, Z)`` (traceable).

    Parameters
    ----------
    kernel : Kernel
    X : array_like, shape (n, d)
        Training inputs.
    Z : array_like, shape (M, d)
        Inducing inputs.

    Returns
    -------
    PsiStatistics
    """
    psi1 = cross_covariance(kernel, X, Z)
    return PsiStatistics(kernel.diag(X), psi1, psi1.T @ psi1)


def cross_covariance(kernel, X, Z):
    """``K(X, Z)``: through the closed-form ``Psi1`` at zero input variance for kernels the Psi registry covers
    (matrix products with hand-written gradients: a sixteenth of the time of differentiating the pointwise
    kernel at N = 10,000, M = 100), else the kernel's own matrix (traceable)."""
    X, Z = jnp.asarray(X, dtype=jnp.float64), jnp.asarray(Z, dtype=jnp.float64)
    if X.ndim == 2 and analytic_supported(kernel):
        terms = kernel_terms(kernel, X.shape[1])
        return sum(c * term.psi1(Z, X, jnp.zeros_like(X)) for c, term in terms)
    return kernel.cross(X, Z)


def inducing_covariance(kernel, Z, jitter: float = DEFAULT_JITTER):
    """``K(Z) + jitter I`` (traceable)."""
    Z = jnp.asarray(Z)
    return kernel(Z) + jitter * jnp.eye(Z.shape[0])


def whitened_statistics(kernel, X, Z, jitter: float = DEFAULT_JITTER):
    """The statistics of :func:`sgpr_statistics` in the basis of ``v = L^-1 u``, where ``L L^T = K(Z) + jitter I``.

    ``Psi1 L^-T`` and its cross product stand for ``Psi1`` and ``Psi2`` with ``K(Z)`` replaced by the identity: the
    bound and the predictive are the same, but the rounding error of ``Psi2`` is not amplified by ``K(Z)^-1``
    twice (GPflow's form). With long length-scales ``K(Z)`` has condition numbers of 1e9 and more, where the
    unwhitened form's bound is noisy in its fourth significant digit and stalls L-BFGS's line search.

    Returns
    -------
    L : jax.Array, shape (M, M)
        The Cholesky factor (jitter escalated only if the factorisation fails).
    stats : PsiStatistics
        ``psi0``, ``Psi1 L^-T`` and ``L^-1 Psi2 L^-T``.
    """
    L = cholesky_with_jitter(inducing_covariance(kernel, Z, jitter), jitter=CHOLESKY_JITTER_CEILING)[0]
    stats = sgpr_statistics(kernel, X, Z)
    psi1 = solve_triangular(L, stats.psi1.T, lower=True).T
    return L, PsiStatistics(stats.psi0, psi1, psi1.T @ psi1)


def sgpr_bound(kernel, X, y, Z, noise_variance, jitter: float = DEFAULT_JITTER):
    """Titsias's collapsed lower bound on ``log p(y)`` (traceable, differentiable in everything).

    Parameters
    ----------
    kernel : Kernel
    X : array_like, shape (n, d)
        Training inputs.
    y : array_like, shape (n,)
        Training outputs.
    Z : array_like, shape (M, d)
        Inducing inputs.
    noise_variance : float
        Gaussian noise variance ``s^2``.
    jitter : float
        Added to the diagonal of ``K(Z)``.

    Returns
    -------
    jax.Array
        The scalar bound (NaN when ``K(Z)`` is not positive definite even with jitter escalation).
    """
    _, stats = whitened_statistics(kernel, X, Z, jitter)
    identity = jnp.eye(stats.psi2.shape[0])
    return collapsed_bound(_column(y), stats.psi0, stats.psi1, stats.psi2, identity, noise_variance)


def sgpr_posterior(kernel, X, y, Z, noise_variance, jitter: float = DEFAULT_JITTER) -> InducingPosterior:
    """The optimal ``q(u)`` of the bound, summarised for predictions (traceable).

    Parameters are those of :func:`sgpr_bound`.

    Returns
    -------
    InducingPosterior
        Built in the whitened basis (:func:`whitened_statistics`), then expressed in that of ``u``.
    """
    L, stats = whitened_statistics(kernel, X, Z, jitter)
    identity = jnp.eye(stats.psi2.shape[0])
    whitened = inducing_posterior(identity, stats.psi1, stats.psi2, _column(y), noise_variance, jitter=0.0)
    weights = solve_triangular(L, whitened.weights.T, trans=1, lower=True).T
    return whitened._replace(chol_kuu=L, weights=weights)


def _column(y):
    return jnp.reshape(jnp.asarray(y, dtype=jnp.float64), (-1, 1))


def sgpr_moments(posterior: InducingPosterior, kernel, Z, X_new, include_noise: bool = True):
    """Predictive mean and variance at new inputs (traceable).

    Parameters
    ----------
    posterior : InducingPosterior
        From :func:`sgpr_posterior` with the same ``kernel`` and ``Z``.
    kernel : Kernel
    Z : array_like, shape (M, d)
    X_new : array_like, shape (n*, d)
    include_noise : bool
        Moments of ``y*`` (noise variance added) or of ``f*``.

    Returns
    -------
    mean, variance : jax.Array, shape (n*,)
    """
    mean, variance = point_moments(posterior, kernel, jnp.asarray(Z), X_new, include_noise=include_noise)
    return mean[:, 0], variance[:, 0]
