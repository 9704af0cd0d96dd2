"""Gibbs schedules for latent GP models: ESS for f given theta, then SA, AA or SURR for theta.

One step does ``repeat_f`` elliptical slice updates of ``f`` (sharing the cached Cholesky factor of
``K(theta)``, none for a whitened view such as a GP on a grid, :mod:`gpdsl.inference.families.latent_grid`) and then ``repeat_theta`` hyperparameter updates; Table 3 of Filippone & Girolami
(2014) repeats each 20 times. With several latent GP vectors (``f`` stacks them, ``K`` is block-diagonal) an
update of ``f`` is one ESS step of all of them together, which moves those the posterior trades against each
other, then one of each in turn given the others. During warmup the random-walk scale is adapted by Robbins-Monro on its
logarithm towards ``target_acceptance`` (:mod:`gpdsl.inference.mcmc.adaptation`); afterwards it is frozen.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from gpdsl.errors import MethodError
from gpdsl.inference.families.latent_gp import LatentGP
from gpdsl.inference.mcmc.adaptation import ScaleAdaptation, scale_init, scale_update
from gpdsl.inference.mcmc import prior_factor
from gpdsl.inference.mcmc.ess import ess_step, mapped_ess_step
from gpdsl.inference.mcmc.hyper_updates import (
    LatentPosition,
    SurrogateVariance,
    aa_step,
    latent_position,
    sa_step,
    surr_slice_step,
    surr_step,
)
from gpdsl.inference.mcmc.z_space import Z_SPACE_UPDATES, z_space_updates
from gpdsl.settings.sampling import THETA_UPDATES


class GibbsState(NamedTuple):
    """State of a Gibbs chain.

    Attributes
    ----------
    latent : LatentPosition
        ``theta``, ``f``, the Cholesky factor of ``K(theta)`` and ``log p(y | f, theta)``.
    scale : ScaleAdaptation
        Log of the random-walk scale (or slice width) per coordinate, and the number of adapted
        hyperparameter updates so far.
    """

    latent: LatentPosition
    scale: ScaleAdaptation

    @property
    def position(self) -> dict:
        """The sampled values: ``{"theta": theta, "f": f}``."""
        return {"theta": self.latent.theta, "f": self.latent.f}


class GibbsInfo(NamedTuple):
    """What one Gibbs step did.

    Attributes
    ----------
    num_shrinks : jax.Array (int)
        ESS bracket shrinks, summed over the ``repeat_f`` updates.
    acceptance_rate : jax.Array
        MH acceptance probability averaged over the ``repeat_theta`` updates (1 for slice).
    accepted : jax.Array
        Fraction of the ``repeat_theta`` updates that moved ``theta``.
    num_evaluations : jax.Array (int)
        Hyperparameter target evaluations, summed.
    cubic_ops : jax.Array (int)
        ``n x n`` Cholesky factorisations in the step (ESS needs none: it reuses the cached factor).
    """

    num_shrinks: jax.Array
    acceptance_rate: jax.Array
    accepted: jax.Array
    num_evaluations: jax.Array
    cubic_ops: jax.Array


def make_gibbs(problem: LatentGP, theta_update: str = "surr", repeat_f: int = 1, repeat_theta: int = 1,
               target_acceptance: float = 0.25, initial_scale=None, surrogate_variance: SurrogateVariance = 1.0,
               slice_direction: str = "coordinate", adaptation_rate: float = 1.0, adaptation_decay: float = 0.6):
    """Build the init and step functions of an ESS-within-Gibbs sampler.

    Parameters
    ----------
    problem : LatentGP
        The model view.
    theta_update : {"sa", "aa", "surr", "surr_slice", "sdss", "fixed_nu"}
        The hyperparameter update (see :mod:`gpdsl.inference.mcmc.hyper_updates`; ``sdss`` and ``fixed_nu``
        are those of Tegner et al. 2018 in z-space, :mod:`gpdsl.inference.mcmc.z_space`).
    repeat_f, repeat_theta : int
        Number of ESS updates of ``f`` and of hyperparameter updates per step.
    target_acceptance : float
        Acceptance rate the random-walk scale is adapted towards during warmup (MH updates only).
    initial_scale : float or array_like of shape (theta_dim,), optional
        Initial random-walk scale; for ``"surr_slice"`` the slice width (never adapted). Defaults to
        0.3 for MH and 1.0 for slice sampling.
    surrogate_variance : float, array_like of shape (n,), or callable
        Diagonal surrogate noise ``S`` for SURR updates.
    slice_direction : {"coordinate", "random"}
        For ``"surr_slice"``: slice each coordinate in turn or along one random direction.
    adaptation_rate, adaptation_decay : float
        Robbins-Monro gain ``adaptation_rate * (t + 1) ** -adaptation_decay`` at adapted update ``t``.

    Returns
    -------
    init : callable
        ``init(rng_key, theta, f=None) -> GibbsState``; ``theta`` unconstrained, ``f`` defaults to
        zeros; the key is not used (the protocol of every engine).
    step : callable
        ``step(rng_key, state, adapting=False) -> (GibbsState, GibbsInfo)``.
    """
    if theta_update not in THETA_UPDATES:
        raise ValueError(f"theta_update must be one of {', '.join(THETA_UPDATES)}, not {theta_update!r}")
    if repeat_f < 0 or repeat_theta < 0:
        raise ValueError("repeat_f and repeat_theta must be non-negative")
    if problem.white and theta_update in Z_SPACE_UPDATES:
        raise MethodError(f"gibbs --theta-update {theta_update.replace('_', '-')} needs K(theta) over f; this model's "
                          "sampled vector is a whitened grid vector (its covariance is the identity)",
                          problem.node.statement.span, "use --theta-update surr, sa or aa")
    is_slice = theta_update in ("surr_slice", *Z_SPACE_UPDATES)
    if initial_scale is None:
        initial_scale = 1.0 if is_slice else 0.3
    update = {
        **z_space_updates(problem, theta_update, surrogate_variance),
        "sa": partial(sa_step, problem=problem),
        "aa": partial(aa_step, problem=problem),
        "surr": partial(surr_step, problem=problem, surrogate_variance=surrogate_variance),
        "surr_slice": partial(surr_slice_step, problem=problem, surrogate_variance=surrogate_variance,
                              direction=slice_direction),
    }[theta_update]

    def init(rng_key, theta, f=None) -> GibbsState:
        del rng_key
        theta = jnp.asarray(theta, dtype=jnp.float64)
        f = jnp.zeros(problem.n) if f is None else f
        return GibbsState(latent_position(problem, theta, f), scale_init(initial_scale, theta.shape))

    blocks = problem.blocks

    def update_f(latent: LatentPosition, keys):

        def one(carry, key):
            f, loglik = carry
            joint_key, *block_keys = jax.random.split(key, len(blocks) + 1) if len(blocks) > 1 else (key,)
            f, loglik, info = ess_step(joint_key, f, loglik, latent.chol_K,
                                       lambda v: problem.log_likelihood(v, latent.theta))
            shrinks = info.num_shrinks
            for block_key, block in zip(block_keys, blocks):

                def block_loglik(v, rest=f, block=block):
                    return problem.log_likelihood(rest.at[block].set(v), latent.theta)

                value, loglik, info = ess_step(block_key, f[block], loglik, prior_factor.block(latent.chol_K, block),
                                               block_loglik)
                f = f.at[block].set(value)
                shrinks = shrinks + info.num_shrinks
            return (f, loglik), shrinks

        image = problem.image(latent.theta) if len(blocks) <= 1 else None
        if image is None:
            (f, loglik), shrinks = lax.scan(one, (latent.f, latent.loglik), keys)
            return latent._replace(f=f, loglik=loglik), jnp.sum(shrinks)
        apply_map, image_loglik = image

        def mapped(carry, key):
            z, image_z, loglik = carry
            z, image_z, loglik, info = mapped_ess_step(key, z, image_z, loglik, latent.chol_K, apply_map, image_loglik)
            return (z, image_z, loglik), info.num_shrinks

        (f, _, loglik), shrinks = lax.scan(mapped, (latent.f, apply_map(latent.f), latent.loglik), keys)
        return latent._replace(f=f, loglik=loglik), jnp.sum(shrinks)

    def update_theta(state: GibbsState, keys, adapting):

        def one(carry, key):
            latent, scale = carry
            latent, info = update(key, latent, scale=jnp.exp(scale.log_scale))
            adapt = jnp.logical_and(adapting, not is_slice)
            scale = scale_update(scale, info.acceptance_rate, target_acceptance, adapt, adaptation_rate,
                                 adaptation_decay)
            return (latent, scale), info

        (latent, scale), infos = lax.scan(one, (state.latent, state.scale), keys)
        return GibbsState(latent, scale), infos

    def step(rng_key, state: GibbsState, adapting=False):
        keys = jax.random.split(rng_key, repeat_f + repeat_theta)
        latent, shrinks = update_f(state.latent, keys[:repeat_f])
        state, infos = update_theta(state._replace(latent=latent), keys[repeat_f:], adapting)
        info = GibbsInfo(num_shrinks=shrinks,
                         acceptance_rate=jnp.mean(infos.acceptance_rate),
                         accepted=jnp.mean(infos.accepted.astype(jnp.float64)),
                         num_evaluations=jnp.sum(infos.num_evaluations),
                         cubic_ops=jnp.sum(infos.cubic_ops))
        return state, info

    return init, step
