"""The negative binomial likelihood of counts with a log link, ``y ~ neg_binomial_2_log(eta, phi)``.

Stan's parameterisation: mean ``mu = exp(eta)``, variance ``mu + mu^2 / phi``; ``phi`` is the inverse
overdispersion (``phi -> inf`` is Poisson). Log-concave in ``eta``, with
``d/d eta log p = y - (y + phi) inv_logit(eta - log phi)`` and ``W = (y + phi) p (1 - p)`` for
``p = inv_logit(eta - log phi)``.
"""

from __future__ import annotations

from gpdsl.likelihoods.base import Likelihood, StanArguments, count_check


def _log_density(y, eta, phi):
    import jax.numpy as jnp
    from jax.scipy import special

    log_phi = jnp.log(phi)
    return (special.gammaln(y + phi) - special.gammaln(y + 1.0) - special.gammaln(phi)
            + y * eta + phi * log_phi - (y + phi) * jnp.logaddexp(eta, log_phi))


def _derivatives(y, eta, phi):
    import jax
    import jax.numpy as jnp

    p = jax.nn.sigmoid(eta - jnp.log(phi))
    return jnp.sum(_log_density(y, eta, phi)), y - (y + phi) * p, (y + phi) * p * (1.0 - p)


def _sample(key, shape, eta, phi):
    import jax
    import jax.numpy as jnp

    gamma_key, poisson_key = jax.random.split(key)
    rate = jax.random.gamma(gamma_key, jnp.broadcast_to(phi, shape)) / phi * jnp.exp(eta)
    return jax.random.poisson(poisson_key, rate, shape).astype(jnp.int64)


def _stan(y: str, args: StanArguments, vectorised: bool) -> str:
    return f"neg_binomial_2_log_lpmf({y} | {args['eta'][0]}, {args['phi'][0]})"


def _stan_rng(args: StanArguments) -> str:
    return f"neg_binomial_2_log_rng({args['eta'][0]}, {args['phi'][0]})"


NEG_BINOMIAL_2_LOG = Likelihood(
    "neg_binomial_2_log", ("eta", "phi"), "count",
    "mean exp(eta), variance exp(eta) + exp(eta)^2 / phi",
    log_density=_log_density, stan=_stan, stan_rng=_stan_rng, sample=_sample, derivatives=_derivatives,
    param_support={"phi": "positive"}, invalid_observations=count_check)
"""Overdispersed counts; the Laplace approximation supports them (log-concave in ``eta``)."""
