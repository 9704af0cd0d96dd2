"""The uncollapsed variational bound of a (Bayesian GPLVM or sparse) GP with explicit ``q(u)``, and its minibatch estimate.

Hensman, Fusi & Lawrence (2013) keep ``q(u_d) = N(m_d, S)`` instead of integrating it out (the collapsed
bound of :mod:`gpdsl.inference.variational.collapsed_bound`), so the bound is a sum over data points and a
minibatch of ``B`` of the ``N`` points, scaled by ``N / B``, estimates it without bias. For outputs ``Y``
(N x D), ``A = Kmm^-1``, the inducing means ``U = [m_1 ... m_D]`` (M x D) and one covariance ``S`` shared by
the columns (which loses nothing for fully observed outputs: the optimal ``S`` does not depend on ``d``)::

    F = -N D/2 log(2 pi s^2) - 1/(2 s^2) [ ||Y||^2 - 2 tr(Y^T Psi1 A U) + tr(A (U U^T + D S) A Psi2)
                                          + D sum(psi0) - D tr(A Psi2) ]
        - sum_d KL(N(m_d, S) || N(0, Kmm))

At the optimal ``S = Kmm (Kmm + Psi2 / s^2)^-1 Kmm`` and ``m_d = Kmm (s^2 Kmm + Psi2)^-1 Psi1^T y_d``
(:func:`optimal_inducing_q`) ``F`` equals the collapsed bound. The KL term of ``q(X)`` is the caller's, as for
the collapsed bound.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from gpdsl.numerics.linalg import cho_solve, cholesky, cholesky_with_jitter, solve_triangular

_LOG_2PI = math.log(2.0 * math.pi)


class InducingQ(NamedTuple):
    """``q(u_d) = N(mean[:, d], chol chol^T)``.

    Attributes
    ----------
    mean : jax.Array, shape (M, D)
    chol : jax.Array, shape (M, M) or (D, M, M)
        Lower-triangular factor of the covariance shared by the output columns, or one per column (the upper
        triangle is ignored).
    """

    mean: jax.Array
    chol: jax.Array


def expected_log_likelihood(Y, psi0, psi1, psi2, Kmm, noise_variance, q: InducingQ, observed=None) -> jax.Array:
    """``sum_{n, d} E[log N(y_nd | f_nd, s^2)]`` over the observed entries of the points whose statistics are given
    (traceable).

    Parameters
    ----------
    Y : array_like, shape (B, D)
        Outputs of the points (missing entries may hold anything when ``observed`` is given).
    psi0 : array_like, shape (B,)
    psi1 : array_like, shape (B, M)
    psi2 : array_like, shape (M, M) or (D, M, M)
        Summed over the ``B`` points; with ``observed``, one per output column, summed over its observed points.
    Kmm : array_like, shape (M, M)
        Covariance of the inducing inputs, jitter added.
    noise_variance : float
    q : InducingQ
    observed : array_like of bool, shape (B, D), optional
        The observed entries (all by default).

    Returns
    -------
    jax.Array
    """
    Y = jnp.asarray(Y)
    B, D = Y.shape
    L = cholesky_with_jitter(0.5 * (Kmm + Kmm.T))[0]
    AU = cho_solve((L, True), q.mean)
    chol = jnp.tril(q.chol)
    S = chol @ chol.T
    if observed is None:
        weights, count = jnp.ones_like(Y), B * D
        psi2 = jnp.broadcast_to(psi2, (1,) + psi2.shape[-2:]) if psi2.ndim == 2 else psi2
    else:
        if psi2.ndim != 3:
            raise ValueError("with observed, psi2 must be one matrix per output column, shape (D, M, M)")
        weights = jnp.asarray(observed, dtype=Y.dtype)
        Y, count = jnp.where(weights > 0, Y, 0.0), jnp.sum(weights)
    A_psi2 = jax.vmap(lambda P: cho_solve((L, True), P))(psi2)                 # (G, M, M), G = 1 or D
    A_psi2_A = jax.vmap(lambda P: cho_solve((L, True), P.T))(A_psi2)
    if A_psi2_A.shape[0] == 1:
        quadratic = jnp.sum(A_psi2_A[0] * (q.mean @ q.mean.T)) + D * jnp.sum(A_psi2_A[0] * S)
        trace = D * jnp.trace(A_psi2[0])
    else:
        quadratic = jnp.einsum("md,dmk,kd->", q.mean, A_psi2_A, q.mean) + jnp.sum(A_psi2_A * S[None])
        trace = jnp.sum(jnp.trace(A_psi2, axis1=-2, axis2=-1))
    squares = (jnp.sum(Y * Y) - 2.0 * jnp.sum(Y * (psi1 @ AU)) + quadratic
               + jnp.sum(weights * psi0[:, None]) - trace)
    return -0.5 * count * (_LOG_2PI + jnp.log(noise_variance)) - 0.5 * squares / noise_variance


def inducing_kl(Kmm, q: InducingQ) -> jax.Array:
    """``sum_d KL(N(m_d, S_d) || N(0, Kmm))`` (traceable); ``q.chol`` is one ``(M, M)`` factor shared by the columns
    (``S_d = S``) or one per column, ``(D, M, M)``."""
    M, D = q.mean.shape
    L = cholesky_with_jitter(0.5 * (Kmm + Kmm.T))[0]
    chol = jnp.tril(q.chol)
    copies = D if chol.ndim == 2 else 1
    whitened_chol = jax.vmap(lambda c: solve_triangular(L, c, lower=True))(chol.reshape((-1, M, M)))
    whitened_mean = solve_triangular(L, q.mean, lower=True)
    log_det_q = jnp.sum(jnp.log(jnp.abs(jnp.diagonal(chol, axis1=-2, axis2=-1))))
    log_det_ratio = 2.0 * (D * jnp.sum(jnp.log(jnp.diag(L))) - copies * log_det_q)
    return 0.5 * (copies * jnp.sum(whitened_chol ** 2) + jnp.sum(whitened_mean ** 2) - M * D + log_det_ratio)


def uncollapsed_bound(Y, psi0, psi1, psi2, Kmm, noise_variance, q: InducingQ, *, scale=1.0, observed=None) -> jax.Array:
    """``scale * E[log p(Y_batch | f)] - KL(q(u) || p(u))``: the bound for the whole data (``scale = 1``), or its
    unbiased estimate from a minibatch of ``B`` of ``N`` points with ``scale = N / B`` (traceable).

    Parameters are those of :func:`expected_log_likelihood` (statistics of the batch's points) and ``scale``.
    """
    return (scale * expected_log_likelihood(Y, psi0, psi1, psi2, Kmm, noise_variance, q, observed)
            - inducing_kl(Kmm, q))


def optimal_inducing_q(Y, psi1, psi2, Kmm, noise_variance, observed=None) -> InducingQ:
    """The ``q(u)`` that maximises :func:`uncollapsed_bound` over the whole data (where it equals the collapsed
    bound): ``S = Kmm Sigma^-1 Kmm`` and ``U = Kmm Sigma^-1 Psi1^T Y / s^2`` with ``Sigma = Kmm + Psi2 / s^2``.

    With ``observed`` (``psi2`` then one per column, ``(D, M, M)``) each column's mean is its own optimum, and the
    covariance shared by the columns is that of the columns' mean ``Psi2`` (a start, not the optimum).
    """
    if observed is not None:
        Y = jnp.where(jnp.asarray(observed), jnp.asarray(Y), 0.0)
        means = jax.vmap(lambda P, y: optimal_inducing_q(y[:, None], psi1, P, Kmm, noise_variance).mean[:, 0],
                         in_axes=(0, 1), out_axes=1)(psi2, Y)
        return InducingQ(means, optimal_inducing_q(Y, psi1, jnp.mean(psi2, axis=0), Kmm, noise_variance).chol)
    Sigma = Kmm + psi2 / noise_variance
    L_sigma = cholesky(0.5 * (Sigma + Sigma.T))
    mean = Kmm @ cho_solve((L_sigma, True), psi1.T @ jnp.asarray(Y)) / noise_variance
    S = Kmm @ cho_solve((L_sigma, True), Kmm)
    return InducingQ(mean, cholesky(0.5 * (S + S.T)))
