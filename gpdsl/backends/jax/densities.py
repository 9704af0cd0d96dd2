"""Log densities of the language's priors, elementwise then summed.

Each prior's density is that of its object in :mod:`gpdsl.priors`, read from :data:`gpdsl.priors.PRIORS` when
called (so priors registered after import are known), as the likelihoods' are those of their objects in
:mod:`gpdsl.likelihoods`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from gpdsl.priors import PRIORS


def prior_log_density(name: str, x, args) -> jax.Array:
    """Sum of the elementwise log density of the prior ``name`` at ``x``, with parameter values ``args``."""
    return jnp.sum(PRIORS[name].log_density(x, *args))
