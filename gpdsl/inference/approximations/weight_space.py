"""Gaussian approximations over basis weights: a prior ``z ~ N(0, I_M)`` and a likelihood on ``f = A z + offset``.

A Hilbert-space approximate GP (:mod:`gpdsl.inference.families.hsgp`) is such a model with
``A = PHI diag(sqrt(S(omega)))`` (``N x M``). Its Laplace approximation is that of the latent GP with the covariance
``A A^T`` of rank ``M``, computed in the weights: Newton's method for the mode of ``log p(y | A z + offset) - |z|^2 / 2``
has the Hessian ``-(I_M + A^T W A)``, ``W`` the likelihood's negative second derivative at ``f``, so each step is one
``M x M`` Cholesky factorisation and ``O(N M^2)`` work (``O(N prod_d (2 m_d + 1))`` for the Laplacian basis's
``A^T W A`` summed from cosines: :mod:`gpdsl.backends.jax.hsgp_map`), and no ``N x N`` matrix is formed. By the
determinant lemma ``|I_M + A^T W A| = |I_N + W^1/2 A A^T W^1/2|``, so the approximate log marginal is the one
:func:`~gpdsl.inference.approximations.laplace.laplace` gives with ``K = A A^T``.

The result is a :class:`~gpdsl.inference.approximations.gaussian.GaussianApproximation` of ``z``: ``mean`` and
``alpha`` are ``z_hat`` (the prior covariance is the identity), ``site_precision`` and ``site_location`` are the
Gaussian sites on ``f`` (``W`` and ``W A z_hat + grad``, length ``N``) and ``chol_b`` is the ``M x M`` factor of
``I_M + A^T diag(site_precision) A``. :func:`sample` and :func:`log_prior_minus_log_q` are what importance sampling
from it needs (:mod:`gpdsl.inference.mcmc.pseudo_marginal`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
from jax import lax

from gpdsl.inference.approximations.ep import SMALLEST_SITE_PRECISION, ep_inputs, parallel_sweeps, shifted_moments
from gpdsl.inference.approximations.gaussian import GaussianApproximation, iteration_setup
from gpdsl.inference.approximations.laplace import check_laplace_likelihood, halve_along
from gpdsl.numerics.linalg import cho_solve, cholesky, solve_triangular


def laplace_weights(A, y, likelihood: str = "bernoulli_logit", tol=None, max_iter: int = 100, args=(),
                    offset=None, start=None) -> GaussianApproximation:
    """Laplace approximation ``q(z | y) = N(z_hat, (I + A^T W A)^-1)`` and its ``log p(y | theta)``.

    Iterates from ``z = 0`` (or ``start``) until the squared norm of the change in ``f = A z`` is below ``tol`` or
    ``max_iter`` iterations, halving a step that does not increase the objective, as
    :func:`~gpdsl.inference.approximations.laplace.laplace` does; its log marginal is
    ``log p(y | f_hat) - |z_hat|^2 / 2 - sum(log diag L)`` with ``L`` the factor of the last iteration.

    Parameters
    ----------
    A : array_like, shape (N, M), or a linear map
        The map from the weights to the likelihood's latent argument: a matrix, or a map with its products
        (:func:`linear_map`; :meth:`~gpdsl.inference.families.latent_gp.LatentGP.likelihood_operator`).
    y : array_like, shape (N,)
        Observations.
    likelihood : str
        A likelihood with ``derivatives`` (see :func:`~gpdsl.inference.approximations.laplace.laplace`).
    tol : float, optional
        Convergence threshold on ``||f_new - f_old||^2``; ``N / 1e4`` by default.
    max_iter : int
        Iteration limit (``converged`` False when reached).
    args : tuple of array_like
        The likelihood's other parameters, in positional order.
    offset : array_like, shape (N,), optional
        The likelihood acts on ``A z + offset``.
    start : array_like, shape (M,), optional
        Where Newton's method starts (a mode at nearby hyperparameters saves steps); zero by default.

    Returns
    -------
    GaussianApproximation
        Of ``z`` (see the module docstring); ``cubic_ops`` counts the ``M x M`` factorisations.

    Raises
    ------
    MethodError
        For a likelihood without ``derivatives``.
    """
    check_laplace_likelihood(likelihood)
    A = linear_map(A)
    args = tuple(jnp.asarray(a, dtype=jnp.float64) for a in args)
    offset = jnp.zeros(A.shape[0]) if offset is None else jnp.broadcast_to(jnp.asarray(offset, dtype=jnp.float64),
                                                                          A.shape[:1])
    start = jnp.zeros(A.shape[1]) if start is None else jnp.asarray(start, dtype=jnp.float64)
    return _laplace_weights(A, jnp.asarray(y), likelihood, tol, max_iter, args, offset, start)


@partial(jax.jit, static_argnames=("likelihood", "max_iter"))
def _laplace_weights(A, y, likelihood, tol, max_iter, args, offset, start):
    _, tol, y, derivatives_with_args = iteration_setup(_transposed_shape(A), y, tol, likelihood, "laplace")
    N, M = A.shape
    identity = jnp.eye(M, dtype=offset.dtype)

    def derivatives(f):
        return derivatives_with_args(y, f, *args)

    def objective(z, f):
        return -0.5 * z @ z + derivatives(f)[0]

    def newton_step(state):
        z, f, _, _, _, iteration = state
        _, grad, W = derivatives(f)
        L = cholesky(identity + A.weighted(W))
        direction = cho_solve((L, True), A.rmatvec(W * (f - offset) + grad)) - z
        moved = A.matvec(direction)
        z_new, f_new = halve_along(objective, z, f, lambda step: (z + step * direction, f + step * moved))
        return z_new, f_new, W, L, jnp.sum((f_new - f) ** 2), iteration + 1

    def not_done(state):
        return (state[4] >= tol) & (state[5] < max_iter)

    initial = (start, A.matvec(start) + offset, jnp.zeros_like(offset), identity, jnp.asarray(jnp.inf, offset.dtype),
               jnp.asarray(0))
    z, f, W, L, change, iterations = lax.while_loop(not_done, newton_step, initial)
    return GaussianApproximation(
        mean=z, alpha=z, site_precision=W, site_location=W * (f - offset) + derivatives(f)[1], chol_b=L,
        log_marginal=objective(z, f) - jnp.sum(jnp.log(jnp.diag(L))),
        converged=change < tol, iterations=iterations, cubic_ops=iterations, log_marginal_ops=jnp.asarray(0))


def ep_weights(A, y, likelihood: str = "bernoulli_logit", tol=None, max_sweeps: int = 100, damping: float = 0.7,
               initial_sites=None, offset=None, args=()) -> GaussianApproximation:
    """Parallel expectation propagation over the weights: one Gaussian site per observation on ``f_i = a_i^T z +
    offset_i``, ``q(z) = N(P^-1 A^T nu, P^-1)`` with ``P = I_M + A^T diag(tau) A``.

    The sweeps of :func:`~gpdsl.inference.approximations.ep.ep` with ``schedule="parallel"``
    (:func:`~gpdsl.inference.approximations.ep.parallel_sweeps`), the marginals of the ``f_i`` computed from the
    ``M x M`` factor of ``P`` in ``O(N M^2)``; ``log Z_EP`` is that of the dense EP with ``K = A A^T``. Parameters are
    those of :func:`~gpdsl.inference.approximations.ep.ep` with ``A`` (``N x M``, a matrix or a map as in
    :func:`laplace_weights`) in place of ``K``; the schedule is always parallel.

    Returns
    -------
    GaussianApproximation
        Of ``z`` (see the module docstring): ``mean`` and ``alpha`` the posterior mean of the weights.

    Raises
    ------
    MethodError
        For fewer than one sweep, or a likelihood without ``tilted_moments``.
    """
    A = linear_map(A)
    initial_sites, offset, args = ep_inputs(A.shape[0], likelihood, max_sweeps, initial_sites, offset, args)
    return _ep_weights(A, jnp.asarray(y), tol, max_sweeps, damping, likelihood, initial_sites, offset, args)


@partial(jax.jit, static_argnames=("max_sweeps", "likelihood"))
def _ep_weights(A, y, tol, max_sweeps, damping, likelihood, initial_sites, offset, args):
    _, tol, y, tilted_moments = iteration_setup(_transposed_shape(A), y, tol, likelihood, "ep")
    prior_variances = A.diagonal(jnp.eye(A.shape[1], dtype=offset.dtype))
    fit = parallel_sweeps(partial(_factor, A), partial(_marginal_variances, A), prior_variances, y, tol, max_sweeps,
                          damping, shifted_moments(tilted_moments, args), initial_sites, offset)
    return fit._replace(mean=fit.alpha)


def weights_from_sites(A, site_precision, site_location) -> GaussianApproximation:
    """The Gaussian of the weights that fixed sites on ``f`` give: ``N(P^-1 A^T nu, P^-1)``, no sweep (the weights'
    :func:`~gpdsl.inference.approximations.ep.gaussian_from_sites`; ``log_marginal`` NaN, ``cubic_ops`` 1; ``A`` a
    matrix or a map as in :func:`laplace_weights`)."""
    A = linear_map(A)
    tau = jnp.maximum(jnp.asarray(site_precision, dtype=jnp.float64), SMALLEST_SITE_PRECISION)
    nu = jnp.asarray(site_location, dtype=jnp.float64)
    L, z, _ = _factor(A, tau, nu)
    return GaussianApproximation(
        mean=z, alpha=z, site_precision=tau, site_location=nu, chol_b=L,
        log_marginal=jnp.asarray(jnp.nan, tau.dtype), converged=jnp.asarray(True), iterations=jnp.asarray(0),
        cubic_ops=jnp.asarray(1), log_marginal_ops=jnp.asarray(0))


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class DenseMap:
    """A matrix ``A`` (``N x M``) as the linear map the approximations here take; ``A^T diag(w) A`` and
    ``diag(A V A^T)`` cost ``O(N M^2)``. An HSGP's Laplacian basis has a faster one
    (:class:`~gpdsl.backends.jax.hsgp_map.LaplacianBasisMap`)."""

    matrix: jax.Array

    @property
    def shape(self) -> tuple[int, int]:
        """``(N, M)``."""
        return self.matrix.shape

    def matvec(self, z) -> jax.Array:
        """``A z``."""
        return self.matrix @ z

    def rmatvec(self, v) -> jax.Array:
        """``A^T v`` (as ``v A``: XLA on CPU is several times slower at ``A^T v`` for a tall ``A``)."""
        return v @ self.matrix

    def weighted(self, w) -> jax.Array:
        """``A^T diag(w) A``."""
        return self.matrix.T @ (w[:, None] * self.matrix)

    def diagonal(self, V) -> jax.Array:
        """``diag(A V A^T)``."""
        return jnp.sum((self.matrix @ V) * self.matrix, axis=1)


def linear_map(A):
    """``A`` as a linear map: a matrix wrapped in :class:`DenseMap`, a map as it is."""
    return A if hasattr(A, "weighted") else DenseMap(jnp.asarray(A, dtype=jnp.float64))


def _transposed_shape(A) -> jax.ShapeDtypeStruct:
    """What :func:`~gpdsl.inference.approximations.gaussian.iteration_setup` reads of a covariance: ``M x N``."""
    return jax.ShapeDtypeStruct(A.shape[::-1], jnp.float64)


def _factor(A, tau, nu):
    """``L`` with ``L L^T = I_M + A^T diag(tau) A``, the weights' mean ``z = P^-1 A^T nu`` and the sites' means
    ``A z``."""
    L = cholesky(jnp.eye(A.shape[1], dtype=tau.dtype) + A.weighted(tau))
    z = cho_solve((L, True), A.rmatvec(nu))
    return L, z, A.matvec(z)


def _marginal_variances(A, tau, L):
    """The sites' posterior variances, ``diag(A P^-1 A^T)``."""
    return A.diagonal(cho_solve((L, True), jnp.eye(L.shape[0], dtype=L.dtype)))


def sample(approx: GaussianApproximation, key, num: int) -> jax.Array:
    """``num`` draws of ``z ~ N(mean, (L L^T)^-1)``, shape ``(num, M)``: ``mean + L^-T e`` with ``e ~ N(0, I)``
    (``O(M^2)`` each)."""
    L = approx.chol_b
    noise = jax.random.normal(key, (L.shape[0], num), dtype=L.dtype)
    return (approx.mean[:, None] + solve_triangular(L, noise, trans=1, lower=True)).T


def log_prior_minus_log_q(approx: GaussianApproximation, draws) -> jax.Array:
    """``log N(z | 0, I) - log q(z)`` for draws ``z`` (..., M): ``-|z|^2 / 2 + |L^T (z - mean)|^2 / 2 - log|L|``."""
    whitened = (draws - approx.mean) @ approx.chol_b
    return (-0.5 * jnp.sum(draws ** 2, axis=-1) + 0.5 * jnp.sum(whitened ** 2, axis=-1)
            - jnp.sum(jnp.log(jnp.diag(approx.chol_b))))
