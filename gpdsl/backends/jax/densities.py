"""Log densities of the language's priors, elementwise then summed.

The likelihoods' densities are those of their objects in :mod:`gpdsl.likelihoods`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy import special, stats


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


def log_density(table: dict, name: str, x, args) -> jax.Array:
    """Sum of the elementwise log density ``table[name](x, *args)``."""
    return jnp.sum(table[name](x, *args))
