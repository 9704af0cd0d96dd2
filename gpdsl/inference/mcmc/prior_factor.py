"""A latent vector's prior factor ``L`` (``K = L L^T``) as the samplers use it: a lower-triangular matrix, or a vector
holding the diagonal of a diagonal factor.

A view whose sampled vector has a diagonal prior covariance (the identity of a state-space GP's innovations,
:meth:`~gpdsl.inference.families.state_space_latent.StateSpaceLatent.prior_factor`) gives its factor as that vector, so
that elliptical slice sampling and the hyperparameter updates (:mod:`gpdsl.inference.mcmc.hyper_updates`) cost ``O(n)``
instead of forming and factorising an ``n x n`` matrix. Each function below takes either form.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from gpdsl.numerics.linalg import mvn_logpdf_chol, solve_triangular


def is_diagonal(L) -> bool:
    """Whether ``L`` is a diagonal factor held as its diagonal."""
    return jnp.ndim(L) == 1


def times(L, x) -> jax.Array:
    """``L x``."""
    return L * x if is_diagonal(L) else L @ x


def transpose_times(L, x) -> jax.Array:
    """``L^T x``."""
    return L * x if is_diagonal(L) else L.T @ x


def solve(L, x) -> jax.Array:
    """``L^{-1} x``."""
    return x / L if is_diagonal(L) else solve_triangular(L, x, lower=True)


def transpose_solve(L, x) -> jax.Array:
    """``L^{-T} x``."""
    return x / L if is_diagonal(L) else solve_triangular(L.T, x, lower=False)


def diagonal(L) -> jax.Array:
    """The diagonal of ``L``."""
    return L if is_diagonal(L) else jnp.diagonal(L)


def block(L, rows: slice):
    """The factor of a block of the vector (``L[rows, rows]``; a block-diagonal ``K`` keeps it exact)."""
    return L[rows] if is_diagonal(L) else L[rows, rows]


def logpdf(f, L) -> jax.Array:
    """``log N(f | 0, L L^T)``."""
    if not is_diagonal(L):
        return mvn_logpdf_chol(f, L)
    return -0.5 * jnp.sum((f / L) ** 2) - jnp.sum(jnp.log(L)) - 0.5 * f.shape[0] * math.log(2.0 * math.pi)


def surrogate_factor(L, s) -> jax.Array:
    """The Cholesky factor of ``I + L^T S^{-1} L`` (``S = diag(s)``), diagonal when ``L`` is."""
    from gpdsl.numerics.linalg import cholesky

    if is_diagonal(L):
        return jnp.sqrt(1.0 + L * L / s)
    scaled = L / jnp.sqrt(s)[:, None]
    return cholesky(jnp.eye(L.shape[0]) + scaled.T @ scaled)
