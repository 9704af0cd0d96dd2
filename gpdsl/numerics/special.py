"""Special functions the engines evaluate in their inner loops, faster than the generic ones.

``log_ndtr`` is the log of the standard normal CDF, the probit log likelihood. JAX's
``jax.scipy.special.log_ndtr`` evaluates three branches and ``ndtr``'s ``erf`` and ``erfc`` for every
element; in float64 on CPU it costs about 50 ns per element, which made it a tenth of the cost of a
pseudo-marginal proposal (64 importance samples of 200 latent values). The version here needs one
``erfc`` of ``|x|`` and is as accurate.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax

import gpdsl.numerics.float64  # noqa: F401

_SQRT_HALF = 1.0 / math.sqrt(2.0)
_HALF_LOG_TWO_PI = 0.5 * math.log(2.0 * math.pi)
_ASYMPTOTIC_BELOW = -30.0


@jax.custom_jvp
def log_ndtr(x):
    """``log Phi(x)``, the log of the standard normal CDF, elementwise.

    ``Phi(-|x|) = erfc(|x| / sqrt(2)) / 2`` gives ``log Phi(x)`` as its log (``x <= 0``) or as
    ``log1p(-Phi(-x))`` (``x > 0``, the same ``log`` with Goldberg's correction); below ``x = -30``,
    where ``erfc`` nears underflow, the asymptotic series
    ``log Phi(x) = -x^2/2 - log(-x) - log(2 pi)/2 + log(1 - 1/x^2 + 3/x^4 - 15/x^6 + 105/x^8)``
    is used. Relative error below 1e-12 against SciPy's ``log_ndtr`` on [-1e3, 36] (tests/test_special.py).
    The derivative is ``phi(x) / Phi(x)``, evaluated in the log domain.

    Parameters
    ----------
    x : array_like

    Returns
    -------
    jax.Array
        Same shape as ``x``, float64.
    """
    x = jnp.asarray(x, dtype=jnp.float64)
    lower_tail = 0.5 * lax.erfc(jnp.abs(x) * _SQRT_HALF)
    upper, far = x > 0.0, x < _ASYMPTOTIC_BELOW
    cdf = jnp.where(upper, 1.0 - lower_tail, lower_tail)
    tail_x = jnp.minimum(x, _ASYMPTOTIC_BELOW)
    inverse_square = 1.0 / (tail_x * tail_x)
    series = 1.0 + inverse_square * (-1.0 + inverse_square * (3.0 + inverse_square * (-15.0 + 105.0 * inverse_square)))
    log_argument = jnp.where(far, series * jnp.sqrt(inverse_square), cdf)
    log_value = jnp.log(log_argument)
    # x > 0: log1p(-lower_tail) from the same log (Goldberg's correction; exact where cdf rounds to 1)
    log1p_value = jnp.where(cdf == 1.0, -lower_tail, log_value * (lower_tail / (1.0 - cdf)))
    return jnp.where(far, log_value - 0.5 * tail_x * tail_x - _HALF_LOG_TWO_PI,
                     jnp.where(upper, log1p_value, log_value))


@log_ndtr.defjvp
def _log_ndtr_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    value = log_ndtr(x)
    return value, inverse_mills(x, value) * dx


def inverse_mills(x, log_cdf=None):
    """``phi(x) / Phi(x)``, the derivative of :func:`log_ndtr`, without overflow or 0/0.

    Parameters
    ----------
    x : array_like
    log_cdf : array_like, optional
        ``log_ndtr(x)`` if already computed.

    Returns
    -------
    jax.Array
    """
    x = jnp.asarray(x, dtype=jnp.float64)
    log_cdf = log_ndtr(x) if log_cdf is None else log_cdf
    return jnp.exp(-0.5 * x * x - _HALF_LOG_TWO_PI - log_cdf)
