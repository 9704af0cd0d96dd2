"""Maps from the unconstrained space to bounded parameters, with log-Jacobians (Stan's transforms)."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def constrain(z, lower=None, upper=None):
    """Map unconstrained ``z`` to the bounded space and return ``(x, log_abs_det_jacobian)``.

    As in Stan: ``lower + exp(z)``; ``upper - exp(z)``; ``lower + (upper - lower) * inv_logit(z)``;
    the identity without bounds. Bounds broadcast against ``z``. The log-Jacobian is summed.
    """
    if lower is None and upper is None:
        return z, jnp.zeros(())
    if upper is None:
        return lower + jnp.exp(z), jnp.sum(z)
    if lower is None:
        return upper - jnp.exp(z), jnp.sum(z)
    width = upper - lower
    x = lower + width * jax.nn.sigmoid(z)
    log_jac = jnp.log(width) + jax.nn.log_sigmoid(z) + jax.nn.log_sigmoid(-z)
    return x, jnp.sum(jnp.broadcast_to(log_jac, jnp.shape(z)))


def unconstrain(x, lower=None, upper=None):
    """Inverse of :func:`constrain` (without the Jacobian)."""
    x = jnp.asarray(x)
    if lower is None and upper is None:
        return x
    if upper is None:
        return jnp.log(x - lower)
    if lower is None:
        return jnp.log(upper - x)
    p = (x - lower) / (upper - lower)
    return jnp.log(p) - jnp.log1p(-p)
