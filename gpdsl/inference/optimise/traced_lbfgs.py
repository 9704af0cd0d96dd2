"""L-BFGS inside JAX: one traceable, ``vmap``-able minimisation with a fixed iteration budget.

:mod:`gpdsl.inference.optimise.lbfgs` drives a fit from Python, one evaluation at a time. Here the whole
minimisation is a ``lax.while_loop``, so a batch of problems (the E-step at many hyperparameter values)
runs as one compiled call. The direction is the two-loop recursion over the last ``memory`` pairs
(Nocedal & Wright 2006, Alg. 7.4) with the initial Hessian ``(s^T y / y^T y) I``; the step is found by
backtracking from 1 (from ``1 / |g|`` on the first iteration) until the Armijo condition holds, a
non-finite value counting as a failure, so a step into a region where a factorisation breaks is
shortened instead of ending the run. Pairs with ``s^T y <= 0`` are not stored.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

SUFFICIENT_DECREASE = 1e-4
BACKTRACKING = 0.5
MAX_BACKTRACKS = 40


class TracedLBFGSResult(NamedTuple):
    """Where :func:`minimize` stopped.

    Attributes
    ----------
    x : jax.Array
        The last accepted point.
    value : jax.Array
        The objective there.
    iterations : jax.Array
        Accepted steps.
    converged : jax.Array
        True when the largest gradient component fell below ``gtol`` or the relative reduction below
        ``ftol``; False when the iteration budget ran out or no step decreased the objective.
    """

    x: jax.Array
    value: jax.Array
    iterations: jax.Array
    converged: jax.Array


class _State(NamedTuple):
    x: jax.Array
    value: jax.Array
    gradient: jax.Array
    s: jax.Array
    y: jax.Array
    stored: jax.Array
    iteration: jax.Array
    converged: jax.Array
    failed: jax.Array


def minimize(fun: Callable[[jax.Array], jax.Array], x0, *, max_iterations: int = 1000, memory: int = 10,
             gtol: float = 1e-5, ftol: float = 1e-12) -> TracedLBFGSResult:
    """Minimise a smooth scalar function of one vector (traceable; ``vmap`` it over a batch of problems).

    Parameters
    ----------
    fun : callable
        ``x -> scalar``, differentiable by JAX.
    x0 : array_like, shape (n,)
        Start.
    max_iterations : int
        Accepted steps at most.
    memory : int
        Stored correction pairs.
    gtol : float
        Stop when the largest gradient component is below this.
    ftol : float
        Stop when the relative reduction of a step is below this.

    Returns
    -------
    TracedLBFGSResult
    """
    value_and_grad = jax.value_and_grad(fun)
    x0 = jnp.asarray(x0, dtype=float)
    value0, gradient0 = value_and_grad(x0)
    n = x0.shape[0]
    state = _State(x0, value0, gradient0, jnp.zeros((memory, n)), jnp.zeros((memory, n)), jnp.asarray(0),
                   jnp.asarray(0), jnp.max(jnp.abs(gradient0)) < gtol, ~jnp.isfinite(value0))

    def running(state):
        return (state.iteration < max_iterations) & ~state.converged & ~state.failed

    def step(state):
        direction = _direction(state.gradient, state.s, state.y, state.stored, memory)
        slope = jnp.dot(state.gradient, direction)
        descent = slope < 0
        direction = jnp.where(descent, direction, -state.gradient)
        slope = jnp.where(descent, slope, -jnp.dot(state.gradient, state.gradient))
        first = jnp.where(state.stored == 0, 1.0 / jnp.maximum(jnp.linalg.norm(state.gradient), 1e-300), 1.0)

        def shorten(search):
            t, _, _, _, tries = search
            return t * BACKTRACKING, *value_and_grad(state.x + t * BACKTRACKING * direction), jnp.asarray(True), tries + 1

        def not_accepted(search):
            t, value, _, _, tries = search
            ok = jnp.isfinite(value) & (value <= state.value + SUFFICIENT_DECREASE * t * slope)
            return ~ok & (tries < MAX_BACKTRACKS)

        t, value, gradient, _, _ = jax.lax.while_loop(
            not_accepted, shorten, (first, *value_and_grad(state.x + first * direction), jnp.asarray(False),
                                    jnp.asarray(0)))
        accepted = jnp.isfinite(value) & (value <= state.value + SUFFICIENT_DECREASE * t * slope)
        s_new, y_new = t * direction, gradient - state.gradient
        curvature = jnp.dot(s_new, y_new) > 1e-10 * jnp.dot(y_new, y_new)
        store = accepted & curvature
        slot = state.stored % memory
        s = jnp.where(store, state.s.at[slot].set(s_new), state.s)
        y = jnp.where(store, state.y.at[slot].set(y_new), state.y)
        x = jnp.where(accepted, state.x + s_new, state.x)
        reduction = (state.value - value) / jnp.maximum(jnp.maximum(jnp.abs(state.value), jnp.abs(value)), 1.0)
        value = jnp.where(accepted, value, state.value)
        gradient = jnp.where(accepted, gradient, state.gradient)
        converged = accepted & ((jnp.max(jnp.abs(gradient)) < gtol) | (reduction < ftol))
        return _State(x, value, gradient, s, y, state.stored + store, state.iteration + accepted, converged,
                      ~accepted)

    final = jax.lax.while_loop(running, step, state)
    return TracedLBFGSResult(final.x, final.value, final.iteration, final.converged)


def _direction(gradient, s, y, stored, memory):
    """``-H g`` by the two-loop recursion over the stored pairs (newest first); ``-g`` when none is stored."""
    count = jnp.minimum(stored, memory)
    newest = (stored - 1) % memory
    order = (newest - jnp.arange(memory)) % memory
    valid = jnp.arange(memory) < count
    rho = jnp.where(valid, 1.0 / jnp.where(valid, jnp.einsum("ij,ij->i", s[order], y[order]), 1.0), 0.0)

    def backward(q, k):
        alpha = rho[k] * jnp.dot(s[order[k]], q)
        return q - alpha * y[order[k]], alpha

    q, alphas = jax.lax.scan(backward, gradient, jnp.arange(memory))
    last_s, last_y = s[newest], y[newest]
    gamma = jnp.where(count > 0, jnp.dot(last_s, last_y) / jnp.where(count > 0, jnp.dot(last_y, last_y), 1.0), 1.0)
    r = gamma * q

    def forward(r, k):
        beta = rho[k] * jnp.dot(y[order[k]], r)
        return r + s[order[k]] * (alphas[k] - beta), None

    r, _ = jax.lax.scan(forward, r, jnp.arange(memory)[::-1])
    return -r
