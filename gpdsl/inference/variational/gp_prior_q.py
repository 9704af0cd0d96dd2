"""``q(X)`` for latent inputs with a GP prior: the dynamical and the supervised GPLVM.

Damianou, Titsias & Lawrence (2016), Sec. 3.3.2: each latent dimension has the prior
``x_q ~ N(0, K)`` with ``K = k_x(t, t)`` over time or over observed inputs, and ``q(X)`` follows it,
``q(x_q) = N(mu_q, S_q)`` with a full ``N x N`` covariance. In the reparameterisation of Opper &
Archambeau (2009), eqs. (33)-(34), the free parameters are ``mu_bar_q`` and ``lambda_q >= 0``::

    mu_q = K mu_bar_q,        S_q = (K^-1 + diag(lambda_q))^-1,

``2 N Q`` numbers that any value turns into a valid Gaussian, and the optimum of the bound over all
Gaussians has this form (the data term sees only the marginals). Everything is evaluated through
``B_q = I + Lambda^1/2 K Lambda^1/2``, whose eigenvalues are at least 1 (App. C), so ``K`` itself is
never inverted::

    diag(S_q) = diag(K) - ||L_B^-1 Lambda^1/2 K||^2 (column sums),
    KL_q = 1/2 [tr(B_q^-1) + mu_bar_q^T K mu_bar_q + log|B_q| - N].

Independent sequences share the mapping and have a block-diagonal ``K``: the model writes it with a
kernel that is zero between sequences (see docs/language.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.errors import MethodError
from gpdsl.inference.variational.latent_q import LatentQ
from gpdsl.inference.variational.softplus import inverse_softplus
from gpdsl.numerics.linalg import cho_solve, cholesky, solve_triangular

DEFAULT_MEDIAN_VARIANCE = 0.18  # vargplvm's initCovarMedian
LAMBDA_RANGE = (1e-8, 1e8)


class GPPriorQParams(NamedTuple):
    """Parameters of ``q(X)`` under a GP prior (Opper-Archambeau form).

    Attributes
    ----------
    mu_bar : array, shape (N, Q)
        ``mu_q = K mu_bar_q``.
    lam : array, shape (N, Q)
        The non-negative site precisions ``lambda_q``: ``S_q = (K^-1 + diag(lambda_q))^-1``.
    """

    mu_bar: jax.Array
    lam: jax.Array


class _GPPriorCoordinates(NamedTuple):
    mu_bar: jax.Array
    softplus_lam: jax.Array  # lambda is the softplus of these


class GPPriorMoments(NamedTuple):
    """Marginal moments of ``q(X)`` with the pieces of the KL term they share a factorisation with."""

    mean: jax.Array
    variance: jax.Array
    mean_term: jax.Array  # sum_q mu_bar_q^T K mu_bar_q
    log_det_b: jax.Array  # log|B_q| per latent dimension, shape (Q,)
    trace_b_inv: jax.Array  # tr(B_q^-1) per latent dimension, shape (Q,)


class GPPriorGaussian(LatentQ):
    """``q(x_q) = N(K mu_bar_q, (K^-1 + diag(lambda_q))^-1)`` against ``p(x_q) = N(0, K)``, per latent dimension.

    The optimiser moves ``mu_bar`` and the inverse softplus of ``lambda``. (Whitened means, ``L^T mu_bar``
    with ``K = L L^T``, and ``log lambda`` were tried: on the supervised GPLVM of sinusoid case 1 both
    reached lower bounds in the same number of iterations.)

    Parameters
    ----------
    prior_covariance : callable
        ``theta -> K``, the prior covariance of one latent dimension over the ``N`` points (traceable). With
        ``blocks``, ``(theta, index) -> K[index][:, index]`` for a ``(B, n)`` batch of index sets, shape
        ``(B, n, n)``.
    blocks : sequence of array_like of int, optional
        Index sets of independent groups of points (``K`` is zero between them), e.g. the frames of each
        sequence. ``K`` is then formed and factorised block by block: ``O(sum n_b^3)`` instead of
        ``O(N^3)``. Blocks of equal size are batched.
    """

    def __init__(self, prior_covariance: Callable, blocks=None):
        self.prior_covariance = prior_covariance
        self.blocks = batched_blocks(blocks)

    def covariance_blocks(self, theta) -> list[tuple[np.ndarray, jax.Array]]:
        """``(index, K_blocks)`` pairs: batched index sets ``(B, n)`` and their prior covariances ``(B, n, n)``."""
        if self.blocks is not None:
            return [(index, self.prior_covariance(theta, index)) for index in self.blocks]
        return dense_blocks(self.prior_covariance(theta))

    def initial(self, mean, theta, init_variance=None):
        """Parameters whose ``q(X)`` is the GP posterior of ``X`` given ``mean`` observed with precision ``lambda``.

        ``lambda`` is one number, found by bisection so that the median of the variances of ``q`` is
        ``init_variance`` (default 0.18, vargplvm's ``initCovarMedian``); then ``mu_bar = (K +
        I / lambda)^-1 mean``, which smooths ``mean`` along the prior. (vargplvm's ``K^-1 mean``
        reproduces ``mean`` exactly, but through an ill-conditioned solve that starts the optimiser at
        huge ``mu_bar``.) Traceable in ``theta``.
        """
        target = DEFAULT_MEDIAN_VARIANCE if init_variance is None else init_variance
        if not np.isscalar(target) or target <= 0:
            raise MethodError(f"init_variance must be positive; got {init_variance}")
        blocks = self.covariance_blocks(theta)
        lam = _calibrated_precision(blocks, target)
        mean = jnp.asarray(mean)

        def smooth(K, m):
            return cho_solve((cholesky(K + jnp.eye(K.shape[0]) / lam), True), m)

        mu_bar = jnp.zeros_like(mean)
        for index, K_blocks in blocks:
            mu_bar = mu_bar.at[index].set(jax.vmap(smooth)(K_blocks, mean[index]))
        return GPPriorQParams(mu_bar, jnp.full(jnp.shape(mean), lam))

    def moments(self, params, theta, xp=jnp) -> GPPriorMoments:
        blocks = self.covariance_blocks(theta)
        mu_bar = jnp.asarray(params.mu_bar)
        mean = jnp.zeros_like(mu_bar)
        for index, K_blocks in blocks:
            mean = mean.at[index].set(jnp.einsum("bij,bjq->biq", K_blocks, mu_bar[index]))
        moments = _moments(blocks, mean, jnp.sum(mu_bar * mean), jnp.asarray(params.lam))
        if xp is np:
            return GPPriorMoments(*(np.asarray(part) for part in moments))
        return moments

    def kl(self, params, theta, moments=None):
        moments = moments if moments is not None else self.moments(params, theta)
        N, Q = moments.mean.shape
        return 0.5 * (jnp.sum(moments.trace_b_inv) + moments.mean_term + jnp.sum(moments.log_det_b) - N * Q)

    def covariance(self, params, theta):
        """``S_q = K - K Lambda^1/2 B_q^-1 Lambda^1/2 K`` per latent dimension, zero between blocks, shape ``(Q, N, N)``."""
        lam = jnp.asarray(params.lam)
        N, Q = lam.shape
        per_dimension = jax.vmap(_block_covariance, in_axes=(None, 1))
        covariance = jnp.zeros((Q, N, N))
        for index, K_blocks in self.covariance_blocks(theta):
            S = jax.vmap(per_dimension)(K_blocks, lam[index])  # (B, Q, n, n)
            covariance = covariance.at[:, index[:, :, None], index[:, None, :]].set(jnp.moveaxis(S, 1, 0))
        return covariance

    def dense_prior_covariance(self, theta, num_points):
        K = jnp.zeros((num_points, num_points))
        for index, K_blocks in self.covariance_blocks(theta):
            K = K.at[index[:, :, None], index[:, None, :]].set(K_blocks)
        return K

    def unconstrain(self, params, xp=np):
        return _GPPriorCoordinates(xp.asarray(params.mu_bar, dtype=float),
                                   inverse_softplus(xp.asarray(params.lam, dtype=float), xp))

    def constrain(self, coordinates, xp=jnp):
        softplus = jax.nn.softplus if xp is jnp else (lambda c: np.logaddexp(0.0, c))
        return GPPriorQParams(coordinates.mu_bar, softplus(coordinates.softplus_lam))


def batched_blocks(blocks) -> list[np.ndarray] | None:
    """Index sets grouped by size into ``(count, size)`` arrays (None stays None)."""
    if blocks is None:
        return None
    by_size: dict[int, list] = {}
    for block in blocks:
        block = np.asarray(block, dtype=int)
        by_size.setdefault(block.size, []).append(block)
    return [np.stack(group) for _, group in sorted(by_size.items())]


def dense_blocks(K) -> list[tuple[np.ndarray, jax.Array]]:
    """A full covariance as the one block of :meth:`GPPriorGaussian.covariance_blocks`."""
    return [(np.arange(K.shape[0])[None], K[None])]


def _moments(blocks, mean, mean_term, lam) -> GPPriorMoments:
    variance = jnp.zeros_like(lam)
    log_det_b = trace_b_inv = jnp.zeros(lam.shape[1])
    per_dimension = jax.vmap(_block_moments, in_axes=(None, 1), out_axes=(1, 0, 0))
    for index, K_blocks in blocks:
        v, log_det, trace = jax.vmap(per_dimension)(K_blocks, lam[index])
        variance = variance.at[index].set(v)
        log_det_b, trace_b_inv = log_det_b + log_det.sum(axis=0), trace_b_inv + trace.sum(axis=0)
    return GPPriorMoments(mean, variance, mean_term, log_det_b, trace_b_inv)


def site_factor(K, lam_q) -> tuple[jax.Array, jax.Array]:
    """``(lambda^1/2, chol(B))`` with ``B = I + Lambda^1/2 K Lambda^1/2`` for one latent dimension (App. C)."""
    root = jnp.sqrt(lam_q)
    return root, cholesky(jnp.eye(K.shape[0]) + root[:, None] * K * root[None, :])


def _block_moments(K, lam_q):
    """Marginal variances, ``log|B_q|`` and ``tr(B_q^-1)`` of one latent dimension over one block."""
    N = K.shape[0]
    root, chol_b = site_factor(K, lam_q)
    V = solve_triangular(chol_b, root[:, None] * K, lower=True)
    inverse_chol = solve_triangular(chol_b, jnp.eye(N), lower=True)
    return (jnp.diag(K) - jnp.sum(V * V, axis=0), 2.0 * jnp.sum(jnp.log(jnp.diag(chol_b))),
            jnp.sum(inverse_chol * inverse_chol))


def _block_covariance(K, lam_q):
    root, chol_b = site_factor(K, lam_q)
    V = solve_triangular(chol_b, root[:, None] * K, lower=True)
    return K - V.T @ V


def calibrated_precision(K, median_variance: float, steps: int = 50) -> jax.Array:
    """The ``lambda`` whose ``diag((K^-1 + lambda I)^-1)`` has median ``median_variance``, by bisection on ``log lambda``.

    Every variance decreases with ``lambda``, so the median does; the search spans ``1e-8 .. 1e8`` and
    returns an end of it when the target lies outside. Traceable in ``K``.
    """
    return _calibrated_precision(dense_blocks(K), median_variance, steps)


def _calibrated_precision(blocks, median_variance: float, steps: int = 50) -> jax.Array:
    N = sum(index.size for index, _ in blocks)

    def median_variance_at(log_lam):
        return jnp.median(_moments(blocks, jnp.zeros((N, 1)), 0.0, jnp.full((N, 1), jnp.exp(log_lam))).variance)

    def bisect(_, bounds):
        low, high = bounds
        middle = 0.5 * (low + high)
        too_large = median_variance_at(middle) > median_variance
        return jnp.where(too_large, middle, low), jnp.where(too_large, high, middle)

    low, high = jax.lax.fori_loop(0, steps, bisect, (jnp.log(LAMBDA_RANGE[0]), jnp.log(LAMBDA_RANGE[1])))
    return jnp.exp(0.5 * (low + high))
