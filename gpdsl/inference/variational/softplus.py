"""The softplus map the variational optimiser moves positive quantities through, as GPy does."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

SOFTPLUS_CUTOFF = 30.0


def log_softplus(x, xp=jnp):
    """``log(softplus(x))``, equal to ``x`` below ``-30`` (where ``softplus(x) = exp(x)`` to double precision).

    Parameters
    ----------
    x : array_like
        Unconstrained coordinates.
    xp : module
        ``jax.numpy`` (traced or not) or ``numpy``.

    Returns
    -------
    array
        The log of the positive quantities.
    """
    return xp.where(x < -SOFTPLUS_CUTOFF, x,
                    xp.log(xp.logaddexp(xp.maximum(x, -SOFTPLUS_CUTOFF), 0.0)))


def inverse_softplus(y, xp=np):
    """The coordinate ``x`` with ``softplus(x) = y`` (``y`` itself above 30).

    Parameters
    ----------
    y : array_like
        Positive quantities.
    xp : module
        ``numpy`` (the default) or ``jax.numpy`` (traceable).

    Returns
    -------
    numpy.ndarray or jax.Array
    """
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        return xp.where(y > SOFTPLUS_CUTOFF, y, xp.log(xp.expm1(xp.minimum(y, SOFTPLUS_CUTOFF))))
