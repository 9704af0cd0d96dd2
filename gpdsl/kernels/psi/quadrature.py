"""Quadrature rules for Gaussian expectations of kernels: unscented, Gauss-Hermite, Monte Carlo.

Each rule returns points of shape ``(P, N, Q)`` (``P`` points for each ``q(x_n) = N(mu_n, diag(S_n))``)
and weights of shape ``(P,)`` shared by all ``n``; :func:`quadrature_statistics` turns them into
psi statistics for any kernel.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def unscented_rule(mean, variance):
    """Uhlmann's symmetric sigma points ``mu_n +/- sqrt(Q S_nq) e_q``, weights ``1 / (2Q)``.

    Parameters
    ----------
    mean, variance : jax.Array, shape (N, Q)

    Returns
    -------
    points : jax.Array, shape (2Q, N, Q)
    weights : jax.Array, shape (2Q,)
    """
    Q = mean.shape[1]
    offsets = jnp.eye(Q)[:, None, :] * jnp.sqrt(Q * variance)[None, :, :]
    points = jnp.concatenate([mean + offsets, mean - offsets], axis=0)
    return points, jnp.full((2 * Q,), 1.0 / (2 * Q))


def gauss_hermite_rule(mean, variance, nodes):
    """Tensor-product Gauss-Hermite rule of order ``nodes`` per dimension (``nodes**Q`` points).

    Parameters
    ----------
    mean, variance : jax.Array, shape (N, Q)
    nodes : int
        Order ``H`` of the one-dimensional rule.

    Returns
    -------
    points : jax.Array, shape (H**Q, N, Q)
        ``mu_n + sqrt(2 S_n) t`` for every node ``t`` of the grid.
    weights : jax.Array, shape (H**Q,)
        Products over dimensions of ``w / sqrt(pi)``.
    """
    Q = mean.shape[1]
    t, w = np.polynomial.hermite.hermgauss(nodes)
    grid = np.stack(np.meshgrid(*([t] * Q), indexing="ij"), axis=-1).reshape(-1, Q)
    grid_weights = np.prod(np.stack(np.meshgrid(*([w / np.sqrt(np.pi)] * Q), indexing="ij"), -1), -1).ravel()
    points = mean[None] + jnp.sqrt(2.0 * variance)[None] * jnp.asarray(grid)[:, None, :]
    return points, jnp.asarray(grid_weights)


def monte_carlo_rule(mean, variance, samples, key):
    """Reparameterised draws ``mu_n + sqrt(S_n) * eps``, ``eps ~ N(0, I)`` from ``key``, weights ``1/S``.

    Parameters
    ----------
    mean, variance : jax.Array, shape (N, Q)
    samples : int
        Number of draws ``S`` per point.
    key : jax.Array
        PRNG key; the same key gives the same draws, so an objective built on them is deterministic.

    Returns
    -------
    points : jax.Array, shape (S, N, Q)
    weights : jax.Array, shape (S,)
    """
    eps = jax.random.normal(key, (samples,) + mean.shape, dtype=mean.dtype)
    return mean[None] + jnp.sqrt(variance)[None] * eps, jnp.full((samples,), 1.0 / samples)


def quadrature_statistics(kernel, Z, points, weights, W):
    """Psi statistics of any kernel from a quadrature rule.

    Parameters
    ----------
    kernel : Kernel
    Z : jax.Array, shape (M, Q)
    points : jax.Array, shape (P, N, Q)
    weights : jax.Array, shape (P,)
    W : jax.Array, shape (N, G)
        Row weights: ``psi2[g] = sum_n W[n, g] psi2_n``.

    Returns
    -------
    tuple of jax.Array
        ``psi0`` (N,) from ``kernel.same``, ``psi1`` (N, M) and ``psi2`` (G, M, M) from ``kernel.pair``.
    """
    P, N, Q = points.shape
    flat = points.reshape(P * N, Q)
    same = jax.vmap(kernel.same)(flat).reshape(P, N)
    k = jax.vmap(jax.vmap(kernel.pair, (None, 0)), (0, None))(flat, Z).reshape(P, N, -1)
    psi0 = weights @ same
    psi1 = jnp.einsum("p,pnm->nm", weights, k)
    weighted = k * weights[:, None, None]
    if W.shape[1] == 1:
        psi2 = jnp.einsum("pnm,pnk->mk", weighted * W[None, :, 0, None], k)[None]
    else:
        psi2 = jnp.einsum("ng,nmk->gmk", W, jnp.einsum("pnm,pnk->nmk", weighted, k))
    return psi0, psi1, psi2
