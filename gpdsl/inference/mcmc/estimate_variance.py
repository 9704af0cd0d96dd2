"""How noisy the pseudo-marginal estimate of a GPLVM is at one ``xi`` (Gadd, Wade & Shah 2021, Fig. 4 and eq. 10).

Many independent estimates of ``log p(Y | X, xi)``, each from ``S`` importance draws, and for every ``q = 1 .. S``
the estimate from the first ``q`` draws: their mean, spread and quantiles against ``q``. Doucet et al. (2015)
recommend a variance of the log estimate below about 2 (the paper reports about 1 at ``q = 1000``); above it the
chain sticks where an estimate came out high.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.inference.families.gplvm import GPLVMProblem
from gpdsl.inference.mcmc.gplvm_estimate import ImportanceProposal, draw_noise


class EstimateSpread(NamedTuple):
    """Running summaries of replicate log estimates, one entry per number of importance draws ``q = 1 .. S``.

    Attributes
    ----------
    draws : numpy.ndarray, shape (S,)
        ``q``.
    mean, sd, variance, p10, median, p90 : numpy.ndarray, shape (S,)
        Of the replicates' ``log p_hat`` from their first ``q`` draws.
    """

    draws: np.ndarray
    mean: np.ndarray
    sd: np.ndarray
    variance: np.ndarray
    p10: np.ndarray
    median: np.ndarray
    p90: np.ndarray


def estimate_spread(problem: GPLVMProblem, proposal: ImportanceProposal, theta, num_importance: int, replicates: int,
                    rng_key, *, chunk: int = 50) -> EstimateSpread:
    """Replicate estimates of ``log p(Y | X, theta)`` and their running summaries over the number of draws.

    Parameters
    ----------
    problem : GPLVMProblem
    proposal : ImportanceProposal
        As the chains use it (:func:`~gpdsl.inference.mcmc.gplvm_estimate.make_estimate`).
    theta : array_like, shape (P,)
        Unconstrained hyperparameters.
    num_importance : int
        Importance draws per replicate ``S``.
    replicates : int
        Independent estimates.
    rng_key : jax.Array
    chunk : int
        Replicates computed together.

    Returns
    -------
    EstimateSpread
    """
    theta = jnp.asarray(theta, dtype=float)
    fitted = proposal.fit(theta)

    @jax.jit
    def running(keys):
        def one(key):
            noise = draw_noise(key, num_importance, problem.latent_dim, problem.num_points)
            log_weights = proposal.log_weights(theta, fitted, noise)
            log_weights = jnp.where(jnp.isnan(log_weights), -jnp.inf, log_weights)
            return jax.lax.cumlogsumexp(log_weights) - jnp.log(jnp.arange(1, num_importance + 1))
        return jax.lax.map(one, keys)

    keys = jax.random.split(rng_key, replicates)
    logs = np.concatenate([np.asarray(running(keys[start:start + chunk]))
                           for start in range(0, replicates, chunk)])
    p10, median, p90 = np.percentile(logs, [10, 50, 90], axis=0)
    variance = logs.var(axis=0, ddof=1) if replicates > 1 else np.full(num_importance, math.nan)
    return EstimateSpread(np.arange(1, num_importance + 1), logs.mean(axis=0), np.sqrt(variance), variance, p10,
                          median, p90)
