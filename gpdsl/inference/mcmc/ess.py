"""Elliptical slice sampling (Murray, Adams & MacKay 2010) of f ~ N(0, K) under any log-likelihood.

One step draws an auxiliary ``nu ~ N(0, K)`` from the prior's Cholesky factor and searches the
ellipse ``f cos(a) + nu sin(a)`` by shrinking an angle bracket until the log-likelihood exceeds the
slice height. Given the factor a step costs ``O(n^2)``, so repeated steps at fixed hyperparameters
share one factorisation.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax
from jax.scipy.special import ndtri

from gpdsl.inference.mcmc import prior_factor

LogLikelihood = Callable[[jax.Array], jax.Array]


class ESSInfo(NamedTuple):
    """What one elliptical slice step did.

    Attributes
    ----------
    num_shrinks : jax.Array (int)
        Number of times the angle bracket was shrunk (rejected points on the ellipse).
    gave_up : jax.Array (bool)
        True if ``max_shrinks`` was reached and ``f`` was kept unchanged (never in normal use).
    """

    num_shrinks: jax.Array
    gave_up: jax.Array


class ESSState(NamedTuple):
    """State of an ESS chain at fixed hyperparameters: the latent values and their log-likelihood."""

    position: jax.Array
    loglik: jax.Array


def ess_step(rng_key, f, loglik_f, chol_K, loglik: LogLikelihood, max_shrinks: int = 100, mean=None):
    """One elliptical slice sampling update of ``f`` with prior ``N(mean, L L^T)``.

    Parameters
    ----------
    rng_key : jax.Array
        PRNG key.
    f : jax.Array, shape (n,)
        Current latent values.
    loglik_f : jax.Array
        ``loglik(f)``, cached from the previous step.
    chol_K : jax.Array, shape (n, n) or (n,)
        Lower Cholesky factor of the prior covariance, or the diagonal of a diagonal one
        (:mod:`gpdsl.inference.mcmc.prior_factor`).
    loglik : callable
        ``loglik(f) -> scalar``, any log-likelihood (NaN counts as minus infinity).
    max_shrinks : int
        Cap on bracket shrinks; reaching it keeps ``f`` (reported in ``info.gave_up``). The bracket
        halves on average per shrink, so the default 100 is never reached in practice. All uniforms
        of a step come from one draw, which keeps compilation fast.
    mean : jax.Array, shape (n,), optional
        The prior mean ``m`` (zero when omitted): the ellipse is ``m + (f - m) cos(a) + nu sin(a)``
        (a conditional GP prior, as in the sequential sampler's update of ``f_t``).

    Returns
    -------
    f_new : jax.Array, shape (n,)
    loglik_new : jax.Array
    info : ESSInfo
    """
    nu, uniforms = _prior_draw_and_uniforms(rng_key, f, chol_K, max_shrinks)
    return _slice_on_ellipse(uniforms, f, nu, loglik_f, loglik, mean, max_shrinks)


def _prior_draw_and_uniforms(rng_key, f, chol, max_shrinks):
    """``nu = L u`` for standard normals ``u`` and the ``2 + max_shrinks`` uniforms of one step, from one draw."""
    n = f.shape[0]
    uniforms = jax.random.uniform(rng_key, (n + 2 + max_shrinks,), dtype=f.dtype)
    return prior_factor.times(chol, ndtri(jnp.maximum(uniforms[:n], jnp.finfo(f.dtype).tiny))), uniforms[n:]


def mapped_ess_step(rng_key, z, image_z, loglik_z, chol, apply_map, image_loglik, max_shrinks: int = 100):
    """One elliptical slice update of ``z ~ N(0, L L^T)`` under a likelihood that reads ``z`` only through a linear map.

    The likelihood is ``image_loglik(M z)``. Since ``M (z cos(a) + nu sin(a)) = M z cos(a) + M nu sin(a)``, the
    ellipse of ``(z, M z)`` is searched with one application of ``M`` per step (to the prior draw ``nu``) instead of
    one per point tried: the points and their acceptance are those of :func:`ess_step` on ``z`` with the same key.
    For a state-space GP's innovations (``M`` a scan over ``N`` times) or an HSGP's weights (``O(N m)``) a shrink then
    costs ``O(N)``.

    Parameters
    ----------
    rng_key : jax.Array
        PRNG key.
    z : jax.Array, shape (n,)
        Current sampled vector.
    image_z : jax.Array
        ``apply_map(z)``, carried between steps.
    loglik_z : jax.Array
        ``image_loglik(image_z)``.
    chol : jax.Array, shape (n, n) or (n,)
        The prior factor of ``z`` (:mod:`gpdsl.inference.mcmc.prior_factor`).
    apply_map : callable
        ``v -> M v``, linear.
    image_loglik : callable
        The log-likelihood as a function of ``M z`` (NaN counts as minus infinity).
    max_shrinks : int
        See :func:`ess_step`.

    Returns
    -------
    z_new, image_new : jax.Array
    loglik_new : jax.Array
    info : ESSInfo
    """
    nu, uniforms = _prior_draw_and_uniforms(rng_key, z, chol, max_shrinks)
    (z_new, image_new), value, info = _slice_on_ellipse(uniforms, (z, image_z), (nu, apply_map(nu)), loglik_z,
                                                        lambda pair: image_loglik(pair[1]), None, max_shrinks)
    return z_new, image_new, value, info


def standard_normal_ess_step(rng_key, u, loglik_u, loglik: Callable, max_shrinks: int = 100):
    """One elliptical slice update of a pytree ``u`` of independent standard normals under any log-likelihood.

    The update of the auxiliary variates of a pseudo-marginal estimate at fixed parameters (Murray & Graham
    2016): ``loglik(u)`` is the log of the estimate made from ``u``, so the step leaves
    ``p_hat(u) N(u; 0, I)`` invariant, the extended target of the pseudo-marginal chain given its parameters.

    Parameters
    ----------
    rng_key : jax.Array
        PRNG key.
    u : pytree of jax.Array
        Current variates, every leaf standard normal a priori.
    loglik_u : jax.Array
        ``loglik(u)``, cached.
    loglik : callable
        ``loglik(u) -> scalar`` (NaN counts as minus infinity).
    max_shrinks : int
        See :func:`ess_step`.

    Returns
    -------
    u_new : pytree
    loglik_new : jax.Array
    info : ESSInfo
    """
    leaves, treedef = jax.tree.flatten(u)
    key_nu, key_uniforms = jax.random.split(rng_key)
    keys = jax.random.split(key_nu, len(leaves))
    nu = jax.tree.unflatten(treedef, [jax.random.normal(key, leaf.shape, leaf.dtype) for key, leaf in zip(keys, leaves)])
    uniforms = jax.random.uniform(key_uniforms, (2 + max_shrinks,), dtype=jnp.result_type(float))
    return _slice_on_ellipse(uniforms, u, nu, loglik_u, loglik, None, max_shrinks)


def _slice_on_ellipse(uniforms, f, nu, loglik_f, loglik, mean, max_shrinks):
    """The slice height, the first angle and the shrinking bracket of one ESS step (``uniforms``: ``2 +
    max_shrinks`` of them); ``f``, ``nu`` and ``mean`` may be matching pytrees."""
    log_height = loglik_f + jnp.log1p(-uniforms[0])
    angle = 2.0 * math.pi * uniforms[1]
    shrink_uniforms = uniforms[2:]

    def on_ellipse(a):
        if mean is None:
            proposal = jax.tree.map(lambda x, v: x * jnp.cos(a) + v * jnp.sin(a), f, nu)
        else:
            proposal = jax.tree.map(lambda m, x, v: m + (x - m) * jnp.cos(a) + v * jnp.sin(a), mean, f, nu)
        value = loglik(proposal)
        return proposal, jnp.where(jnp.isnan(value), -jnp.inf, value)

    def outside_slice(carry):
        _, _, _, value, shrinks, _ = carry
        return jnp.logical_and(~(value > log_height), shrinks < max_shrinks)

    def shrink(carry):
        a, low, high, _, shrinks, _ = carry
        low = jnp.where(a < 0.0, a, low)
        high = jnp.where(a < 0.0, high, a)
        a = low + (high - low) * shrink_uniforms[shrinks]
        proposal, value = on_ellipse(a)
        return a, low, high, value, shrinks + 1, proposal

    proposal, value = on_ellipse(angle)
    start = (angle, angle - 2.0 * math.pi, angle, value, jnp.zeros((), jnp.int32), proposal)
    _, _, _, value, shrinks, proposal = lax.while_loop(outside_slice, shrink, start)
    gave_up = ~(value > log_height)
    f_new = jax.tree.map(lambda new, old: jnp.where(gave_up, old, new), proposal, f)
    loglik_new = jnp.where(gave_up, loglik_f, value)
    return f_new, loglik_new, ESSInfo(num_shrinks=shrinks, gave_up=gave_up)


def make_ess_kernel(chol_K, loglik: LogLikelihood, max_shrinks: int = 100):
    """A driver-ready ESS sampler at fixed hyperparameters.

    Parameters
    ----------
    chol_K : jax.Array, shape (n, n)
        Lower Cholesky factor of the prior covariance, computed once.
    loglik : callable
        ``loglik(f) -> scalar``.
    max_shrinks : int
        See :func:`ess_step`.

    Returns
    -------
    init : callable
        ``init(rng_key, f) -> ESSState``; the key is not used (the protocol of every engine).
    step : callable
        ``step(rng_key, state, adapting=False) -> (ESSState, ESSInfo)``; ``adapting`` is ignored
        (ESS has nothing to tune).
    """

    def init(rng_key, f) -> ESSState:
        del rng_key
        f = jnp.asarray(f, dtype=jnp.float64)
        return ESSState(position=f, loglik=loglik(f))

    def step(rng_key, state: ESSState, adapting=False):
        f, value, info = ess_step(rng_key, state.position, state.loglik, chol_K, loglik, max_shrinks)
        return ESSState(position=f, loglik=value), info

    return init, step
