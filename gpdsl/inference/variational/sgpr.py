"""Sparse GP regression (Titsias 2009): the collapsed bound and the projected-process predictive.

With inducing inputs ``Z`` and fixed training inputs ``X``, the Psi statistics of the Bayesian GPLVM's
collapsed bound are plain kernel matrices: ``psi0 = diag K(X)``, ``Psi1 = K(X, Z)`` and
``Psi2 = K(Z, X) K(X, Z)``. The bound

    log N(y; 0, Q + s^2 I) - tr(K - Q) / (2 s^2),   Q = Kxz Kzz^-1 Kzx,

is therefore :func:`~gpdsl.inference.variational.collapsed_bound.collapsed_bound` of those statistics,
and the optimal ``q(u)`` and the predictive at new inputs are those of
:mod:`gpdsl.inference.predict.uncertain_inputs` at zero input variance. ``Kzz = K(Z) + jitter I``
(the same-index Gram matrix, white-noise terms included, as GPy's ``VarDTC``). With ``Z = X`` and no
jitter the bound is the exact log marginal likelihood and the predictive the exact GP predictive.
Every kernel of the language works: nothing here needs more of a kernel than its matrices.
"""

from __future__ import annotations

import jax.numpy as jnp

from gpdsl.inference.predict.uncertain_inputs import InducingPosterior, inducing_posterior, point_moments
from gpdsl.inference.variational.collapsed_bound import collapsed_bound
from gpdsl.kernels.psi import PsiStatistics
from gpdsl.numerics import GP_JITTER

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
    psi1 = kernel.cross(X, Z)
    return PsiStatistics(kernel.diag(X), psi1, psi1.T @ psi1)


def inducing_covariance(kernel, Z, jitter: float = DEFAULT_JITTER):
    """``K(Z) + jitter I`` (traceable)."""
    Z = jnp.asarray(Z)
    return kernel(Z) + jitter * jnp.eye(Z.shape[0])


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
    stats = sgpr_statistics(kernel, X, Z)
    Y = jnp.reshape(jnp.asarray(y, dtype=jnp.float64), (-1, 1))
    return collapsed_bound(Y, stats.psi0, stats.psi1, stats.psi2, inducing_covariance(kernel, Z, jitter),
                           noise_variance)


def sgpr_posterior(kernel, X, y, Z, noise_variance, jitter: float = DEFAULT_JITTER) -> InducingPosterior:
    """The optimal ``q(u)`` of the bound, summarised for predictions (traceable).

    Parameters are those of :func:`sgpr_bound`.

    Returns
    -------
    InducingPosterior
    """
    stats = sgpr_statistics(kernel, X, Z)
    Y = jnp.reshape(jnp.asarray(y, dtype=jnp.float64), (-1, 1))
    return inducing_posterior(kernel(jnp.asarray(Z)), stats.psi1, stats.psi2, Y, noise_variance, jitter=jitter)


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
