"""The collapsed variational bound of the Bayesian GPLVM, given the Psi statistics.

Titsias & Lawrence (2010); Damianou, Titsias & Lawrence (2016), eqs. (25)-(30): with the inducing
outputs integrated out optimally, the data term of the bound (``F-hat``, GPy's ``VarDTC``) depends on
``q(X)`` only through ``psi0``, ``Psi1`` and ``Psi2``. With ``Kmm = L L^T``, ``beta = 1 / sigma^2``
and ``A = I + beta L^-1 Psi2 L^-T = L_A L_A^T``, for ``Y`` of shape ``(N, D)``::

    F = -N D/2 log(2 pi) + N D/2 log(beta) - D/2 log|A| - beta/2 tr(Y^T Y)
        + beta^2/2 ||L_A^-1 L^-1 Psi1^T Y||_F^2 - beta D/2 sum(psi0) + beta D/2 tr(L^-1 Psi2 L^-T)

The KL term of ``q(X)`` against its prior is separate (:mod:`gpdsl.inference.variational.latent_q`), so the
same data term serves other families of ``q(X)`` and priors on ``X``. ``Y`` enters only through
``tr(Y^T Y)`` and ``Psi1^T Y``, so for ``D > N`` a factor ``R`` with ``R R^T = Y Y^T`` (:func:`yy_factor`)
can stand in for ``Y``.
With missing outputs (:func:`collapsed_bound_missing`) the bound is the sum over columns of the
single-column bound on that column's observed rows; columns with the same missingness pattern share
one ``Psi2`` and one factorisation of ``A``. :func:`collapsed_bound` has a hand-written gradient (GPy's), which
compiles to far fewer operations than differentiating through the factorisations.

Nothing here raises on numerical failure: a ``Kmm`` or ``A`` that is not positive definite gives NaN,
which the caller checks.
"""

from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.numerics.linalg import cholesky, cholesky_with_jitter, solve_triangular

_LOG_2PI = math.log(2.0 * math.pi)
EIGENVALUE_CUTOFF = 1e-12


def _symmetric(a):
    return 0.5 * (a + jnp.swapaxes(a, -1, -2))


def _inducing_factor(Kmm):
    """Cholesky factor of ``Kmm``, with jitter added only if the factorisation fails (as GPy's
    ``jitchol``): near-singular ``Kmm`` (long length-scales) would otherwise make the bound NaN and
    stop the optimiser's line search."""
    return cholesky_with_jitter(_symmetric(Kmm))[0]


def _whiten_psi2(L, psi2):
    """``L^-1 Psi2 L^-T`` for ``psi2`` of shape (M, M) or (G, M, M)."""
    if psi2.ndim == 3:
        return jax.vmap(lambda p: _whiten_psi2(L, p))(psi2)
    left = solve_triangular(L, psi2, lower=True)
    return _symmetric(solve_triangular(L, left.T, lower=True))


def collapsed_bound(Y, psi0, psi1, psi2, Kmm, noise_variance, *, output_dim=None) -> jax.Array:
    """The data term ``F-hat`` of the Bayesian GPLVM bound for fully observed outputs.

    Parameters
    ----------
    Y : array_like, shape (N, D) or (N, r)
        Outputs, or a factor ``R`` with ``R R^T = Y Y^T`` (see :func:`yy_factor`) together with
        ``output_dim``.
    psi0 : array_like, shape (N,)
        Per-point ``E[k(x_n, x_n)]``.
    psi1 : array_like, shape (N, M)
        ``E[k(x_n, z_m)]``.
    psi2 : array_like, shape (M, M)
        ``sum_n E[k(z, x_n) k(x_n, z')]``.
    Kmm : array_like, shape (M, M)
        Covariance of the inducing inputs, jitter already added.
    noise_variance : float
        Gaussian noise variance ``sigma^2``.
    output_dim : int, optional
        The number of outputs ``D`` when ``Y`` is a factor; defaults to ``Y.shape[1]``.

    Returns
    -------
    jax.Array
        The scalar bound (NaN if ``Kmm`` is not positive definite).
    """
    Y = jnp.asarray(Y)
    D = Y.shape[1] if output_dim is None else output_dim
    return _collapsed_bound(D, Y, jnp.asarray(psi0), jnp.asarray(psi1), jnp.asarray(psi2), jnp.asarray(Kmm),
                            jnp.asarray(noise_variance, dtype=jnp.float64))


@partial(jax.custom_vjp, nondiff_argnums=(0,))
def _collapsed_bound(D, Y, psi0, psi1, psi2, Kmm, noise_variance):
    return _collapsed_bound_forward(D, Y, psi0, psi1, psi2, Kmm, noise_variance)[0]


def _collapsed_bound_forward(D, Y, psi0, psi1, psi2, Kmm, noise_variance):
    N = Y.shape[0]
    beta = 1.0 / noise_variance
    L = _inducing_factor(Kmm)
    C = _whiten_psi2(L, psi2)
    LA = cholesky(np.eye(L.shape[0]) + beta * C)
    c = solve_triangular(LA, solve_triangular(L, psi1.T @ Y, lower=True), lower=True)
    value = (0.5 * N * D * (jnp.log(beta) - _LOG_2PI)
             - D * jnp.sum(jnp.log(jnp.diag(LA)))
             - 0.5 * beta * jnp.sum(Y * Y)
             + 0.5 * beta ** 2 * jnp.sum(c * c)
             - 0.5 * beta * D * (jnp.sum(psi0) - jnp.trace(C)))
    return value, (Y, psi0, psi1, L, C, LA, c, beta)


def _collapsed_bound_backward(D, residuals, cotangent):
    """The gradients of GPy's ``VarDTC`` (with ``Sigma = Kmm + beta Psi2`` and ``v = Sigma^-1 Psi1^T Y``)::

        dF/dPsi2 = beta H,  H = 1/2 (D Kmm^-1 - D Sigma^-1 - beta^2 v v^T),  dF/dKmm = H - beta D/2 Kmm^-1 Psi2 Kmm^-1,
        dF/dPsi1 = beta^2 Y v^T,  dF/dpsi0 = -beta D/2,
        dF/dbeta = N D / (2 beta) - 1/2 tr(Y^T Y) + beta ||c||^2 - D/2 sum(psi0) + tr(H Psi2),

    computed in the whitened basis of ``L^-1`` (``Kmm^-1 = L^-T L^-1``, ``Sigma^-1 = L^-T A^-1 L^-1``).
    """
    Y, psi0, psi1, L, C, LA, c, beta = residuals
    N, M = psi1.shape
    Li, LAi = (solve_triangular(factor, np.eye(M), lower=True) for factor in (L, LA))
    u = LAi.T @ c
    whitened_H = 0.5 * (D * (np.eye(M) - LAi.T @ LAi) - beta ** 2 * (u @ u.T))
    v = Li.T @ u
    d_psi2, d_Kmm = Li.T @ jnp.stack([beta * whitened_H, whitened_H - 0.5 * beta * D * C]) @ Li
    d_beta = (0.5 * N * D / beta - 0.5 * jnp.sum(Y * Y) + beta * jnp.sum(c * c) - 0.5 * D * jnp.sum(psi0)
              + jnp.sum(whitened_H * C))
    gradients = (beta ** 2 * (psi1 @ v) - beta * Y, jnp.full(N, -0.5 * beta * D), beta ** 2 * (Y @ v.T), d_psi2,
                 d_Kmm, -beta ** 2 * d_beta)
    return tuple(cotangent * gradient for gradient in gradients)


_collapsed_bound.defvjp(_collapsed_bound_forward, _collapsed_bound_backward)


def collapsed_bound_missing(Y, psi0, psi1, psi2_groups, group_of_column, Kmm, noise_variance,
                            observed) -> jax.Array:
    """The data term ``F-hat`` with missing outputs, exactly (GPy's missing-data Bayesian GPLVM).

    The bound is ``sum_d F_d``, where ``F_d`` is :func:`collapsed_bound` of column ``d`` on its observed
    rows: ``psi0`` and ``psi1`` restricted to those rows and ``Psi2`` summed over them. Columns with
    the same missingness pattern share a group (:func:`missingness_groups`).

    Parameters
    ----------
    Y : array_like, shape (N, D)
        Outputs; missing entries may hold anything (NaN included), they are replaced by 0.
    psi0 : array_like, shape (N,)
    psi1 : array_like, shape (N, M)
    psi2_groups : array_like, shape (G, M, M)
        ``sum_n patterns[n, g] Psi2_n`` for each missingness pattern ``g``.
    group_of_column : array_like of int, shape (D,)
        The pattern of each output column.
    Kmm : array_like, shape (M, M)
        Covariance of the inducing inputs, jitter already added.
    noise_variance : float
        Gaussian noise variance ``sigma^2``.
    observed : array_like of bool, shape (N, D)
        True where ``Y`` is observed; column ``d`` must equal the pattern ``group_of_column[d]``.

    Returns
    -------
    jax.Array
        The scalar bound (NaN if ``Kmm`` is not positive definite).
    """
    observed = jnp.asarray(observed, dtype=bool)
    weights = observed.astype(jnp.float64)
    Y = jnp.where(observed, jnp.asarray(Y), 0.0)
    psi2_groups = jnp.asarray(psi2_groups)
    group_of_column = jnp.asarray(group_of_column)
    G = psi2_groups.shape[0]
    beta = 1.0 / noise_variance
    columns_in_group = jnp.zeros(G).at[group_of_column].add(1.0)

    L = _inducing_factor(Kmm)
    C = _whiten_psi2(L, psi2_groups)
    LA = cholesky(jnp.eye(L.shape[0]) + beta * C)
    log_det = 2.0 * jnp.sum(jnp.log(jnp.diagonal(LA, axis1=-2, axis2=-1)), axis=-1)
    b = solve_triangular(L, psi1.T @ Y, lower=True)
    c = jax.vmap(lambda g, bd: solve_triangular(LA[g], bd, lower=True))(group_of_column, b.T)
    num_observed = jnp.sum(weights)
    return (0.5 * num_observed * (jnp.log(beta) - _LOG_2PI)
            - 0.5 * jnp.dot(columns_in_group, log_det)
            - 0.5 * beta * jnp.sum(Y * Y)
            + 0.5 * beta ** 2 * jnp.sum(c * c)
            - 0.5 * beta * jnp.dot(jnp.sum(weights, axis=1), psi0)
            + 0.5 * beta * jnp.dot(columns_in_group, jnp.trace(C, axis1=-2, axis2=-1)))


def grouped_psi2(psi2n, patterns) -> jax.Array:
    """``Psi2`` summed over the observed rows of each missingness pattern.

    Parameters
    ----------
    psi2n : array_like, shape (N, M, M)
        Per-point ``Psi2_n``.
    patterns : array_like of bool, shape (N, G)

    Returns
    -------
    jax.Array, shape (G, M, M)
    """
    return jnp.einsum("ng,nij->gij", jnp.asarray(patterns, dtype=jnp.float64), psi2n)


def missingness_groups(observed):
    """The distinct missingness patterns of the output columns.

    Parameters
    ----------
    observed : array_like of bool, shape (N, D)

    Returns
    -------
    patterns : numpy.ndarray of bool, shape (N, G)
        The distinct observed-row indicators, in order of first appearance.
    group_of_column : numpy.ndarray of int, shape (D,)
        ``observed[:, d] == patterns[:, group_of_column[d]]``.
    """
    observed = np.asarray(observed, dtype=bool)
    _, first, inverse = np.unique(observed.T, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    order = np.argsort(first)
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    group_of_column = rank[inverse]
    patterns = observed[:, np.sort(first)]
    return patterns, group_of_column


def yy_factor(Y):
    """A factor of ``Y Y^T`` with at most ``N`` columns, for outputs with ``D > N``.

    Parameters
    ----------
    Y : array_like, shape (N, D)
        Fully observed outputs.

    Returns
    -------
    R : numpy.ndarray, shape (N, r)
        ``U sqrt(Lambda)`` from the eigendecomposition of ``Y Y^T``, eigenvalues above
        ``1e-12`` times the largest kept; ``Y`` itself when ``D <= N``.
    D : int
        The number of outputs, to pass as ``output_dim``.
    """
    Y = np.asarray(Y, dtype=np.float64)
    N, D = Y.shape
    if D <= N:
        return Y, D
    eigenvalues, U = np.linalg.eigh(Y @ Y.T)
    keep = eigenvalues > EIGENVALUE_CUTOFF * max(eigenvalues.max(), 0.0)
    if not keep.any():
        return np.zeros((N, 1)), D
    return U[:, keep] * np.sqrt(eigenvalues[keep]), D
