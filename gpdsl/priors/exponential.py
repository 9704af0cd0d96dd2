"""The exponential prior (rate) and the Weibull prior (shape and scale, Stan's parameterisation)."""

from __future__ import annotations

from gpdsl.priors.base import Prior, stan_lpdf


def _exponential_log_density(x, rate):
    import jax.numpy as jnp

    return jnp.where(x >= 0, jnp.log(rate) - rate * x, -jnp.inf)


def _exponential_sample(key, shape, rate):
    import jax

    return jax.random.exponential(key, shape) / rate


def _exponential_cdf(x, rate):
    import jax.numpy as jnp

    return -jnp.expm1(-rate * jnp.maximum(x, 0.0))


def _weibull_log_density(x, alpha, sigma):
    import jax.numpy as jnp

    z = jnp.maximum(x, 0.0) / sigma
    inside = jnp.log(alpha / sigma) + (alpha - 1) * jnp.log(z) - z ** alpha
    return jnp.where(x >= 0, inside, -jnp.inf)


def _weibull_sample(key, shape, alpha, sigma):
    import jax

    return sigma * jax.random.exponential(key, shape) ** (1.0 / alpha)


def _weibull_cdf(x, alpha, sigma):
    import jax.numpy as jnp

    return -jnp.expm1(-(jnp.maximum(x, 0.0) / sigma) ** alpha)


EXPONENTIAL = Prior("exponential", ("rate",), "density rate exp(-rate x); mean 1/rate",
                    log_density=_exponential_log_density, sample=_exponential_sample,
                    stan=stan_lpdf("exponential", ("rate",)), support="positive", arg_support={"rate": "positive"},
                    cdf=_exponential_cdf)
"""Positive values with rate ``rate`` (Stan's ``exponential(beta)``)."""

WEIBULL = Prior("weibull", ("alpha", "sigma"),
                "density (alpha/sigma) (x/sigma)^(alpha-1) exp(-(x/sigma)^alpha); mean sigma Gamma(1 + 1/alpha)",
                log_density=_weibull_log_density, sample=_weibull_sample,
                stan=stan_lpdf("weibull", ("alpha", "sigma")), support="positive",
                arg_support={"alpha": "positive", "sigma": "positive"}, cdf=_weibull_cdf)
"""Positive values with shape ``alpha`` and scale ``sigma`` (Stan's parameterisation)."""
