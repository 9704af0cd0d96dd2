"""Psi statistics of the HSGP feature kernel ``k(x, x') = phi(x)^T diag(S) phi(x')`` in closed form.

For ``q(x) = N(mu, diag(s))`` and one dimension with ``u = x_d - centre_d + L_d ~ N(a, s_d)``:

* ``E[sin(w u)] = exp(-w^2 s_d / 2) sin(w a)``;
* ``E[sin(w u) sin(v u)] = (exp(-(w - v)^2 s_d / 2) cos((w - v) a) - exp(-(w + v)^2 s_d / 2) cos((w + v) a)) / 2``.

The basis functions are products over dimensions of such sines, and ``q(x)`` factorises, so ``E[phi(x)]`` is a
product of one-dimensional means and ``E[phi(x) phi(x)^T]`` the Kronecker product of one-dimensional second-moment
matrices (the basis is the full tensor grid, last dimension fastest). :func:`feature_statistics` gives these
*feature* statistics, which the inducing-feature bound of the GPLVM uses (no inducing inputs: with ``u`` the
whitened basis weights, ``Kuu = I`` and ``Kuf = diag(sqrt(S)) Phi^T``, :func:`inducing_feature_statistics`);
the term registered below gives the ordinary Psi statistics with inducing inputs ``Z`` through the table of
:mod:`gpdsl.kernels.psi.closed_form`: ``psi1 = E[phi(x)] diag(S) Phi(Z)^T`` and
``Psi2 = Phi(Z) diag(S) (sum_n E[phi phi^T]) diag(S) Phi(Z)^T``. Both also come from a quadrature rule
(``PsiMethod`` kinds other than ``"analytic"``).
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.errors import DataError
from gpdsl.kernels.hsgp_features import HSGPFeatureKernel
from gpdsl.kernels.psi.closed_form import register_cross, register_term
from gpdsl.kernels.psi.statistics import PsiMethod, PsiStatistics, quadrature_points


class FeatureStatistics(NamedTuple):
    """Expectations of the basis functions under ``q(X)``.

    Attributes
    ----------
    psi0 : jax.Array, shape (N,)
        ``E[phi(x_n)^T diag(S) phi(x_n)]``.
    psi1 : jax.Array, shape (N, M)
        ``E[phi(x_n)]``.
    psi2 : jax.Array, shape (G, M, M)
        ``sum_n W[n, g] E[phi(x_n) phi(x_n)^T]``.
    """

    psi0: jax.Array
    psi1: jax.Array
    psi2: jax.Array


def _shifted(kernel: HSGPFeatureKernel, mean):
    return mean - jnp.asarray(kernel.centre) + jnp.asarray(kernel.half_widths)


def _axis_means(kernel: HSGPFeatureKernel, mean, variance, d: int) -> jax.Array:
    """``E[L_d^(-1/2) sin(w_j u)]`` for ``j = 1..m_d``: ``(N, m_d)``."""
    w = jnp.asarray(kernel.axis_frequencies(d))
    a, s = _shifted(kernel, mean)[:, d, None], variance[:, d, None]
    return jnp.exp(-0.5 * w ** 2 * s) * jnp.sin(w * a) / np.sqrt(kernel.half_widths[d])


def _axis_second_moments(kernel: HSGPFeatureKernel, mean, variance, d: int) -> jax.Array:
    """``E[L_d^(-1) sin(w_j u) sin(w_k u)]``: ``(N, m_d, m_d)``."""
    w = jnp.asarray(kernel.axis_frequencies(d))
    a, s = _shifted(kernel, mean)[:, d, None, None], variance[:, d, None, None]
    difference, total = w[:, None] - w[None, :], w[:, None] + w[None, :]
    moments = (jnp.exp(-0.5 * difference ** 2 * s) * jnp.cos(difference * a)
               - jnp.exp(-0.5 * total ** 2 * s) * jnp.cos(total * a))
    return 0.5 * moments / kernel.half_widths[d]


def _kron_rows(left, right):
    """Per-row Kronecker products of ``(N, a)`` and ``(N, b)``: ``(N, a b)``."""
    return (left[:, :, None] * right[:, None, :]).reshape(left.shape[0], -1)


def analytic_feature_statistics(kernel: HSGPFeatureKernel, mean, variance, W) -> FeatureStatistics:
    """:class:`FeatureStatistics` in closed form (see the module docstring); ``W`` of shape ``(N, G)``."""
    D = kernel.dim
    means = [_axis_means(kernel, mean, variance, d) for d in range(D)]
    seconds = [_axis_second_moments(kernel, mean, variance, d) for d in range(D)]
    psi1, squares = means[0], jnp.diagonal(seconds[0], axis1=1, axis2=2)
    for d in range(1, D):
        psi1 = _kron_rows(psi1, means[d])
        squares = _kron_rows(squares, jnp.diagonal(seconds[d], axis1=1, axis2=2))
    psi0 = squares @ kernel.weight_variances()
    head = seconds[0]
    for d in range(1, D - 1):
        a, b = head.shape[1], seconds[d].shape[1]
        head = jnp.einsum("nij,nkl->nikjl", head, seconds[d]).reshape(-1, a * b, a * b)
    if D == 1:
        psi2 = jnp.einsum("ng,nij->gij", W, head)
    else:
        a, b = head.shape[1], seconds[-1].shape[1]
        psi2 = jnp.einsum("ng,nij,nkl->gikjl", W, head, seconds[-1]).reshape(W.shape[1], a * b, a * b)
    return FeatureStatistics(psi0, psi1, psi2)


def quadrature_feature_statistics(kernel: HSGPFeatureKernel, points, weights, W) -> FeatureStatistics:
    """:class:`FeatureStatistics` from a quadrature rule's ``points`` (P, N, D) and ``weights`` (P,)."""
    P, N, D = points.shape
    phi = kernel.features(points.reshape(P * N, D)).reshape(P, N, -1)
    psi0 = weights @ (jnp.square(phi) @ kernel.weight_variances())
    psi1 = jnp.einsum("p,pnm->nm", weights, phi)
    psi2 = jnp.einsum("p,ng,pni,pnj->gij", weights, W, phi, phi)
    return FeatureStatistics(psi0, psi1, psi2)


@partial(jax.jit, static_argnames=("method",))
def feature_statistics(kernel: HSGPFeatureKernel, mean, variance, method: PsiMethod = PsiMethod(), *, key=None,
                       row_weights=None) -> FeatureStatistics:
    """The expectations of an HSGP kernel's basis functions under ``q(x_n) = N(mean_n, diag(variance_n))``.

    Parameters
    ----------
    kernel : HSGPFeatureKernel
    mean, variance : array_like, shape (N, D)
        Means and diagonal variances of the latent points (``D`` the kernel's input columns).
    method : PsiMethod, optional
        Closed form (default) or a quadrature rule (:func:`~gpdsl.kernels.psi.statistics.quadrature_points`).
    key : jax.Array, optional
        PRNG key for ``"monte_carlo"``.
    row_weights : array_like, shape (N,) or (N, G), optional
        Weights of the points in ``psi2``; all ones by default.

    Returns
    -------
    FeatureStatistics
        ``psi2`` of shape (M, M), or (G, M, M) for 2-D ``row_weights``.

    Raises
    ------
    DataError
        ``mean`` and ``variance`` not of shape (N, D).
    """
    mean = jnp.asarray(mean, dtype=jnp.float64)
    variance = jnp.asarray(variance, dtype=jnp.float64)
    if mean.ndim != 2 or variance.shape != mean.shape or mean.shape[1] != kernel.dim:
        raise DataError(f"feature statistics need mean and variance of shape (N, {kernel.dim}); got mean "
                        f"{mean.shape}, variance {variance.shape}")
    W = jnp.ones((mean.shape[0], 1)) if row_weights is None else jnp.asarray(row_weights, dtype=jnp.float64)
    W = W[:, None] if W.ndim == 1 else W
    if method.kind == "analytic":
        stats = analytic_feature_statistics(kernel, mean, variance, W)
    else:
        points, weights = quadrature_points(mean, variance, method, key)
        stats = quadrature_feature_statistics(kernel, points, weights, W)
    if row_weights is None or jnp.ndim(row_weights) == 1:
        stats = stats._replace(psi2=stats.psi2[0])
    return stats


def inducing_feature_statistics(kernel: HSGPFeatureKernel, mean, variance, method: PsiMethod = PsiMethod(), *,
                                key=None, row_weights=None) -> tuple[PsiStatistics, jax.Array]:
    """The Psi statistics of the whitened basis weights as inducing variables, and their covariance ``Kuu = I``.

    With ``u = z`` (``f = Phi diag(sqrt(S)) z``, ``z ~ N(0, I)``): ``psi1 = E[phi(x_n)] diag(sqrt(S))`` and
    ``Psi2 = diag(sqrt(S)) (sum_n E[phi phi^T]) diag(sqrt(S))``, so that ``tr(Kuu^-1 Psi2) = sum_n psi0_n`` and the
    collapsed bound's trace term vanishes: the bound is exact in ``f`` given ``q(X)``. Arguments as
    :func:`feature_statistics`.

    Returns
    -------
    stats : PsiStatistics
    Kuu : jax.Array, shape (M, M)
    """
    stats = feature_statistics(kernel, mean, variance, method, key=key, row_weights=row_weights)
    root = _weight_scales(kernel)
    psi2 = root[:, None] * stats.psi2 * root[None, :]
    return PsiStatistics(stats.psi0, stats.psi1 * root, psi2), jnp.eye(kernel.size)


def inducing_feature_cross(kernel: HSGPFeatureKernel, X) -> jax.Array:
    """``cov(f(X), z) = Phi(X) diag(sqrt(S))``, ``(n, M)``: the points' covariance with the whitened basis weights
    of :func:`inducing_feature_statistics`."""
    return kernel.features(X) * _weight_scales(kernel)


def _weight_scales(kernel: HSGPFeatureKernel) -> jax.Array:
    """``sqrt(S)``; far in the tail the spectral density underflows to 0, where ``sqrt`` has no derivative."""
    variances = kernel.weight_variances()
    positive = variances > 0
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, variances, 1.0)), 0.0)


# ---- the row of the Psi table (inducing inputs Z) ------------------------------------------------
@register_term(HSGPFeatureKernel)
class HSGPTerm(NamedTuple):
    """The HSGP feature kernel as a term of the closed-form Psi table."""

    kernel: HSGPFeatureKernel

    @classmethod
    def from_kernel(cls, kernel, Q):
        if kernel.dim != Q:
            raise DataError(f"the HSGP kernel takes {kernel.dim} input columns; the latent points have {Q}")
        return cls(kernel)

    def psi0(self, mean, variance):
        W = jnp.ones((mean.shape[0], 1))
        return analytic_feature_statistics(self.kernel, mean, variance, W).psi0

    def inducing_map(self, Z):
        """``diag(S) Phi(Z)^T``: ``(M_features, M)``."""
        return self.kernel.weight_variances()[:, None] * self.kernel.features(Z).T

    def psi1(self, Z, mean, variance):
        means = analytic_feature_statistics(self.kernel, mean, variance, jnp.ones((mean.shape[0], 1))).psi1
        return means @ self.inducing_map(Z)


@register_cross(HSGPTerm, HSGPTerm)
def _hsgp_hsgp(t1, t2, psi1_1, psi1_2, inputs, symmetric):
    """``A1^T (sum_n W E[phi phi^T]) A2`` with ``A = diag(S) Phi(Z)^T``, for two terms on the same basis."""
    if (t1.kernel.centre, t1.kernel.half_widths, t1.kernel.m) != (t2.kernel.centre, t2.kernel.half_widths,
                                                                   t2.kernel.m):
        raise DataError("closed-form Psi statistics of a sum of HSGP kernels need one basis (the same box and m)")
    moments = analytic_feature_statistics(t1.kernel, inputs.mean, inputs.variance, inputs.W).psi2
    return jnp.einsum("im,gij,jk->gmk", t1.inducing_map(inputs.Z), moments, t2.inducing_map(inputs.Z))
