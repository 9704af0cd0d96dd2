"""One step t >= 2 of the sequential sampler (Tegner et al. 2018, Alg. 1).

Given the M states of ``S_{t-1}`` (their ``f`` over the window's earlier steps) and the moment-matched
Gaussian ``q_{t-1}(z)`` of the hyperparameters (eq. 8), one pass over the states ``i = 1..M`` threads one
chain of hyperparameters through them. For each ``i``: draw ``f_t`` from the conditional prior given
``f_{t-tau:t-1}^(i)`` (eq. 6), ``repeat_f`` ESS updates of ``f_t`` with that non-zero-mean prior
(Update 1), fixed-nu ESS of ``kappa`` in z-space (Update 2), ``repeat_f`` more ESS updates, ESS of
``alpha`` with ``f_t`` fixed (Update 3), then ``final_f`` ESS updates (0 by default; the paper's
"repeat update 1" after Update 3). The state ``(f_t, kappa, alpha)`` after these is the i-th of ``S_t``.

With ``chains = G > 1`` the states are cut into G consecutive runs of ``M / G``, and G chains, one through each
run, go in parallel over the host devices (:func:`~gpdsl.inference.driver.split_over_devices`). Each is a pass of
Alg. 1 over its states; the paper threads one chain through all M (``chains = 1``, the default).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from functools import partial

from gpdsl.inference.driver import split_over_devices
from gpdsl.inference.mcmc.ess import ess_step
from gpdsl.inference.mcmc.z_space import Split, ZPrior, alpha_update, fixed_nu_update, sdss_mean_update


class StepInfo(NamedTuple):
    """What one state's updates did: ESS shrinks over all f updates, and hyperparameter evaluations."""

    num_shrinks: jax.Array
    num_evaluations: jax.Array


def moment_match(thetas: np.ndarray, jitter: float = 1e-10) -> ZPrior:
    """``q(z) = N(mean, cov)`` of the M hyperparameter draws of a step (eq. 8; Alg. 1 uses the covariance)."""
    thetas = np.asarray(thetas, dtype=float)
    if thetas.shape[1] == 0:
        return ZPrior(jnp.zeros(0), jnp.zeros((0, 0)))
    cov = np.atleast_2d(np.cov(thetas, rowvar=False)) + jitter * np.eye(thetas.shape[1])
    return ZPrior(jnp.asarray(thetas.mean(axis=0)), jnp.asarray(cov))


def make_step_pass(functions, blocks: Split, repeat_f: int, final_f: int = 0, kappa_update: str = "fixed_nu",
                   surrogate_variance=1.0, chains: int = 1):
    """The compiled pass of Alg. 1 over the M states of one step.

    Parameters
    ----------
    functions : StepFunctions
        Conditional prior and likelihood of a step given ``window`` earlier ones.
    blocks : Split
        Positions of ``kappa`` and ``alpha`` in ``theta``.
    repeat_f : int
        ESS updates of ``f_t`` before Update 2 and again before Update 3.
    final_f : int
        ESS updates after Update 3.
    kappa_update : {"fixed_nu", "sdss"}
        Update 2 by fixed-nu ESS (Alg. 1) or by SDSS (the paper's "in doubt, SDSS at every step"), both in
        z-space; ``surrogate_variance`` is SDSS's S (a scalar, or a length-``n`` diagonal given to ``run`` when it
        changes from step to step).
    chains : int
        Chains threaded through consecutive runs of ``M / chains`` states, in parallel (module docstring).

    Returns
    -------
    callable
        ``run(rng_key, theta, f_previous, data, q, surrogate=None) -> (thetas, fs, infos)``: ``theta`` the
        chains' starting hyperparameters ``(chains, d)``, ``f_previous`` of shape ``(M, window * n)``, ``data``
        the window's stepped data, ``q`` the :class:`ZPrior`, ``surrogate`` SDSS's diagonal S for this step
        (``surrogate_variance`` when None); ``thetas`` ``(M, d)``, ``fs`` ``(M, n)``.
    """
    def run(rng_key, theta, f_previous, data, q: ZPrior, surrogate=None):
        kappa_step = fixed_nu_update if kappa_update == "fixed_nu" else partial(
            sdss_mean_update, surrogate_variance=surrogate_variance if surrogate is None else surrogate)

        def one_state(theta, inputs):
            key, previous = inputs
            keys = jax.random.split(key, 2 * repeat_f + final_f + 3)

            def prior_of(th):
                return functions.prior(th, data, previous)

            def log_likelihood(f, th):
                return functions.log_likelihood(f, th, data, previous)

            mean, chol = prior_of(theta)
            f = mean + chol @ jax.random.normal(keys[0], mean.shape, jnp.float64)
            loglik = log_likelihood(f, theta)

            def update_f(f, loglik, keys):
                def one(carry, key):
                    f, loglik = carry
                    f, loglik, info = ess_step(key, f, loglik, chol, lambda v: log_likelihood(v, theta), mean=mean)
                    return (f, loglik), info.num_shrinks

                (f, loglik), shrinks = lax.scan(one, (f, loglik), keys)
                return f, loglik, jnp.sum(shrinks)

            f, loglik, shrinks = update_f(f, loglik, keys[3:3 + repeat_f])
            evaluations = jnp.zeros((), jnp.int32)
            if blocks.kappa.size:
                theta, f, mean, chol, loglik, info = kappa_step(keys[1], theta, f, mean, chol, loglik, prior_of,
                                                                log_likelihood, q, blocks.kappa)
                evaluations = evaluations + info.num_evaluations
            f, loglik, more = update_f(f, loglik, keys[3 + repeat_f:3 + 2 * repeat_f])
            shrinks = shrinks + more
            if blocks.alpha.size:
                theta, loglik, info = alpha_update(keys[2], theta, f, loglik, log_likelihood, q, blocks.alpha)
                evaluations = evaluations + info.num_evaluations
            if final_f:
                f, loglik, more = update_f(f, loglik, keys[3 + 2 * repeat_f:])
                shrinks = shrinks + more
            return theta, (theta, f, StepInfo(shrinks, evaluations))

        def one_chain(theta, keys, f_previous):
            _, out = lax.scan(one_state, theta, (keys, f_previous))
            return out

        M = f_previous.shape[0]
        keys = jax.random.split(rng_key, M)
        keys = keys.reshape((chains, M // chains) + keys.shape[1:])
        runs = f_previous.reshape((chains, M // chains) + f_previous.shape[1:])
        out = split_over_devices(jax.vmap(one_chain), chains, (True, True, True))(theta, keys, runs)
        return jax.tree_util.tree_map(lambda leaf: leaf.reshape((M,) + leaf.shape[2:]), out)

    return jax.jit(run)
