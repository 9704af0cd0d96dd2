"""Log densities of the language's priors, elementwise then summed.

Each prior's density is that of its object in :mod:`gpdsl.priors`, as the likelihoods' are those of
their objects in :mod:`gpdsl.likelihoods`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from gpdsl.priors import PRIORS

PRIOR_LOGPDF = {name: prior.log_density for name, prior in PRIORS.items()}
"""Log density of each prior as a function of the variate and its parameters (in catalog order)."""


def log_density(table: dict, name: str, x, args) -> jax.Array:
    """Sum of the elementwise log density ``table[name](x, *args)``."""
    return jnp.sum(table[name](x, *args))
