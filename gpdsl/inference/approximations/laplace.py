"""The Laplace approximation of a latent GP posterior (Rasmussen & Williams 2006, Alg. 3.1).

Newton's method for the mode of ``log p(y | f) - f^T K^-1 f / 2`` in the stable form with
``B = I + W^1/2 K W^1/2``: one Cholesky factorisation of ``B`` per iteration and no other
``O(n^3)`` operation (Sec. 2.1.1 of Filippone & Girolami 2014). A step that does not increase the
objective is halved (at most ``_MAX_HALVINGS`` times, ``O(n^2)`` each); for the log-concave
likelihoods (the only ones with ``derivatives``) the full Newton step is almost always taken.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
from jax import lax

from gpdsl.inference.approximations.gaussian import (
    GaussianApproximation,
    check_likelihood,
    for_latent_gp,
    iteration_setup,
)
from gpdsl.numerics.linalg import cho_solve, cholesky

_MAX_HALVINGS = 10


def check_laplace_likelihood(likelihood: str, what: str = "likelihood") -> None:
    """Raise :class:`MethodError` unless ``likelihood`` has the ``derivatives`` the Laplace approximation uses."""
    check_likelihood("laplace", likelihood, what)


def laplace(K, y, likelihood: str = "bernoulli_probit", tol=None, max_iter: int = 100,
            args=(), offset=None) -> GaussianApproximation:
    """Laplace approximation ``q(f | y) = N(f_hat, (K^-1 + W)^-1)`` and its ``log p(y | theta)``.

    Iterates from ``f = 0`` until the squared norm of the change in ``f`` is below ``tol``
    (the paper's criterion, Sec. 4) or ``max_iter`` iterations. The log marginal is that of
    Alg. 3.1: ``-a^T f_hat / 2 + log p(y | f_hat) - sum(log diag L)``, with ``W`` and ``L`` those of
    the last Newton iteration (as in Alg. 3.1, not refactorised at ``f_hat``). Works under ``jit``
    and ``vmap``.

    Parameters
    ----------
    K : array_like, shape (n, n)
        Prior covariance of ``f`` (jitter included if wanted; ``K`` itself is never factorised).
    y : array_like, shape (n,)
        Observations (labels in {0, 1} for the Bernoulli likelihoods, counts, ...).
    likelihood : str
        A likelihood of :mod:`gpdsl.likelihoods` with ``derivatives`` (the log-concave ones:
        ``"bernoulli_probit"``, ``"bernoulli_logit"``, ``"poisson_log"``, ``"neg_binomial_2_log"``,
        ``"binomial_logit"``, ``"ordered_logistic"``, ``"gamma_log"``, ``"hurdle_poisson_log"``). Static under
        ``jit``.
    tol : float, optional
        Convergence threshold on ``||f_new - f_old||^2``; ``n / 1e4`` by default.
    max_iter : int
        Iteration limit; reaching it sets ``converged=False`` instead of raising. Static under ``jit``.
    args : tuple of array_like
        Values of the likelihood's other parameters (``phi``, ``trials``, cutpoints ``c``, ...) in
        positional order (:attr:`~gpdsl.likelihoods.base.Likelihood.other_params`).
    offset : array_like, shape (n,), optional
        The likelihood acts on ``f + offset`` (``poisson_log(log_exposure + mu + f)``); ``f`` keeps its
        zero-mean prior and the approximation is of ``f``.

    Returns
    -------
    GaussianApproximation
        ``cubic_ops`` equals ``iterations`` (one Cholesky factorisation each).

    Raises
    ------
    MethodError
        For a likelihood without ``derivatives``.
    """
    check_laplace_likelihood(likelihood)
    args = tuple(jnp.asarray(a, dtype=jnp.float64) for a in args)
    K = jnp.asarray(K, dtype=jnp.float64)
    offset = jnp.zeros(K.shape[0]) if offset is None else jnp.broadcast_to(jnp.asarray(offset, dtype=K.dtype),
                                                                          K.shape[:1])
    return _laplace(K, jnp.asarray(y), likelihood, tol, max_iter, args, offset)


laplace_for = for_latent_gp(laplace, "laplace", "``tol`` and ``max_iter``")


@partial(jax.jit, static_argnames=("likelihood", "max_iter"))
def _laplace(K, y, likelihood, tol, max_iter, args, offset):
    n, tol, y, derivatives_with_args = iteration_setup(K, y, tol, likelihood, "laplace")

    def derivatives(y, f):
        return derivatives_with_args(y, f + offset, *args)

    def objective(a, f):
        return -0.5 * a @ f + derivatives(y, f)[0]

    def newton_step(state):
        f, a, _, _, _, iteration = state
        _, grad, W = derivatives(y, f)
        root_w = jnp.sqrt(W)
        L = cholesky(jnp.eye(n, dtype=K.dtype) + root_w[:, None] * K * root_w[None, :])
        b = W * f + grad
        direction = b - root_w * cho_solve((L, True), root_w * (K @ b)) - a
        a_new, f_new = halve_until_better(objective, K, a, f, direction)
        return f_new, a_new, W, L, jnp.sum((f_new - f) ** 2), iteration + 1

    def not_done(state):
        return (state[4] >= tol) & (state[5] < max_iter)

    zeros = jnp.zeros(n, dtype=K.dtype)
    start = (zeros, zeros, zeros, jnp.eye(n, dtype=K.dtype), jnp.asarray(jnp.inf, K.dtype), jnp.asarray(0))
    f, a, W, L, change, iterations = lax.while_loop(not_done, newton_step, start)
    return GaussianApproximation(
        mean=f, alpha=a, site_precision=W, site_location=W * f + a, chol_b=L,
        log_marginal=objective(a, f) - jnp.sum(jnp.log(jnp.diag(L))),
        converged=change < tol, iterations=iterations, cubic_ops=iterations, log_marginal_ops=jnp.asarray(0))


def halve_until_better(objective, K, a, f, direction):
    """The Newton step ``a + step direction`` (``f = K a``), its step halved until ``objective`` does not fall (at
    most :data:`_MAX_HALVINGS` times)."""
    def point(step):
        a_trial = a + step * direction
        return a_trial, K @ a_trial

    return halve_along(objective, a, f, point)


def halve_along(objective, a, f, point):
    """``point(step) -> (a, f)`` at the largest of ``1, 1/2, 1/4, ...`` (at most :data:`_MAX_HALVINGS` halvings) where
    ``objective(a, f)`` does not fall below its value at the current ``(a, f)``."""
    current = objective(a, f)

    def trial(step):
        a_trial, f_trial = point(step)
        return a_trial, f_trial, objective(a_trial, f_trial)

    def worse(state):
        step, halvings, (_, _, value) = state
        return ~(value >= current) & (halvings < _MAX_HALVINGS)

    def halve(state):
        step, halvings, _ = state
        return step / 2.0, halvings + 1, trial(step / 2.0)

    _, _, (a_new, f_new, _) = lax.while_loop(worse, halve, (1.0, 0, trial(1.0)))
    return a_new, f_new
