"""The gamma prior (shape and rate) and the inverse gamma prior (shape and scale)."""

from __future__ import annotations

from gpdsl.priors.base import Prior, stan_lpdf


def _gamma_log_density(x, shape, rate):
    from jax.scipy import stats

    return stats.gamma.logpdf(x, shape, scale=1.0 / rate)


def _gamma_sample(key, shape, shape_, rate):
    import jax
    import jax.numpy as jnp

    return jax.random.gamma(key, jnp.broadcast_to(shape_, shape)) / rate


def _gamma_cdf(x, shape, rate):
    import jax.numpy as jnp
    from jax.scipy import special

    return special.gammainc(shape, rate * jnp.maximum(x, 0.0))


def _inv_gamma_log_density(x, shape, scale):
    import jax.numpy as jnp
    from jax.scipy import special

    return shape * jnp.log(scale) - special.gammaln(shape) - (shape + 1) * jnp.log(x) - scale / x


def _inv_gamma_sample(key, shape, shape_, scale):
    import jax
    import jax.numpy as jnp

    return scale / jax.random.gamma(key, jnp.broadcast_to(shape_, shape))


def _inv_gamma_cdf(x, shape, scale):
    import jax.numpy as jnp
    from jax.scipy import special

    return special.gammaincc(shape, scale / jnp.maximum(x, 0.0))


GAMMA = Prior("gamma", ("shape", "rate"),
              "density rate^shape / Gamma(shape) x^(shape-1) exp(-rate x); mean shape/rate",
              log_density=_gamma_log_density, sample=_gamma_sample, stan=stan_lpdf("gamma", ("shape", "rate")),
              support="positive", arg_support={"shape": "positive", "rate": "positive"}, cdf=_gamma_cdf)
"""Positive values with shape and rate (Stan's parameterisation)."""

INV_GAMMA = Prior("inv_gamma", ("shape", "scale"), "1/x ~ gamma(shape, rate=scale); mean scale/(shape-1)",
                  log_density=_inv_gamma_log_density, sample=_inv_gamma_sample,
                  stan=stan_lpdf("inv_gamma", ("shape", "scale")), support="positive",
                  arg_support={"shape": "positive", "scale": "positive"}, cdf=_inv_gamma_cdf)
"""Positive values whose inverse is gamma with rate ``scale``."""
