"""Maps from the unconstrained space to bounded parameters, Cholesky factors of correlation matrices and
simplexes, with log-Jacobians (Stan's transforms)."""

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


def cholesky_corr_free_size(K: int) -> int:
    """The number of unconstrained coordinates of a ``K x K`` Cholesky factor of a correlation matrix."""
    return K * (K - 1) // 2


def cholesky_corr_constrain(z, K: int):
    """Map ``K (K - 1) / 2`` unconstrained values to the Cholesky factor of a correlation matrix, as Stan does.

    Each ``z`` becomes a canonical partial correlation ``w = tanh(z)``; row ``i`` of ``L`` is built left to right,
    ``L[i, j] = w sqrt(1 - sum_{l<j} L[i, l]^2)``, and its diagonal closes it to unit length. The coordinates
    fill the strict lower triangle row by row (Stan's order). Returns ``(L, log_abs_det_jacobian)``: the
    log-Jacobian of the map from ``z`` to the strict lower triangle, ``sum log(1 - w^2)`` plus
    ``1/2 log(1 - sum_{l<j} L[i, l]^2)`` for each entry after the first of a row.
    """
    w = jnp.tanh(jnp.asarray(z))
    log_jac = jnp.sum(jnp.log1p(-jnp.square(w)))
    rows = [jnp.ones((1,))]
    position = 0
    for i in range(1, K):
        entries, sum_squares = [], jnp.zeros(())
        for j in range(i):
            if j > 0:
                log_jac = log_jac + 0.5 * jnp.log1p(-sum_squares)
            entry = w[position] * jnp.sqrt(1.0 - sum_squares)
            position += 1
            entries.append(entry)
            sum_squares = sum_squares + jnp.square(entry)
        rows.append(jnp.stack(entries + [jnp.sqrt(1.0 - sum_squares)]))
    L = jnp.stack([jnp.concatenate([row, jnp.zeros(K - len(row))]) for row in rows])
    return L, log_jac


def cholesky_corr_unconstrain(L):
    """Inverse of :func:`cholesky_corr_constrain` (without the Jacobian): the flat unconstrained vector."""
    L = jnp.asarray(L)
    K = L.shape[-1]
    values = []
    for i in range(1, K):
        sum_squares = jnp.zeros(())
        for j in range(i):
            values.append(jnp.arctanh(L[i, j] / jnp.sqrt(1.0 - sum_squares)))
            sum_squares = sum_squares + jnp.square(L[i, j])
    return jnp.stack(values) if values else jnp.zeros((0,))


def simplex_free_size(K: int) -> int:
    """The number of unconstrained coordinates of a ``K``-simplex."""
    return K - 1


def simplex_constrain(z):
    """Map ``K - 1`` unconstrained values to a ``K``-simplex by Stan's centred stick-breaking (Stan 2.35).

    Entry ``k`` (0-based) takes the share ``inv_logit(z_k - log(K - 1 - k))`` of the stick left after the
    earlier entries, so ``z = 0`` gives the uniform simplex; the last entry is what is left. Returns
    ``(x, log_abs_det_jacobian)``: the log-Jacobian of the map from ``z`` to the first ``K - 1`` entries,
    ``sum_k [log(stick_k) + log(share_k) + log(1 - share_k)]``.
    """
    z = jnp.asarray(z)
    Km1 = z.shape[-1]
    adjusted = z - jnp.log(jnp.arange(Km1, 0, -1, dtype=z.dtype))
    log_share, log_rest = jax.nn.log_sigmoid(adjusted), jax.nn.log_sigmoid(-adjusted)
    log_stick = jnp.concatenate([jnp.zeros(1, dtype=z.dtype), jnp.cumsum(log_rest)])
    x = jnp.concatenate([jnp.exp(log_stick[:-1] + log_share), jnp.exp(log_stick[-1:])])
    log_jac = jnp.sum(log_stick[:-1] + log_share + log_rest)
    return x, log_jac


def simplex_unconstrain(x):
    """Inverse of :func:`simplex_constrain` (without the Jacobian): the ``K - 1`` unconstrained values."""
    x = jnp.asarray(x)
    Km1 = x.shape[-1] - 1
    stick = 1.0 - jnp.concatenate([jnp.zeros(1, dtype=x.dtype), jnp.cumsum(x[:-1])])[:-1]
    share = x[:-1] / stick
    return jnp.log(share) - jnp.log1p(-share) + jnp.log(jnp.arange(Km1, 0, -1, dtype=x.dtype))
