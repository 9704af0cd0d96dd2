"""A sampled state-space latent GP from its innovations: the non-centred parameterisation shared with Stan.

Under ``approx = state_space`` a latent GP that is not integrated out (any likelihood but the marginalised normal) is
sampled through its innovations ``<f>_z``, ``N d`` standard normals (``d`` the state's size,
:func:`gpdsl.ir.state_space.state_dimension`), row ``k`` of their ``(N, d)`` reshape belonging to the ``k``-th sorted
time: the state starts as ``s_0 = P_inf^{1/2} z_0`` and moves as ``s_k = A_k s_{k-1} + Q_k^{1/2} z_k`` (a repeated
time is a step of zero, ``A = I``, ``Q = 0``), and ``f = h s`` at each point, in the data's order. Both roots are the
principal (symmetric) square roots by eigendecomposition, unique even for the singular ``Q`` of a small or zero step,
so that JAX and the generated Stan program map the same ``z`` to the same ``f``. The transitions are computed once per
distinct time step (two for a regular series), and the linear recursion runs as one associative scan, ``O(N d^3)``
work in ``O(log N)`` depth. The implied covariance of ``f`` is the kernel's (up to a periodic kernel's truncated
series).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.errors import DataError
from gpdsl.kernels.kalman import transitions
from gpdsl.numerics.linalg import eigh


class TimeGrid(NamedTuple):
    """The data's times sorted once, for the recursion (numpy, from data alone).

    Attributes
    ----------
    order : numpy.ndarray of int, shape (N,)
        ``times[order]`` is sorted (a stable sort).
    unsort : numpy.ndarray of int, shape (N,)
        Its inverse: sorted values ``v`` are ``v[unsort]`` in the data's order.
    distinct : numpy.ndarray, shape (U,)
        The distinct steps between sorted times (0 included when a time repeats).
    index : numpy.ndarray of int, shape (N,)
        Each sorted point's step among ``distinct`` (the first point's is unused: it starts from ``P_inf``).
    """

    order: np.ndarray
    unsort: np.ndarray
    distinct: np.ndarray
    index: np.ndarray

    @property
    def size(self) -> int:
        """The number of points."""
        return self.order.shape[0]


def time_grid(times) -> TimeGrid:
    """The :class:`TimeGrid` of one column of times (shape ``(N,)`` or ``(N, 1)``).

    Raises
    ------
    DataError
        The times are not finite.
    """
    times = np.ravel(np.asarray(times, dtype=float))
    if not np.all(np.isfinite(times)):
        raise DataError("the times of a state-space GP must be finite")
    order = np.argsort(times, kind="stable")
    steps = np.diff(times[order], prepend=times[order][:1])
    distinct, index = np.unique(steps[1:] if steps.size > 1 else steps, return_inverse=True)
    index = np.concatenate([[0], np.ravel(index)]) if steps.size > 1 else np.zeros(steps.size, dtype=int)
    return TimeGrid(order, np.argsort(order), distinct, index.astype(int))


def principal_square_root(S) -> jax.Array:
    """The symmetric ``R = V diag(sqrt(lambda)) V^T`` with ``R R = S`` of a symmetric positive semi-definite ``S``
    (eigenvalues that rounding made negative count as zero), of one matrix or of each of a stack.

    Not differentiable (:func:`gpdsl.numerics.linalg.eigh`)."""
    S = 0.5 * (S + jnp.swapaxes(S, -1, -2))
    one = lambda a: (lambda values, vectors: (vectors * jnp.sqrt(jnp.clip(values, 0.0))[None, :]) @ vectors.T)(  # noqa: E731
        *eigh(a))
    if S.ndim == 2:
        return one(S)
    return jnp.reshape(jax.lax.map(one, jnp.reshape(S, (-1, *S.shape[-2:]))), S.shape)


def innovation_factors(kernel, grid: TimeGrid, periodic_order: int):
    """``(A, R, h)``: per sorted point the transition ``A_k`` and the root ``R_k`` of its process noise, shape
    ``(N, d, d)`` (``A_0 = I``, ``R_0 = P_inf^{1/2}``), and the measurement row ``h`` of shape ``(d,)``."""
    A_u, Q_u, h, P_inf = transitions(kernel, jnp.asarray(grid.distinct), periodic_order)
    R_u = principal_square_root(Q_u)
    A, R = A_u[grid.index], R_u[grid.index]
    d = P_inf.shape[0]
    return A.at[0].set(jnp.eye(d)), R.at[0].set(principal_square_root(P_inf)), h


def states_from_innovations(A, R, z) -> jax.Array:
    """The states ``s_k = A_k s_{k-1} + R_k z_k`` (``s_{-1} = 0``) along sorted points, shape ``(N, d)``, by one
    associative scan."""
    b = jnp.einsum("nij,nj->ni", R, z)

    def combine(earlier, later):
        A1, b1 = earlier
        A2, b2 = later
        return A2 @ A1, jnp.einsum("...ij,...j->...i", A2, b1) + b2

    return jax.lax.associative_scan(combine, (A, b))[1]


def latent_from_innovations(kernel, grid: TimeGrid, innovations, periodic_order: int) -> jax.Array:
    """``f`` at the data's points (their order) from the innovations ``z`` (``N d`` values, row ``k`` of the
    ``(N, d)`` reshape for the ``k``-th sorted time): the module docstring's recursion."""
    A, R, h = innovation_factors(kernel, grid, periodic_order)
    z = jnp.reshape(innovations, (grid.size, A.shape[-1]))
    return (states_from_innovations(A, R, z) @ h)[grid.unsort]
