"""Adaptive Metropolis-within-Gibbs over blocks of hyperparameters (Gadd, Wade & Shah 2021, Alg. 1).

Each iteration updates the blocks ``xi_1, ..., xi_R`` of the unconstrained hyperparameters in turn (log
scale for positive ones, so the target carries the Jacobian): a Gaussian random walk on block ``r`` with
covariance ``Sigma_r``, the target evaluated at the proposal, accept or reject on the MH core
(:mod:`gpdsl.inference.mcmc.mh`). The target is given as terms, e.g. a pseudo-marginal estimate and the
log prior: the state keeps them, so a rejected proposal is never re-estimated (the chain stays exact).

``Sigma_r`` is adaptive Metropolis (Haario, Saksman & Tamminen 2001; :mod:`gpdsl.inference.mcmc.adaptation`):
``Sigma_r^(0)`` until ``g0`` states are in, then ``s_d (C_r + epsilon I)`` with ``s_d = 2.38^2 / d_r`` and
``C_r`` the covariance of all the block's states so far (warmup included). As in the paper it keeps
adapting after warmup unless asked not to; Haario et al.'s chain stays ergodic.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.errors import MethodError
from gpdsl.inference.mcmc.adaptation import (
    haario_covariance,
    moments_init,
    moments_update,
)
from gpdsl.inference.mcmc.mh import MHState, accept_reject, random_walk
from gpdsl.linalg import cholesky


class BlockedState(NamedTuple):
    """State of one chain.

    Attributes
    ----------
    mh : MHState
        The unconstrained hyperparameters and the target's terms there.
    extras : pytree
        What the target reported with its terms at the current point (e.g. the E-step's bound).
    moments : tuple of RunningMoments
        Running moments of each block's states.
    covariances : tuple of jax.Array
        The current proposal covariance of each block, ``(d_r, d_r)``.
    """

    mh: MHState
    extras: Any
    moments: tuple
    covariances: tuple

    @property
    def position(self) -> jax.Array:
        return self.mh.position


class BlockedInfo(NamedTuple):
    """One iteration, one entry per block.

    Attributes
    ----------
    accepted : jax.Array, shape (R,)
    acceptance_rate : jax.Array, shape (R,)
        ``min(1, exp(log ratio))`` of each block's proposal.
    proposed : pytree
        What the target reported at each block's proposal (leaves with a leading axis ``R``).
    """

    accepted: jax.Array
    acceptance_rate: jax.Array
    proposed: Any


def check_blocks(blocks, dimension: int) -> list[np.ndarray]:
    """The blocks as index arrays, checked to partition ``0 .. dimension - 1``.

    Raises
    ------
    MethodError
        An empty block, an index out of range, or an index in no block or in two.
    """
    blocks = [np.asarray(block, dtype=int).ravel() for block in blocks]
    flat = np.concatenate(blocks) if blocks else np.zeros(0, int)
    if any(block.size == 0 for block in blocks) or flat.size == 0:
        raise MethodError("every block needs at least one hyperparameter")
    if flat.min() < 0 or flat.max() >= dimension or np.unique(flat).size != flat.size or flat.size != dimension:
        raise MethodError(f"the blocks must split the {dimension} hyperparameter coordinates, each in exactly one "
                          f"block; got {[block.tolist() for block in blocks]}")
    return blocks


def make_blocked_metropolis(log_terms: Callable, blocks, *, initial_covariance: float = 0.01, g0: int = 200,
                            epsilon: float = 1e-6, adapt_after_warmup: bool = True, report: Callable | None = None):
    """``(init, step)`` of adaptive Metropolis-within-Gibbs.

    Parameters
    ----------
    log_terms : callable
        ``log_terms(rng_key, theta, current) -> (terms, extras)``: a tuple of log-density terms whose sum is
        the log target at the unconstrained ``theta`` (``-inf`` or NaN refuses the point), and a pytree of
        what to keep with them. Randomness (an importance-sampling estimate) comes from ``rng_key``.
        ``current`` is the extras of the chain's current point (None at the start); a target that uses it
        no longer leaves the chain exact.
    blocks : sequence of sequence of int
        Coordinates of ``theta`` updated together; together they cover every coordinate once.
    initial_covariance : float
        ``Sigma_r^(0) = initial_covariance * I``.
    g0 : int
        States collected before the proposal follows them.
    epsilon : float
        Diagonal added to the states' covariance.
    adapt_after_warmup : bool
        Keep adapting after warmup (Alg. 1); otherwise the proposals are frozen when warmup ends.
    report : callable, optional
        ``report(extras)``: what of a proposal's extras goes into :attr:`BlockedInfo.proposed` (all of it by
        default).

    Returns
    -------
    init : callable
        ``init(rng_key, theta) -> BlockedState``.
    step : callable
        ``step(rng_key, state, adapting) -> (BlockedState, BlockedInfo)``.
    """
    blocks = [np.asarray(block, dtype=int) for block in blocks]
    report = report or (lambda extras: extras)

    def init(rng_key, theta) -> BlockedState:
        theta = jnp.asarray(theta, dtype=float)
        terms, extras = log_terms(rng_key, theta, None)
        covariances = tuple(initial_covariance * jnp.eye(block.size) for block in blocks)
        return BlockedState(MHState(theta, terms), extras, tuple(moments_init(block.size) for block in blocks),
                            covariances)

    def step(rng_key, state: BlockedState, adapting=False):
        mh, extras = state.mh, state.extras
        accepted, rates, proposed = [], [], []
        for r, block in enumerate(blocks):
            key_walk, key_target, key_accept = jax.random.split(jax.random.fold_in(rng_key, r), 3)
            walk = random_walk(mh.position[block], jax.random.normal(key_walk, (block.size,)), 1.0,
                               cholesky(state.covariances[r]))
            position = mh.position.at[block].set(walk)
            terms, new_extras = log_terms(key_target, position, extras)
            mh_new, info = accept_reject(jnp.log(jax.random.uniform(key_accept)), mh, MHState(position, terms))
            extras = jax.tree.map(lambda new, old: jnp.where(info.accepted, new, old), new_extras, extras)
            mh = mh_new
            accepted.append(info.accepted)
            rates.append(info.acceptance_rate)
            proposed.append(report(new_extras))
        collect = jnp.logical_or(adapting, adapt_after_warmup)
        moments = tuple(moments_update(m, mh.position[block], collect) for m, block in zip(state.moments, blocks))
        covariances = tuple(
            jnp.where(collect, haario_covariance(m, initial_covariance * jnp.eye(block.size), g0, epsilon), old)
            for m, block, old in zip(moments, blocks, state.covariances))
        info = BlockedInfo(jnp.stack(accepted), jnp.stack(rates), jax.tree.map(lambda *leaves: jnp.stack(leaves),
                                                                               *proposed))
        return BlockedState(mh, extras, moments, covariances), info

    return init, step
