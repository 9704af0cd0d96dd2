"""Example external likelihoods (:mod:`gpdsl.externals`), for the tests and the docs.

Each returns ``log N(y; mean, sigma^2 I)``: :func:`normal_jax` in JAX (compiled with the model),
:func:`normal_numpy` in SciPy (run through a host callback); :func:`failing` raises, and
:func:`normal_numpy_checked` raises on an observation beyond 100.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax.scipy import stats
from scipy import stats as scipy_stats


def normal_jax(y, mean, sigma):
    """``sum log N(y_i; mean_i, sigma^2)`` in JAX."""
    return jnp.sum(stats.norm.logpdf(y, mean, sigma))


def normal_numpy(y, mean, sigma):
    """``sum log N(y_i; mean_i, sigma^2)`` in SciPy (not JAX-traceable)."""
    return float(np.sum(scipy_stats.norm.logpdf(np.asarray(y), np.asarray(mean), float(sigma))))


def failing(y, *args):
    """Raises, to show how a failing external likelihood is reported."""
    raise ValueError("the pricer did not converge")


def normal_numpy_checked(y, mean, sigma):
    """:func:`normal_numpy`, raising on an observation beyond 100 in absolute value (a failure at one step)."""
    if np.any(np.abs(np.asarray(y)) > 100):
        raise ValueError("observation out of range")
    return normal_numpy(y, mean, sigma)
