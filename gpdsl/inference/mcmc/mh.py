"""The Metropolis-Hastings core shared by the hyperparameter updates and the pseudo-marginal engine.

A chain's :class:`MHState` keeps its position and the target's log density there, so a rejected
proposal costs nothing at the current point: for pseudo-marginal MH the kept value is the current
likelihood estimate, which is reused until a proposal is accepted (never re-estimated; that is what
makes the chain exact, Andrieu & Roberts 2009).

A step is: propose (any move; :func:`random_walk` is the Gaussian random walk on the unconstrained
scale), evaluate the target at the proposal into an :class:`MHState`, then :func:`accept_reject`
against a log-uniform draw. The caller draws the randomness, so each update keeps its own key
layout. Proposals must be symmetric (or their correction folded into the log densities).
"""

from __future__ import annotations

import functools
import operator
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp


class MHState(NamedTuple):
    """A point of a Metropolis-Hastings chain and the log target there.

    Attributes
    ----------
    position : pytree
        The chain's position (any pytree: the proposal and the current point are picked leaf by leaf).
    log_density : jax.Array or tuple of jax.Array
        The log target at ``position``, or a tuple of terms whose sum is the log target (for example
        the pseudo-marginal estimate and the log prior, kept apart so both can be reported).
    """

    position: Any
    log_density: Any


class MHInfo(NamedTuple):
    """What one accept/reject step did.

    Attributes
    ----------
    accepted : jax.Array (bool)
        Whether the proposal was accepted.
    acceptance_rate : jax.Array
        The acceptance probability ``min(1, exp(log_ratio))`` (0 where the ratio is NaN).
    """

    accepted: jax.Array
    acceptance_rate: jax.Array


def log_ratio(current: MHState, proposal: MHState) -> jax.Array:
    """The log acceptance ratio of a symmetric proposal, with NaN mapped to minus infinity.

    With several terms, the proposal's terms are summed and the current terms subtracted one by one.

    Parameters
    ----------
    current, proposal : MHState
        The current point and the proposed one.

    Returns
    -------
    jax.Array
        ``log pi(proposal) - log pi(current)``.
    """
    ratio = functools.reduce(operator.add, jax.tree.leaves(proposal.log_density))
    for term in jax.tree.leaves(current.log_density):
        ratio = ratio - term
    return jnp.where(jnp.isnan(ratio), -jnp.inf, ratio)


def accept_reject(log_uniform, current: MHState, proposal: MHState, log_screen_ratio=0.0) -> tuple[MHState, MHInfo]:
    """Accept ``proposal`` when ``log_uniform`` is below the log acceptance ratio.

    Parameters
    ----------
    log_uniform : jax.Array
        The log of a uniform(0, 1) draw.
    current, proposal : MHState
        The current point and the proposed one, each with its log target.
    log_screen_ratio : jax.Array, optional
        The log ratio of a first, screening stage that the proposal passed (delayed acceptance): the second
        stage's ratio is the target's divided by it. 0 for a plain Metropolis step.

    Returns
    -------
    state : MHState
        ``proposal`` if accepted, else ``current`` (with its log target unchanged).
    info : MHInfo
    """
    ratio = log_ratio(current, proposal) - log_screen_ratio
    ratio = jnp.where(jnp.isnan(ratio), -jnp.inf, ratio)
    accepted = log_uniform < ratio
    state = jax.tree.map(lambda new, old: jnp.where(accepted, new, old), proposal, current)
    return state, MHInfo(accepted=accepted, acceptance_rate=jnp.minimum(1.0, jnp.exp(ratio)))


def random_walk(position, normals, scale, factor=None):
    """The Gaussian random-walk proposal on the unconstrained scale.

    Parameters
    ----------
    position : jax.Array, shape (d,)
        Current unconstrained position.
    normals : jax.Array, shape (d,)
        Standard normal draws.
    scale : float or jax.Array, shape () or (d,)
        Step size, per coordinate when a vector.
    factor : jax.Array, shape (d, d), optional
        Shape of the walk: a Cholesky factor ``C`` of the proposal covariance ``scale**2 C C^T``.

    Returns
    -------
    jax.Array, shape (d,)
        ``position + scale * normals``, or ``position + (scale * C) @ normals`` with a factor.
    """
    if factor is None:
        return position + scale * normals
    return position + scale * factor @ normals
