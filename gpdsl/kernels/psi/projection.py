"""Psi statistics of the standard RBF of a random per-point linear projection (de Souza 2020, Sec. 4.3.1, App. A).

In the deep Mahalanobis GP the output layer's kernel is ``sigma_f^2 SRBF(x_i W_i^T, x_j W_j^T)`` with
``SRBF(a, b) = exp(-||a - b||^2 / 2)`` and a projection ``W_i`` (Q x D) per point whose rows are Gaussian under
``q(W)``: ``w_q:i ~ N(mu_q:i, s_qi I_D)`` (one variance per latent dimension and point, shared across ``d``).
The projected input ``z_i = W_i x_i`` is then Gaussian with independent coordinates,

    a_qi = mu_q:i . x_i,    b_qi = s_qi ||x_i||^2,

and with the inducing outputs on ``s = f / sigma_f`` (``K_u = SRBF(Z, Z)``, ``K_fu = sigma_f SRBF``) the Psi
statistics are ``psi0_i = sigma_f^2``, ``Psi1 = sigma_f E[SRBF(z_i, Z)]`` and ``Psi2 = sigma_f^2 sum_i E[SRBF(Z, z_i)
SRBF(z_i, Z)]``: the RBF entry of the Psi registry (unit variance and length-scale) at ``N(a_i, diag(b_i))``. These
are the spec's corrected forms (exponent ``-1/2`` on ``Psi1``'s prefactor).
"""

from __future__ import annotations

import jax.numpy as jnp

from gpdsl.kernels.psi.statistics import PsiStatistics, psi_statistics
from gpdsl.kernels.stationary import RBF


def projected_inputs(X, W_mean, W_variance):
    """Mean and variance of ``z_i = W_i x_i`` under ``q(W)`` (traceable).

    Parameters
    ----------
    X : array_like, shape (N, D)
        Inputs.
    W_mean : array_like, shape (N, Q, D)
        ``mu_q:i``, the mean of each row of each point's projection.
    W_variance : array_like, shape (N, Q)
        ``s_qi``, the variance of every entry of row ``q`` of ``W_i``.

    Returns
    -------
    mean, variance : jax.Array, shape (N, Q)
        ``a`` and ``b``.
    """
    X = jnp.asarray(X, dtype=jnp.float64)
    mean = jnp.einsum("nqd,nd->nq", jnp.asarray(W_mean, dtype=jnp.float64), X)
    variance = jnp.asarray(W_variance, dtype=jnp.float64) * jnp.sum(X ** 2, axis=1)[:, None]
    return mean, variance


def projected_srbf_statistics(X, W_mean, W_variance, Z, output_scale, *, per_point: bool = False) -> PsiStatistics:
    """Psi statistics of ``sigma_f SRBF`` under the random projections (traceable, differentiable).

    Parameters
    ----------
    X, W_mean, W_variance
        As :func:`projected_inputs`.
    Z : array_like, shape (M, Q)
        Inducing inputs in the projected space.
    output_scale : float
        ``sigma_f``.
    per_point : bool
        Return ``Psi2`` per point, shape ``(N, M, M)`` (for predictions), instead of summed over points.

    Returns
    -------
    PsiStatistics
        ``psi0`` (N,) equal to ``sigma_f^2``, ``Psi1`` (N, M), ``Psi2`` (M, M) or (N, M, M).
    """
    mean, variance = projected_inputs(X, W_mean, W_variance)
    weights = jnp.eye(mean.shape[0]) if per_point else None
    stats = psi_statistics(RBF(variance=1.0, lengthscale=1.0), Z, mean, variance, row_weights=weights)
    scale = jnp.asarray(output_scale, dtype=jnp.float64)
    return PsiStatistics(jnp.full(mean.shape[0], scale ** 2), scale * stats.psi1, scale ** 2 * stats.psi2)
