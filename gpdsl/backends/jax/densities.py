"""Log densities of the language's distributions and likelihoods, elementwise then summed."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy import special, stats

from gpdsl.special import log_ndtr


def _ssn(x, lower, upper, mu, sigma):
    width = upper - lower
    p = (x - lower) / width
    z = jnp.log(p) - jnp.log1p(-p)
    return stats.norm.logpdf(z, mu, sigma) + jnp.log(width) - jnp.log(x - lower) - jnp.log(upper - x)


PRIOR_LOGPDF = {
    "normal": lambda x, mu, sigma: stats.norm.logpdf(x, mu, sigma),
    "lognormal": lambda x, mu, sigma: stats.norm.logpdf(jnp.log(x), mu, sigma) - jnp.log(x),
    "gamma": lambda x, shape, rate: stats.gamma.logpdf(x, shape, scale=1.0 / rate),
    "inv_gamma": lambda x, shape, scale: (shape * jnp.log(scale) - special.gammaln(shape)
                                          - (shape + 1) * jnp.log(x) - scale / x),
    "half_normal": lambda x, sigma: stats.norm.logpdf(x, 0.0, sigma) + jnp.log(2.0),
    "student_t": lambda x, nu, mu, sigma: stats.t.logpdf(x, nu, mu, sigma),
    "uniform": lambda x, lower, upper: jnp.zeros_like(x) - jnp.log(upper - lower),
    "scaled_sigmoid_normal": _ssn,
}
"""Log density of each prior as a function of the variate and its parameters (in catalog order)."""


def _bernoulli_probit(y, f):
    return log_ndtr((2.0 * y - 1.0) * f)


def _bernoulli_logit(y, f):
    return -jax.nn.softplus(-(2.0 * y - 1.0) * f)


def _poisson_log(y, eta):
    return y * eta - jnp.exp(eta) - special.gammaln(y + 1.0)


LIKELIHOOD_LOGPDF = {
    "normal": lambda y, mu, sigma: stats.norm.logpdf(y, mu, sigma),
    "bernoulli_probit": _bernoulli_probit,
    "bernoulli_logit": _bernoulli_logit,
    "poisson_log": _poisson_log,
}
"""Log likelihood of each observation model, elementwise."""


def log_density(table: dict, name: str, x, args) -> jax.Array:
    """Sum of the elementwise log density ``table[name](x, *args)``."""
    return jnp.sum(table[name](x, *args))
