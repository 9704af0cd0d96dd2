"""The binomial likelihood with a logit link, ``y ~ binomial_logit(trials, eta)`` (Stan's spelling).

``y`` successes out of ``trials`` (integer data, scalar or one per observation), each with probability
``inv_logit(eta)``. Log-concave in ``eta``: gradient ``y - trials p``, ``W = trials p (1 - p)``.
"""

from __future__ import annotations

from gpdsl.likelihoods.base import Likelihood, StanArguments


def _log_density(y, trials, eta):
    import jax
    from jax.scipy import special

    log_choose = special.gammaln(trials + 1.0) - special.gammaln(y + 1.0) - special.gammaln(trials - y + 1.0)
    return log_choose + y * eta - trials * jax.nn.softplus(eta)


def _derivatives(y, eta, trials):
    import jax
    import jax.numpy as jnp

    p = jax.nn.sigmoid(eta)
    return jnp.sum(_log_density(y, trials, eta)), y - trials * p, trials * p * (1.0 - p)


def _sample(key, shape, trials, eta):
    import jax
    import jax.numpy as jnp

    n = jnp.broadcast_to(jnp.asarray(trials, dtype=float), shape)
    return jax.random.binomial(key, n, jax.nn.sigmoid(jnp.broadcast_to(eta, shape)), shape).astype(jnp.int64)


def _stan(y: str, args: StanArguments, vectorised: bool) -> str:
    return f"binomial_logit_lpmf({y} | {args['trials'][0]}, {args['eta'][0]})"


def _stan_rng(args: StanArguments) -> str:
    return f"binomial_rng({args['trials'][0]}, inv_logit({args['eta'][0]}))"


def _invalid(y, args):
    import numpy as np

    trials = args.get("trials")
    if trials is None:
        return y < 0, "a count from 0 to trials"
    return (y < 0) | (y > np.broadcast_to(trials, np.shape(y))), "a count from 0 to trials"


BINOMIAL_LOGIT = Likelihood(
    "binomial_logit", ("trials", "eta"), "count", "successes out of trials, each with probability inv_logit(eta)",
    log_density=_log_density, stan=_stan, stan_rng=_stan_rng, sample=_sample, derivatives=_derivatives,
    param_support={"trials": "count"}, latent="eta", integer_params=("trials",), invalid_observations=_invalid)
"""Successes out of integer ``trials``; the Laplace approximation supports it (log-concave in ``eta``)."""
