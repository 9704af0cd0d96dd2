"""Priors on an interval ``(lower, upper)``: ``uniform`` and ``scaled_sigmoid_normal`` (Tegner et al. 2018, eq. 9).

Their bounds are implied on the parameter when it does not declare them.
"""

from __future__ import annotations

from gpdsl.priors.base import Prior, StanArguments, ZSpace, lpdf, stan_lpdf

_SSN_PARAMS = ("lower", "upper", "mu", "sigma")


def _uniform_log_density(x, lower, upper):
    import jax.numpy as jnp

    return jnp.zeros_like(x) - jnp.log(upper - lower)


def _uniform_sample(key, shape, lower, upper):
    import jax

    return lower + (upper - lower) * jax.random.uniform(key, shape)


def _uniform_cdf(x, lower, upper):
    import jax.numpy as jnp

    return jnp.clip((x - lower) / (upper - lower), 0.0, 1.0)


def _ssn_log_density(x, lower, upper, mu, sigma):
    import jax.numpy as jnp
    from jax.scipy import stats

    width = upper - lower
    p = (x - lower) / width
    z = jnp.log(p) - jnp.log1p(-p)
    return stats.norm.logpdf(z, mu, sigma) + jnp.log(width) - jnp.log(x - lower) - jnp.log(upper - x)


def _ssn_sample(key, shape, lower, upper, mu, sigma):
    import jax

    return lower + (upper - lower) * jax.nn.sigmoid(mu + sigma * jax.random.normal(key, shape))


def _ssn_cdf(x, lower, upper, mu, sigma):
    import jax.numpy as jnp
    from jax.scipy import special

    p = _uniform_cdf(x, lower, upper)
    return special.ndtr((jnp.log(p) - jnp.log1p(-p) - mu) / sigma)


def _ssn_stan(x: str, args: StanArguments, count: str | None) -> str:
    """Stan's ``scaled_sigmoid_normal_lpdf`` (from the template library) takes vectors for a vector variate."""
    values = [args[p][0] if count is None or args[p][1] else f"rep_vector({args[p][0]}, {count})"
              for p in _SSN_PARAMS]
    return lpdf("scaled_sigmoid_normal", x, values)


UNIFORM = Prior("uniform", ("lower", "upper"), "uniform on (lower, upper); the bounds are implied if not declared",
                log_density=_uniform_log_density, sample=_uniform_sample, stan=stan_lpdf("uniform", ("lower", "upper")),
                support="bounded", ordered=("lower", "upper"), cdf=_uniform_cdf)
"""Flat on ``(lower, upper)``."""

SCALED_SIGMOID_NORMAL = Prior(
    "scaled_sigmoid_normal", _SSN_PARAMS,
    "x = lower + (upper - lower) * inv_logit(z), z ~ normal(mu, sigma) (Tegner et al. 2018, eq. 9); "
    "defaults mu = 0, sigma = 1.5",
    log_density=_ssn_log_density, sample=_ssn_sample, stan=_ssn_stan, defaults={"mu": 0.0, "sigma": 1.5},
    support="bounded", arg_support={"sigma": "positive"}, ordered=("lower", "upper"), z_space=ZSpace("bounds"),
    cdf=_ssn_cdf)
"""A normal ``z`` through a scaled logistic sigmoid: Gaussian in z-space on the interval it implies."""
