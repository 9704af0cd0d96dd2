"""The normal prior and the two priors built from it: ``lognormal`` and ``half_normal``."""

from __future__ import annotations

from gpdsl.priors.base import Prior, StanArguments, ZSpace, lpdf, stan_lpdf


def _normal_log_density(x, mu, sigma):
    from jax.scipy import stats

    return stats.norm.logpdf(x, mu, sigma)


def _normal_sample(key, shape, mu, sigma):
    import jax

    return mu + sigma * jax.random.normal(key, shape)


def _normal_cdf(x, mu, sigma):
    from jax.scipy import special

    return special.ndtr((x - mu) / sigma)


def _lognormal_log_density(x, mu, sigma):
    import jax.numpy as jnp
    from jax.scipy import stats

    return stats.norm.logpdf(jnp.log(x), mu, sigma) - jnp.log(x)


def _lognormal_sample(key, shape, mu, sigma):
    import jax
    import jax.numpy as jnp

    return jnp.exp(mu + sigma * jax.random.normal(key, shape))


def _lognormal_cdf(x, mu, sigma):
    import jax.numpy as jnp

    return _normal_cdf(jnp.log(jnp.maximum(x, 0.0)), mu, sigma)


def _half_normal_log_density(x, sigma):
    import jax.numpy as jnp
    from jax.scipy import stats

    return stats.norm.logpdf(x, 0.0, sigma) + jnp.log(2.0)


def _half_normal_sample(key, shape, sigma):
    import jax
    import jax.numpy as jnp

    return jnp.abs(sigma * jax.random.normal(key, shape))


def _half_normal_cdf(x, sigma):
    import jax.numpy as jnp
    from jax.scipy import special

    return special.erf(jnp.maximum(x, 0.0) / (sigma * jnp.sqrt(2.0)))


def _half_normal_stan(x: str, args: StanArguments, count: str | None) -> str:
    times = "" if count is None else f"{count} * "
    return f"{lpdf('normal', x, ['0', args['sigma'][0]])} + {times}log2()"


NORMAL = Prior("normal", ("mu", "sigma"), "mean mu, standard deviation sigma",
               log_density=_normal_log_density, sample=_normal_sample, stan=stan_lpdf("normal", ("mu", "sigma")),
               arg_support={"sigma": "positive"}, z_space=ZSpace("unbounded", "without bounds"), cdf=_normal_cdf,
               centre="mu")
"""Gaussian values; Gaussian in z-space on an unbounded parameter."""

LOGNORMAL = Prior("lognormal", ("mu", "sigma"), "log(x) ~ normal(mu, sigma)",
                  log_density=_lognormal_log_density, sample=_lognormal_sample,
                  stan=stan_lpdf("lognormal", ("mu", "sigma")), support="positive",
                  arg_support={"sigma": "positive"}, z_space=ZSpace("positive", "with <lower=0>"), cdf=_lognormal_cdf)
"""Positive values whose log is Gaussian; Gaussian in z-space on a parameter declared ``<lower=0>``."""

HALF_NORMAL = Prior("half_normal", ("sigma",), "|z| with z ~ normal(0, sigma); needs <lower=0>",
                    log_density=_half_normal_log_density, sample=_half_normal_sample, stan=_half_normal_stan,
                    support="positive", arg_support={"sigma": "positive"}, cdf=_half_normal_cdf)
"""The absolute value of a zero-mean normal; Stan has no ``half_normal_lpdf``, so it is the normal's plus log 2."""
