"""Arithmetic on batches of small matrices held as nested tuples of arrays.

A ``d x d`` matrix is a tuple of ``d`` rows, each a tuple of ``d`` arrays of one shape (the batch: points,
latent dimensions, ...); a vector is a tuple of ``d`` arrays. Written out entry by entry, the arithmetic
fuses into a few elementwise loops over the batch; batched ``(..., d, d)`` arrays made XLA on CPU run
thousands of tiny matrix products one by one. Plain numbers may stand for entries.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def mm(a, b):
    """The product ``a b``."""
    d = len(a)
    return tuple(tuple(sum(a[i][k] * b[k][j] for k in range(d)) for j in range(d)) for i in range(d))


def mv(a, v):
    """The product ``a v`` of a matrix and a vector."""
    return tuple(sum(a[i][k] * v[k] for k in range(len(a))) for i in range(len(a)))


def transpose(a):
    """``a^T``."""
    return tuple(tuple(a[j][i] for j in range(len(a))) for i in range(len(a)))


def add(a, b):
    """``a + b`` for matrices or vectors."""
    return jax.tree_util.tree_map(jnp.add, a, b)


def neg(a):
    """``-a`` for a matrix or a vector."""
    return jax.tree_util.tree_map(jnp.negative, a)


def eye_plus(a):
    """``I + a``."""
    return tuple(tuple(a[i][j] + 1.0 if i == j else a[i][j] for j in range(len(a))) for i in range(len(a)))


def sandwich(b, x):
    """``b x b^T``."""
    return mm(mm(b, x), transpose(b))


def symmetric_sandwich(b, x):
    """``b x b^T`` for a symmetric ``x``, only its entries on and above the diagonal computed (mirrored below)."""
    bx = mm(b, x)
    return symmetric(lambda i, j: sum(bx[i][k] * b[j][k] for k in range(len(b))), len(b))


def outer(u, v):
    """``u v^T``."""
    return tuple(tuple(u[i] * v[j] for j in range(len(v))) for i in range(len(u)))


def quadratic(u, x):
    """``u^T x u``."""
    return sum(u[i] * x[i][j] * u[j] for i in range(len(u)) for j in range(len(u)))


def upper(a):
    """The entries ``a[i][j]``, ``i <= j``, of a symmetric matrix, row by row: all it stores."""
    return tuple(a[i][j] for i in range(len(a)) for j in range(i, len(a)))


def from_upper(entries):
    """The symmetric matrix of :func:`upper`'s entries, each entry below the diagonal the one above it."""
    d = int(round(((8 * len(entries) + 1) ** 0.5 - 1) / 2))
    where = {pair: k for k, pair in enumerate((i, j) for i in range(d) for j in range(i, d))}
    return tuple(tuple(entries[where[min(i, j), max(i, j)]] for j in range(d)) for i in range(d))


def symmetric(entry, d: int):
    """The symmetric ``d x d`` matrix whose entries ``i <= j`` are ``entry(i, j)``, mirrored below the diagonal."""
    return from_upper(tuple(entry(i, j) for i in range(d) for j in range(i, d)))


def small_inverse(M):
    """Inverse of a ``1 x 1``, ``2 x 2`` or ``3 x 3`` matrix of arrays (nested tuples) by cofactors."""
    d = len(M)
    if d == 1:
        return ((1.0 / M[0][0],),)
    if d == 2:
        (a, b), (c, e) = M
        r = 1.0 / (a * e - b * c)
        return ((e * r, -b * r), (-c * r, a * r))
    if d == 3:
        def cofactor(i, j):
            r = [k for k in range(3) if k != i]
            c = [k for k in range(3) if k != j]
            minor = M[r[0]][c[0]] * M[r[1]][c[1]] - M[r[0]][c[1]] * M[r[1]][c[0]]
            return minor if (i + j) % 2 == 0 else -minor

        cof = [[cofactor(i, j) for j in range(3)] for i in range(3)]
        r = 1.0 / (M[0][0] * cof[0][0] + M[0][1] * cof[0][1] + M[0][2] * cof[0][2])
        return tuple(tuple(cof[j][i] * r for j in range(3)) for i in range(3))
    raise ValueError(f"small_inverse handles d <= 3, got {d}")


def to_tuples(a):
    """A ``(..., d, d)`` array of matrices as a nested tuple of ``(...)`` arrays."""
    return tuple(tuple(a[..., i, j] for j in range(a.shape[-1])) for i in range(a.shape[-2]))


def from_tuples(a):
    """The inverse of :func:`to_tuples`: a ``(..., d, d)`` array."""
    return jnp.stack([jnp.stack(row, axis=-1) for row in a], axis=-2)
