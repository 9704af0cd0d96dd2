"""The Cauchy prior (location and scale; half-Cauchy on a parameter declared ``<lower=0>``) and the beta prior."""

from __future__ import annotations

from gpdsl.priors.base import Prior, stan_lpdf


def _cauchy_log_density(x, mu, sigma):
    from jax.scipy import stats

    return stats.cauchy.logpdf(x, mu, sigma)


def _cauchy_sample(key, shape, mu, sigma):
    import jax

    return mu + sigma * jax.random.cauchy(key, shape)


def _cauchy_cdf(x, mu, sigma):
    import jax.numpy as jnp

    return 0.5 + jnp.arctan((x - mu) / sigma) / jnp.pi


def _beta_log_density(x, alpha, beta):
    import jax.numpy as jnp
    from jax.scipy import special

    inside = ((alpha - 1) * jnp.log(x) + (beta - 1) * jnp.log1p(-x)
              - special.gammaln(alpha) - special.gammaln(beta) + special.gammaln(alpha + beta))
    return jnp.where((x > 0) & (x < 1), inside, -jnp.inf)


def _beta_sample(key, shape, alpha, beta):
    import jax
    import jax.numpy as jnp

    return jax.random.beta(key, jnp.broadcast_to(alpha, shape), jnp.broadcast_to(beta, shape))


def _beta_cdf(x, alpha, beta):
    import jax.numpy as jnp
    from jax.scipy import special

    return special.betainc(alpha, beta, jnp.clip(x, 0.0, 1.0))


CAUCHY = Prior("cauchy", ("mu", "sigma"),
               "density 1 / (pi sigma (1 + ((x - mu)/sigma)^2)); half-Cauchy on a parameter declared <lower=0>",
               log_density=_cauchy_log_density, sample=_cauchy_sample, stan=stan_lpdf("cauchy", ("mu", "sigma")),
               arg_support={"sigma": "positive"}, cdf=_cauchy_cdf, centre="mu")
"""Heavy-tailed real values around ``mu`` with no mean (Stan's ``cauchy(mu, sigma)``)."""

BETA = Prior("beta", ("alpha", "beta"),
             "density x^(alpha-1) (1-x)^(beta-1) / B(alpha, beta); mean alpha/(alpha+beta)",
             log_density=_beta_log_density, sample=_beta_sample, stan=stan_lpdf("beta", ("alpha", "beta")),
             support="unit", arg_support={"alpha": "positive", "beta": "positive"}, cdf=_beta_cdf)
"""Values in ``(0, 1)`` with shapes ``alpha`` and ``beta`` (Stan's parameterisation)."""
