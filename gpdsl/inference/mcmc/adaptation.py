"""Adaptation of random-walk proposals during warmup: the scale and the covariance.

- Robbins-Monro on the log scale towards a target acceptance rate (Andrieu & Thoms 2008, Sec. 5):
  ``log s <- log s + gamma_t (alpha_t - alpha*)`` with gain ``gamma_t = rate * (t + t0) ** -decay``
  at adapted update ``t = 0, 1, ...``.
- Adaptive Metropolis (Haario, Saksman & Tamminen 2001): running mean and covariance of the chain's
  draws (Welford's update), and after ``g0`` draws the proposal covariance
  ``s_d (C_t + epsilon I)`` with ``s_d = 2.38^2 / d``.

Both are frozen after warmup by the engines, so the sampling phase is a plain MH chain.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp


class ScaleAdaptation(NamedTuple):
    """Robbins-Monro state of a random-walk scale.

    Attributes
    ----------
    log_scale : jax.Array, shape () or (d,)
        Log of the scale (one per coordinate when a vector).
    count : jax.Array (int)
        Number of adapted updates so far.
    """

    log_scale: jax.Array
    count: jax.Array


def scale_init(scale, shape=()) -> ScaleAdaptation:
    """The :class:`ScaleAdaptation` at ``scale`` (broadcast to ``shape``) with no update done."""
    scale = jnp.broadcast_to(jnp.asarray(scale, dtype=jnp.float64), shape)
    return ScaleAdaptation(jnp.log(scale), jnp.zeros((), jnp.int32))


def scale_update(state: ScaleAdaptation, acceptance_rate, target_acceptance: float, adapting, rate: float = 1.0,
                 decay: float = 0.6, t0: float = 1.0) -> ScaleAdaptation:
    """One Robbins-Monro update of the log scale towards ``target_acceptance``.

    Parameters
    ----------
    state : ScaleAdaptation
        Current scale and number of adapted updates ``t``.
    acceptance_rate : jax.Array
        The MH acceptance probability of the update just done.
    target_acceptance : float
        The acceptance rate aimed at.
    adapting : jax.Array (bool)
        Whether to adapt; otherwise ``state`` is returned unchanged.
    rate, decay, t0 : float
        Gain ``rate * (t + t0) ** -decay``; ``decay`` in ``(0.5, 1]`` makes the gains' sum diverge and
        their squares' sum converge.

    Returns
    -------
    ScaleAdaptation
    """
    gain = rate * (state.count.astype(jnp.float64) + t0) ** -decay
    adapted = state.log_scale + gain * (acceptance_rate - target_acceptance)
    return ScaleAdaptation(jnp.where(adapting, adapted, state.log_scale),
                           state.count + jnp.where(adapting, 1, 0).astype(state.count.dtype))


class RunningMoments(NamedTuple):
    """Running mean and scatter of the draws (Welford's algorithm).

    Attributes
    ----------
    mean : jax.Array, shape (d,)
        Mean of the draws so far.
    scatter : jax.Array, shape (d, d)
        Sum of the outer products of the deviations from the mean.
    count : jax.Array (int)
        Number of draws.
    """

    mean: jax.Array
    scatter: jax.Array
    count: jax.Array


def moments_init(dim: int) -> RunningMoments:
    """Empty :class:`RunningMoments` in ``dim`` dimensions."""
    return RunningMoments(jnp.zeros(dim), jnp.zeros((dim, dim)), jnp.zeros((), jnp.int32))


def moments_update(state: RunningMoments, x, collect=True) -> RunningMoments:
    """Add the draw ``x`` to the running moments (when ``collect``; otherwise keep them)."""
    count = state.count + jnp.where(collect, 1, 0)
    delta = x - state.mean
    mean = jnp.where(collect, state.mean + delta / jnp.maximum(count, 1), state.mean)
    scatter = jnp.where(collect, state.scatter + jnp.outer(delta, x - mean), state.scatter)
    return RunningMoments(mean, scatter, count)


def sample_covariance(state: RunningMoments, epsilon: float = 0.0) -> jax.Array:
    """The draws' covariance (denominator ``count - 1``, as :func:`numpy.cov`) plus ``epsilon I``."""
    covariance = state.scatter / jnp.maximum(state.count - 1, 1)
    if epsilon:
        covariance = covariance + epsilon * jnp.eye(state.mean.shape[0])
    return covariance


def haario_covariance(state: RunningMoments, initial_covariance, g0: int, epsilon: float = 1e-6) -> jax.Array:
    """The adaptive Metropolis proposal covariance of Haario et al. (2001).

    Parameters
    ----------
    state : RunningMoments
        Moments of the draws collected so far.
    initial_covariance : jax.Array, shape (d, d)
        The proposal covariance until ``g0`` draws are in.
    g0 : int
        Number of draws after which the proposal follows the draws.
    epsilon : float
        Diagonal regularisation, keeps the proposal non-degenerate.

    Returns
    -------
    jax.Array, shape (d, d)
        ``s_d (C + epsilon I)`` with ``s_d = 2.38^2 / d`` and ``C`` the draws' covariance, once
        ``count >= g0``; ``initial_covariance`` before.
    """
    dim = state.mean.shape[0]
    adapted = (2.38**2 / dim) * sample_covariance(state, epsilon)
    return jnp.where(state.count >= g0, adapted, initial_covariance)
