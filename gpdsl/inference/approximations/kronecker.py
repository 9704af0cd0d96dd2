"""A GP on a full grid of tuple inputs by Kronecker algebra: log marginal likelihood, posterior mean, prior draws.

A separable kernel ``k((t, x), (t', x')) = k_1(t, t') k_2(x, x')`` evaluated on every pair of a full grid
(every ``t`` of ``n_1`` distinct values with every ``x`` of ``n_2``) is, with the points in grid order (axis 0
slowest), ``K = K_1 ⊗ K_2``; with more axes, ``K_1 ⊗ K_2 ⊗ ... ⊗ K_D``. Each factor has an eigendecomposition
``K_d = Q_d diag(lambda_d) Q_d^T``, so ``K + s^2 I = Q (Lambda + s^2 I) Q^T`` with ``Q = ⊗ Q_d`` and ``Lambda = ⊗
lambda_d``: the Gaussian log marginal likelihood of ``y ~ N(0, K + s^2 I)`` costs ``O(sum n_d^3 + N sum n_d)``
for ``N = prod n_d`` points instead of ``O(N^3)`` (Saatci 2012, ch. 5; PyMC's ``MarginalKron``).

* :func:`grid_layout` finds the grid of a set of input rows: the distinct values per axis and the order that
  puts the rows into grid order, or None when the rows are not a full grid (a missing or repeated cell).
* :func:`kron_matvec` multiplies ``(⊗ A_d) v`` axis by axis, never forming the product.
* :func:`log_marginal_likelihood` and its derivatives: its JVP is written out from the eigendecompositions (the
  derivative with respect to ``K_d`` is a contraction of ``alpha alpha^T - (K + s^2 I)^-1``), so gradients never
  pass through the derivative of ``eigh`` (which is unstable for the clustered eigenvalues of smooth kernels).
* :func:`posterior_mean` of ``f`` at the grid points and :func:`prior_draws` of ``f`` by per-axis Cholesky factors.

A missing outcome breaks the Kronecker structure (the observed points are no longer a grid), so outcomes must
be complete: :func:`require_complete` refuses a NaN with a :class:`~gpdsl.errors.DataError` naming the entries.
Every function here takes outcomes in grid order; :func:`to_grid_order` and :func:`from_grid_order` move
between the rows' order and grid order.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.errors import DataError
from gpdsl.numerics.linalg import cholesky_with_jitter, eigh


class GridLayout(NamedTuple):
    """Where the rows of a data set sit on a full grid.

    Attributes
    ----------
    axes : tuple of numpy.ndarray
        The sorted distinct values of each input column; the grid has ``prod(len(a) for a in axes)`` points.
    order : numpy.ndarray, shape (N,)
        ``rows[order]`` are the rows in grid order (C order over ``axes``: the first axis varies slowest).
    """

    axes: tuple[np.ndarray, ...]
    order: np.ndarray

    @property
    def shape(self) -> tuple[int, ...]:
        """Number of distinct values on each axis."""
        return tuple(len(axis) for axis in self.axes)


def grid_layout(columns) -> GridLayout | None:
    """The full grid formed by input rows, or None when they do not form one.

    Parameters
    ----------
    columns : sequence of array_like, each shape (N,)
        One input column per axis (e.g. ``t`` and ``x`` of a tuple input ``(t, x)``).

    Returns
    -------
    GridLayout or None
        None when the columns differ in length, when some combination of distinct values is absent, or when a
        combination repeats (both break ``K = ⊗ K_d``).
    """
    columns = [np.ravel(np.asarray(column, dtype=float)) for column in columns]
    if not columns or len({column.size for column in columns}) != 1:
        return None
    n = columns[0].size
    axes, indices = zip(*(np.unique(column, return_inverse=True) for column in columns))
    shape = tuple(len(axis) for axis in axes)
    if n == 0 or math.prod(shape) != n:
        return None
    cells = np.ravel_multi_index(tuple(np.ravel(index) for index in indices), shape)
    order = np.argsort(cells, kind="stable")
    if not np.array_equal(cells[order], np.arange(n)):
        return None
    return GridLayout(tuple(axes), order)


def to_grid_order(values, layout: GridLayout):
    """``values`` (one per row, leading axis) put in grid order."""
    return jnp.asarray(values)[layout.order]


def from_grid_order(values, layout: GridLayout):
    """``values`` in grid order (last axis) put back in the rows' order."""
    return jnp.asarray(values)[..., np.argsort(layout.order)]


def require_complete(y, name: str = "y") -> None:
    """Raise DataError if ``y`` has a NaN: a missing cell breaks the Kronecker structure of the covariance."""
    missing = np.flatnonzero(np.isnan(np.asarray(y, dtype=float)))
    if missing.size:
        shown = ", ".join(str(i) for i in missing[:5]) + (", ..." if missing.size > 5 else "")
        raise DataError(f"{name} has {missing.size} missing entries (at {shown}); a GP on a grid needs every cell "
                        "of the grid observed")


def kron_matvec(factors, v):
    """``(A_1 ⊗ ... ⊗ A_D) v`` without forming the Kronecker product.

    Parameters
    ----------
    factors : sequence of array_like, shapes (m_d, n_d)
    v : array_like, shape (..., prod n_d)
        One vector, or a batch of them along leading axes.

    Returns
    -------
    jax.Array, shape (..., prod m_d)
    """
    v = jnp.asarray(v)
    batch = v.shape[:-1]
    x = jnp.reshape(v, (*batch, *(jnp.shape(a)[1] for a in factors)))
    for d, a in enumerate(factors):
        axis = len(batch) + d
        x = jnp.moveaxis(jnp.tensordot(a, x, axes=(1, axis)), 0, axis)
    return jnp.reshape(x, (*batch, -1))


def _spectrum(factors):
    """Eigenvalues and eigenvectors of each factor."""
    return tuple(zip(*(eigh(jnp.asarray(k)) for k in factors)))


def _outer(vectors):
    """The tensor ``prod_d v_d[i_d]`` of shape ``(n_1, ..., n_D)``."""
    result = jnp.ones(())
    for v in vectors:
        result = result[..., None] * v
    return result


def _solve_parts(factors, noise_variance, y):
    """``(eigenvalues, eigenvectors, z = Q^T y, d = 1 / (Lambda + s^2))``, the last two as grid tensors."""
    values, vectors = _spectrum(factors)
    shape = tuple(v.shape[0] for v in values)
    z = jnp.reshape(kron_matvec([q.T for q in vectors], y), shape)
    return values, vectors, z, 1.0 / (_outer(values) + noise_variance)


@jax.custom_jvp
def _log_marginal(factors, noise_variance, y):
    values, _, z, d = _solve_parts(factors, noise_variance, y)
    return -0.5 * (jnp.sum(z**2 * d) - jnp.sum(jnp.log(d)) + y.size * math.log(2.0 * math.pi))


@_log_marginal.defjvp
def _log_marginal_jvp(primals, tangents):
    factors, noise_variance, y = primals
    d_factors, d_noise, d_y = tangents
    values, vectors, z, d = _solve_parts(factors, noise_variance, y)
    value = -0.5 * (jnp.sum(z**2 * d) - jnp.sum(jnp.log(d)) + y.size * math.log(2.0 * math.pi))
    alpha_tilde = z * d
    alpha = kron_matvec(vectors, jnp.ravel(alpha_tilde))
    alpha_grid = jnp.reshape(alpha, alpha_tilde.shape)
    tangent = 0.5 * (jnp.sum(alpha**2) - jnp.sum(d)) * d_noise - jnp.dot(alpha, d_y)
    for axis, (k, q, dk) in enumerate(zip(factors, vectors, d_factors)):
        others = [jnp.asarray(f) if e != axis else jnp.eye(jnp.shape(k)[0]) for e, f in enumerate(factors)]
        beta_grid = jnp.reshape(kron_matvec(others, alpha), alpha_tilde.shape)
        rest = [a for a in range(d.ndim) if a != axis]
        data_fit = jnp.tensordot(jnp.moveaxis(alpha_grid, axis, 0), jnp.moveaxis(beta_grid, axis, 0),
                                 axes=(list(range(1, d.ndim)), list(range(1, d.ndim))))
        weights = jnp.sum(d * _outer([v if e != axis else jnp.ones_like(v) for e, v in enumerate(values)]),
                          axis=tuple(rest))
        complexity = (q * weights) @ q.T
        tangent = tangent + 0.5 * jnp.sum((data_fit - complexity) * dk)
    return value, tangent


def log_marginal_likelihood(factors, noise_variance, y) -> jax.Array:
    """``log N(y | 0, K_1 ⊗ ... ⊗ K_D + s^2 I)`` by per-axis eigendecompositions; differentiable.

    Parameters
    ----------
    factors : sequence of array_like, shapes (n_d, n_d)
        Symmetric positive semi-definite covariance matrices, one per axis.
    noise_variance : float or jax.Array
        ``s^2 > 0``, the variance of the iid Gaussian noise.
    y : array_like, shape (prod n_d,)
        Complete outcomes in grid order.

    Returns
    -------
    jax.Array
        The log density. Its derivatives (``jax.grad``, ``jax.jvp``) in the factors, the noise variance and
        ``y`` are exact and use only the eigendecompositions.
    """
    factors = tuple(jnp.asarray(k, dtype=jnp.float64) for k in factors)
    return _log_marginal(factors, jnp.asarray(noise_variance, dtype=jnp.float64), jnp.asarray(y, dtype=jnp.float64))


def posterior_mean(factors, noise_variance, y) -> jax.Array:
    """Posterior mean ``K (K + s^2 I)^-1 y`` of ``f`` at the grid points (grid order), arguments as
    :func:`log_marginal_likelihood`."""
    values, vectors, z, d = _solve_parts(factors, noise_variance, jnp.asarray(y, dtype=jnp.float64))
    return kron_matvec(vectors, jnp.ravel(_outer(values) * d * z))


def prior_draws(key, factors, n_draws: int = 1) -> jax.Array:
    """Draws of ``f ~ N(0, K_1 ⊗ ... ⊗ K_D)`` at the grid points (grid order), shape ``(n_draws, prod n_d)``.

    Each draw is ``(L_1 ⊗ ... ⊗ L_D) e`` with ``e`` standard normal and ``L_d`` the Cholesky factor of ``K_d``
    (with the jitter of :func:`~gpdsl.numerics.linalg.cholesky_with_jitter` where one is needed).
    """
    roots = [cholesky_with_jitter(jnp.asarray(k, dtype=jnp.float64))[0] for k in factors]
    n = math.prod(root.shape[0] for root in roots)
    return kron_matvec(roots, jax.random.normal(key, (n_draws, n)))
