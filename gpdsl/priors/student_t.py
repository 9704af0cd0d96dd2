"""The Student-t prior, ``x ~ student_t(nu, mu, sigma)`` (Stan's parameterisation)."""

from __future__ import annotations

from gpdsl.priors.base import Prior, stan_lpdf


def _log_density(x, nu, mu, sigma):
    from jax.scipy import stats

    return stats.t.logpdf(x, nu, mu, sigma)


def _sample(key, shape, nu, mu, sigma):
    import jax

    return mu + sigma * jax.random.t(key, nu, shape)


def _cdf(x, nu, mu, sigma):
    import jax.numpy as jnp
    from jax.scipy import special

    t = (x - mu) / sigma
    tail = 0.5 * special.betainc(nu / 2, 0.5, nu / (nu + t * t))
    return jnp.where(t < 0, tail, 1.0 - tail)


STUDENT_T = Prior("student_t", ("nu", "mu", "sigma"), "degrees of freedom nu, location mu, scale sigma",
                  log_density=_log_density, sample=_sample, stan=stan_lpdf("student_t", ("nu", "mu", "sigma")),
                  arg_support={"nu": "positive", "sigma": "positive"}, cdf=_cdf, centre="mu")
"""Heavy-tailed real values around ``mu``."""
