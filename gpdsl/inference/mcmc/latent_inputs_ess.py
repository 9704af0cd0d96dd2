"""Elliptical slice sampling of a GPLVM's latent inputs at fixed hyperparameters (Gadd, Wade & Shah 2021, Alg. 2).

The target is ``p(Z | Y, xi) ∝ prod_d N(y_d | 0, K_f(Z) + s^2 I) prod_j N(z_j | 0, K_z)``: the exact collapsed
likelihood (:func:`~gpdsl.inference.mcmc.gplvm_estimate.collapsed_log_likelihood`) under the prior of the
latent inputs, whose ``Q`` columns are independent with covariance ``K_z`` (the identity for a Bayesian
GPLVM). As in Alg. 2 the whole of ``Z`` moves on one ellipse: :func:`~gpdsl.inference.mcmc.ess.ess_step`
acts on ``vec(Z^T)`` (column after column) with the block-diagonal prior factor ``I_Q ⊗ L_z``.

* :func:`latent_inputs_sweeps` runs a number of steps at one ``theta`` (traceable and vmap-able);
* :func:`sample_latent_inputs` gives one ``Z`` per retained hyperparameter draw, warm-started from the
  ``Z`` of the previous draw of the same chain (usage (a): predictions);
* :func:`ess_chain` is a long chain at one ``theta`` (usage (b): the latent posterior at a fixed ``xi``).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from gpdsl.errors import MethodError
from gpdsl.inference import progress
from gpdsl.inference.driver import split_over_devices
from gpdsl.inference.families.gplvm import GPLVMProblem
from gpdsl.inference.mcmc.ess import ess_step
from gpdsl.inference.mcmc.gplvm_estimate import (
    collapsed_log_likelihood,
    require_observed,
)
from gpdsl.numerics.linalg import cholesky


class SweepInfo(NamedTuple):
    """What a run of steps at one ``theta`` did.

    Attributes
    ----------
    log_likelihood : jax.Array
        ``log p(Y | Z, xi)`` at the final ``Z``.
    num_shrinks : jax.Array (int)
        Bracket shrinks summed over the steps.
    gave_up : jax.Array (bool)
        True if any step reached ``max_shrinks`` (and kept its ``Z``).
    """

    log_likelihood: jax.Array
    num_shrinks: jax.Array
    gave_up: jax.Array


def ess_target(problem: GPLVMProblem, theta):
    """The ESS ingredients at ``theta``: the prior factor of ``vec(Z^T)`` and the log-likelihood of it.

    Parameters
    ----------
    problem : GPLVMProblem
        The model view; its outputs must be fully observed.
    theta : jax.Array, shape (P,)
        Unconstrained hyperparameters.

    Returns
    -------
    factor : jax.Array, shape (N Q, N Q)
        ``I_Q ⊗ L_z`` with ``L_z L_z^T = K_z`` (jitter included).
    loglik : callable
        ``loglik(vec) -> log p(Y | Z, xi)`` with ``Z = vec.reshape(Q, N).T``.
    """
    N, Q = problem.num_points, problem.latent_dim
    L_z = cholesky(problem.latent_q().dense_prior_covariance(theta, N))

    def loglik(vec):
        return collapsed_log_likelihood(problem, theta, jnp.reshape(vec, (Q, N)).T)

    return jnp.kron(jnp.eye(Q), L_z), loglik


def latent_inputs_sweeps(problem: GPLVMProblem, theta, rng_key, Z, sweeps: int, max_shrinks: int = 100):
    """``sweeps`` elliptical slice steps of ``Z`` at fixed ``theta`` (Alg. 2 repeated).

    Parameters
    ----------
    problem : GPLVMProblem
        The model view; its outputs must be fully observed.
    theta : jax.Array, shape (P,)
        Unconstrained hyperparameters.
    rng_key : jax.Array
        PRNG key.
    Z : jax.Array, shape (N, Q)
        Starting latent inputs.
    sweeps : int
        Number of steps (static).
    max_shrinks : int
        See :func:`~gpdsl.inference.mcmc.ess.ess_step`.

    Returns
    -------
    Z : jax.Array, shape (N, Q)
    info : SweepInfo

    Notes
    -----
    Traceable and vmap-able: the Cholesky factor of ``K_z`` is computed once per call, the collapsed
    likelihood once per point on the ellipse.
    """
    factor, loglik = ess_target(problem, theta)
    Z = jnp.asarray(Z, dtype=jnp.float64)
    vec = Z.T.reshape(-1)

    def step(carry, key):
        vec, value, shrinks, gave_up = carry
        vec, value, info = ess_step(key, vec, value, factor, loglik, max_shrinks)
        return (vec, value, shrinks + info.num_shrinks, gave_up | info.gave_up), None

    start = (vec, loglik(vec), jnp.zeros((), jnp.int32), jnp.zeros((), bool))
    (vec, value, shrinks, gave_up), _ = lax.scan(step, start, jax.random.split(rng_key, sweeps))
    return vec.reshape(Z.shape[1], Z.shape[0]).T, SweepInfo(value, shrinks, gave_up)


def sample_latent_inputs(problem: GPLVMProblem, theta_draws, rng_key, *, initial_Z, sweeps: int = 20,
                         thin: int = 1, max_shrinks: int = 100, segment_size: int = 100) -> np.ndarray:
    """One draw of ``Z`` per retained hyperparameter draw, each chain warm-started along its draws.

    For each chain the draws ``theta_draws[c, ::thin]`` are visited in order; at each one ``sweeps``
    steps of :func:`latent_inputs_sweeps` start from the ``Z`` kept at the previous draw (``initial_Z``
    at the first) and the last state is kept (spec decision #8: thin by 10, 20 sweeps). Compiled as a
    ``lax.scan`` over ``segment_size`` draws, ``vmap`` over the chains, which are split over the host devices;
    each segment moves the bar of the :func:`~gpdsl.inference.progress.stage` it runs in by its draws.

    Parameters
    ----------
    problem : GPLVMProblem
        The model view; its outputs must be fully observed.
    theta_draws : array_like, shape (chains, draws, P)
        Unconstrained hyperparameter draws.
    rng_key : jax.Array
        PRNG key.
    initial_Z : array_like, shape (N, Q) or (chains, N, Q)
        Starting latent inputs (e.g. the VEM means), shared by the chains or one per chain.
    sweeps : int
        ESS steps per kept draw.
    thin : int
        Keep every ``thin``-th hyperparameter draw (the first included).
    max_shrinks : int
        See :func:`~gpdsl.inference.mcmc.ess.ess_step`.
    segment_size : int
        Draws per compiled segment (the draws do not depend on it).

    Returns
    -------
    numpy.ndarray, shape (chains, ceil(draws / thin), N, Q)
        ``Z`` draws matching ``theta_draws[:, ::thin]``.

    Raises
    ------
    MethodError
        Missing outputs, wrong shapes, or non-positive ``sweeps``, ``thin`` or ``segment_size``.
    """
    _check(problem, sweeps=sweeps, thin=thin, segment_size=segment_size)
    theta_draws = jnp.asarray(theta_draws, dtype=jnp.float64)
    if theta_draws.ndim != 3 or theta_draws.shape[2] != problem.theta_dim:
        raise MethodError(f"theta_draws must have shape (chains, draws, {problem.theta_dim}); got {theta_draws.shape}")
    theta_draws = theta_draws[:, ::thin]
    chains, kept = theta_draws.shape[:2]
    Z = jnp.broadcast_to(_initial(problem, initial_Z, (2, 3)), (chains, problem.num_points, problem.latent_dim))
    keys = jax.vmap(lambda key: jax.random.split(key, kept))(jax.random.split(rng_key, chains))

    def segment(keys, thetas, Z):
        def visit(Z, inputs):
            key, theta = inputs
            Z, _ = latent_inputs_sweeps(problem, theta, key, Z, sweeps, max_shrinks)
            return Z, Z

        return lax.scan(visit, Z, (keys, thetas))

    run = jax.jit(split_over_devices(jax.vmap(segment), chains, (True, True, True)))
    parts = []
    for start in range(0, kept, segment_size):
        Z, part = run(keys[:, start:start + segment_size], theta_draws[:, start:start + segment_size], Z)
        parts.append(np.asarray(part))
        progress.advance(chains * parts[-1].shape[1])
    return np.concatenate(parts, axis=1)


def ess_chain(problem: GPLVMProblem, theta, rng_key, initial_Z, num_samples: int, thin: int = 1,
              max_shrinks: int = 100) -> np.ndarray:
    """A long elliptical slice chain of ``Z`` at one ``theta`` (e.g. 100 000 draws at ``xi_ML`` for Figs. 2-3).

    Parameters
    ----------
    problem : GPLVMProblem
        The model view; its outputs must be fully observed.
    theta : array_like, shape (P,)
        Unconstrained hyperparameters.
    rng_key : jax.Array
        PRNG key.
    initial_Z : array_like, shape (N, Q)
        Starting latent inputs.
    num_samples : int
        Draws kept.
    thin : int
        ESS steps between kept draws.
    max_shrinks : int
        See :func:`~gpdsl.inference.mcmc.ess.ess_step`.

    Returns
    -------
    numpy.ndarray, shape (num_samples, N, Q)
        The state after every ``thin`` steps (no warmup is discarded).
    """
    _check(problem, num_samples=num_samples, thin=thin)
    theta = jnp.asarray(theta, dtype=jnp.float64)
    factor, loglik = ess_target(problem, theta)

    def kept(carry, key):
        def step(carry, key):
            vec, value = carry
            vec, value, _ = ess_step(key, vec, value, factor, loglik, max_shrinks)
            return (vec, value), None

        carry, _ = lax.scan(step, carry, jax.random.split(key, thin))
        return carry, carry[0]

    @jax.jit
    def run(key, vec):
        return lax.scan(kept, (vec, loglik(vec)), jax.random.split(key, num_samples))[1]

    vec = _initial(problem, initial_Z, (2,)).T.reshape(-1)
    draws = np.asarray(run(rng_key, vec))
    return np.swapaxes(draws.reshape(num_samples, problem.latent_dim, problem.num_points), 1, 2)


def _check(problem: GPLVMProblem, **counts: int) -> None:
    require_observed(problem, f"elliptical slice sampling of '{problem.latent}'")
    for name, value in counts.items():
        if int(value) < 1:
            raise MethodError(f"{name} must be a positive integer; got {value}")


def _initial(problem: GPLVMProblem, initial_Z, ranks: tuple[int, ...]) -> jax.Array:
    Z = jnp.asarray(initial_Z, dtype=jnp.float64)
    shape = (problem.num_points, problem.latent_dim)
    if Z.ndim not in ranks or Z.shape[-2:] != shape:
        per_chain = " (or one per chain)" if 3 in ranks else ""
        raise MethodError(f"initial values of '{problem.latent}' must have shape {shape}{per_chain}; got {Z.shape}")
    return Z
