"""Adaptive Metropolis-within-Gibbs over blocks of hyperparameters (Gadd, Wade & Shah 2021, Alg. 1).

Each iteration updates the blocks ``xi_1, ..., xi_R`` of the unconstrained hyperparameters in turn (log
scale for positive ones, so the target carries the Jacobian): a Gaussian random walk on block ``r`` with
covariance ``Sigma_r``, the target evaluated at the proposal, accept or reject on the MH core
(:mod:`gpdsl.inference.mcmc.mh`). The target is given as terms, e.g. a pseudo-marginal estimate and the
log prior: the state keeps them, so a rejected proposal is never re-estimated (the chain stays exact).

With a ``screen`` (delayed acceptance; Christen & Fox 2005, for pseudo-marginal chains Golightly, Henderson &
Sherlock 2015) a proposal first meets a cheap deterministic surrogate of the target: it goes on only with
probability ``min(1, pi_s(proposal) / pi_s(current))``, and only then is the target evaluated and the proposal
accepted with probability ``min(1, [pi(proposal) / pi(current)] / [pi_s(proposal) / pi_s(current)])``. The
chain keeps ``pi`` invariant (each stage is a Metropolis-Hastings step whose ratio corrects the one before); a
pseudo-marginal target is estimated only for the proposals that pass, and a correlated estimate's auxiliary
variates may be proposed at the second stage, since the first does not read them.

``Sigma_r`` is adaptive Metropolis (Haario, Saksman & Tamminen 2001; :mod:`gpdsl.inference.mcmc.adaptation`):
``Sigma_r^(0)`` until ``g0`` states are in, then ``s_d (C_r + epsilon I)`` with ``s_d = 2.38^2 / d_r`` and
``C_r`` the covariance of all the block's states so far (warmup included). As in the paper it keeps
adapting after warmup unless asked not to; Haario et al.'s chain stays ergodic. With a ``target_acceptance`` each
block's proposal is ``s_r^2 Sigma_r``, its global scale ``log s_r`` adapted by Robbins-Monro towards that
acceptance rate once ``Sigma_r`` follows the states (after ``g0`` of them) and while it adapts (Andrieu & Thoms 2008,
Alg. 4): a covariance estimated from too few states then no longer sets the step.
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
    scale_init,
    scale_update,
)
from gpdsl.inference.mcmc.mh import MHState, accept_reject, log_ratio, random_walk
from gpdsl.numerics.linalg import cholesky


class Screen(NamedTuple):
    """The first stage of delayed acceptance.

    Attributes
    ----------
    evaluate : callable
        ``evaluate(theta) -> (terms, screened)``: the surrogate's log-density terms at ``theta`` (deterministic in
        ``theta``) and what the target may reuse of its work (passed to ``log_terms`` as ``screened``).
    skipped : callable
        ``skipped(screened, current_extras) -> extras``: what to report for a proposal the first stage stopped,
        shaped like the target's extras.
    """

    evaluate: Callable
    skipped: Callable


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
    screen_terms : tuple of jax.Array
        The surrogate's terms at the current point (empty without a screen).
    scales : tuple of ScaleAdaptation
        Each block's global scale ``s_r`` and its adaptation (empty without a target acceptance).
    """

    mh: MHState
    extras: Any
    moments: tuple
    covariances: tuple
    screen_terms: tuple = ()
    scales: tuple = ()

    @property
    def position(self) -> jax.Array:
        return self.mh.position


class BlockedInfo(NamedTuple):
    """One iteration, one entry per block.

    Attributes
    ----------
    accepted : jax.Array, shape (R,)
    acceptance_rate : jax.Array, shape (R,)
        ``min(1, exp(log ratio))`` of each block's proposal; with a screen, the second stage's for a proposal that
        passed the first and 0 for one that did not (its mean is the chance of acceptance all the same).
    proposed : pytree
        What the target reported at each block's proposal (leaves with a leading axis ``R``).
    screened : jax.Array, shape (R,)
        Whether the proposal passed the first stage (always, without a screen).
    """

    accepted: jax.Array
    acceptance_rate: jax.Array
    proposed: Any
    screened: jax.Array


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


def make_blocked_metropolis(log_terms: Callable, blocks, *, initial_covariance=0.01, g0: int = 200,
                            epsilon: float = 1e-6, adapt_after_warmup: bool = True, report: Callable | None = None,
                            screen: Screen | None = None, target_acceptance: float | None = None):
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
    initial_covariance : float or array_like of shape (d, d)
        ``Sigma_r^(0) = initial_covariance * I``; a matrix, with one block of ``d`` coordinates, is ``Sigma_1^(0)``.
    g0 : int
        States collected before the proposal follows them.
    epsilon : float
        Diagonal added to the states' covariance.
    adapt_after_warmup : bool
        Keep adapting after warmup (Alg. 1); otherwise the proposals are frozen when warmup ends.
    report : callable, optional
        ``report(extras)``: what of a proposal's extras goes into :attr:`BlockedInfo.proposed` (all of it by
        default).
    screen : Screen, optional
        Delayed acceptance (module docstring): ``log_terms`` is then called as
        ``log_terms(rng_key, theta, current, screened)``, only for the proposals that pass the first stage.
    target_acceptance : float, optional
        Adapt each block's global scale towards this acceptance rate once its covariance follows the states and
        while it adapts (module docstring); without it the proposal is ``Sigma_r`` itself.

    Returns
    -------
    init : callable
        ``init(rng_key, theta) -> BlockedState``.
    step : callable
        ``step(rng_key, state, adapting) -> (BlockedState, BlockedInfo)``.
    """
    blocks = [np.asarray(block, dtype=int) for block in blocks]
    report = report or (lambda extras: extras)
    starts = tuple(_start_covariance(initial_covariance, block.size) for block in blocks)

    def init(rng_key, theta) -> BlockedState:
        theta = jnp.asarray(theta, dtype=float)
        covariances = starts
        moments = tuple(moments_init(block.size) for block in blocks)
        scales = () if target_acceptance is None else tuple(scale_init(1.0) for _ in blocks)
        if screen is None:
            terms, extras = log_terms(rng_key, theta, None)
            return BlockedState(MHState(theta, terms), extras, moments, covariances, (), scales)
        screen_terms, screened = screen.evaluate(theta)
        terms, extras = log_terms(rng_key, theta, None, screened)
        return BlockedState(MHState(theta, terms), extras, moments, covariances, tuple(screen_terms), scales)

    def propose(key, mh, extras, screen_terms, position):
        """The proposal's terms and extras, whether it passed the first stage, and its surrogate's terms."""
        key_target, key_screen = jax.random.split(key)
        if screen is None:
            terms, new_extras = log_terms(key_target, position, extras)
            return MHState(position, terms), new_extras, jnp.asarray(True), (), jnp.zeros(())
        new_screen, screened = screen.evaluate(position)
        first = log_ratio(MHState(mh.position, screen_terms), MHState(position, tuple(new_screen)))
        passed = jnp.log(jax.random.uniform(key_screen)) < first

        def evaluate(_):
            return log_terms(key_target, position, extras, screened)

        def stop(_):
            return (jax.tree.map(lambda term: jnp.full_like(term, -jnp.inf), mh.log_density),
                    screen.skipped(screened, extras))

        terms, new_extras = jax.lax.cond(passed, evaluate, stop, None)
        return MHState(position, terms), new_extras, passed, tuple(new_screen), first

    def step(rng_key, state: BlockedState, adapting=False):
        mh, extras, screen_terms = state.mh, state.extras, state.screen_terms
        accepted, rates, proposed, screened = [], [], [], []
        for r, block in enumerate(blocks):
            key_walk, key_target, key_accept = jax.random.split(jax.random.fold_in(rng_key, r), 3)
            scale = 1.0 if target_acceptance is None else jnp.exp(state.scales[r].log_scale)
            walk = random_walk(mh.position[block], jax.random.normal(key_walk, (block.size,)), scale,
                               cholesky(state.covariances[r]))
            position = mh.position.at[block].set(walk)
            proposal, new_extras, passed, new_screen, first = propose(key_target, mh, extras, screen_terms, position)
            mh_new, info = accept_reject(jnp.log(jax.random.uniform(key_accept)), mh, proposal, first)
            extras = jax.tree.map(lambda new, old: jnp.where(info.accepted, new, old), new_extras, extras)
            screen_terms = jax.tree.map(lambda new, old: jnp.where(info.accepted, new, old), new_screen, screen_terms)
            mh = mh_new
            accepted.append(info.accepted & passed)
            rates.append(jnp.where(passed, info.acceptance_rate, 0.0))
            proposed.append(report(new_extras))
            screened.append(passed)
        collect = jnp.logical_or(adapting, adapt_after_warmup)
        moments = tuple(moments_update(m, mh.position[block], collect) for m, block in zip(state.moments, blocks))
        covariances = tuple(
            jnp.where(collect, haario_covariance(m, start, g0, epsilon), old)
            for m, start, old in zip(moments, starts, state.covariances))
        scales = tuple(scale_update(adaptation, rate, target_acceptance, collect & (m.count > g0))
                       for adaptation, rate, m in zip(state.scales, rates, state.moments))
        info = BlockedInfo(jnp.stack(accepted), jnp.stack(rates), jax.tree.map(lambda *leaves: jnp.stack(leaves),
                                                                               *proposed), jnp.stack(screened))
        return BlockedState(mh, extras, moments, covariances, screen_terms, scales), info

    return init, step


def proposal_covariances(state: BlockedState) -> tuple:
    """Each block's proposal covariance in ``state``: ``Sigma_r``, times ``s_r^2`` where the scale adapts."""
    if not state.scales:
        return state.covariances
    return tuple(jnp.exp(2.0 * scale.log_scale)[..., None, None] * covariance
                 for scale, covariance in zip(state.scales, state.covariances))


def _start_covariance(initial_covariance, size: int) -> jax.Array:
    """``Sigma_r^(0)`` of a block of ``size`` coordinates: a multiple of the identity, or the matrix given."""
    if np.ndim(initial_covariance) == 0:
        return initial_covariance * jnp.eye(size)
    start = jnp.asarray(initial_covariance, dtype=float)
    if start.shape != (size, size):
        raise MethodError(f"the initial proposal covariance must be {size} x {size} (the block's coordinates), got "
                          f"shape {start.shape}")
    return start
