"""A sampled state-space latent GP from its innovations: the non-centred parameterisation shared with Stan.

Under ``approx = state_space`` a latent GP that is not integrated out (any likelihood but the marginalised normal) is
sampled through its innovations ``<f>_z``, ``N d`` standard normals (``d`` the state's size,
:func:`gpdsl.ir.state_space.state_dimension`), row ``k`` of their ``(N, d)`` reshape belonging to the ``k``-th sorted
time: the state starts as ``s_0 = L z_0`` (``L`` the Cholesky factor of the positive definite ``P_inf``) and moves as
``s_k = A_k s_{k-1} + Q_k^{1/2} z_k`` (a repeated time is a step of zero, ``A = I``, ``Q = 0``), and ``f = h s`` at
each point, in the data's order. ``Q_k^{1/2}`` is the principal (symmetric) square root by eigendecomposition, unique
even for the singular ``Q`` of a small or zero step, so that JAX and the generated Stan program map the same ``z`` to
the same ``f``; eigenvalues below :data:`NOISE_FLOOR` times ``trace(P_inf)`` (rounding) count as zero. The transitions are computed once per distinct
time step (one for a regular series), and the linear recursion runs step by step on a CPU (a :func:`jax.lax.scan`,
``O(N d^2)``) and as one associative scan elsewhere (``O(N d^3)`` work in ``O(log N)`` depth). The implied
covariance of ``f`` is the kernel's (up to a periodic kernel's truncated series).
"""

from __future__ import annotations


import jax
import jax.numpy as jnp

from gpdsl.kernels.kalman import TimeGrid, transitions
from gpdsl.numerics.devices import run_platform
from gpdsl.numerics.linalg import cholesky, eigh


NOISE_FLOOR = 1e-12
"""Eigenvalues of the process noise ``Q_k`` below this times ``trace(P_inf)`` count as zero: below it they are the
rounding of ``P_inf - A P_inf A^T`` (a constant kernel's exactly zero noise comes out as about 1e-16 times ``P_inf``),
whose square roots would otherwise differ from one program to another."""


def principal_square_root(S, floor=0.0) -> jax.Array:
    """The symmetric ``R = V diag(sqrt(lambda)) V^T`` with ``R R = S`` of a symmetric positive semi-definite ``S``
    (eigenvalues below ``floor``, such as those that rounding made negative, count as zero), of one matrix or of each
    of a stack.

    Not differentiable (:func:`gpdsl.numerics.linalg.eigh`)."""
    S = 0.5 * (S + jnp.swapaxes(S, -1, -2))

    def one(a):
        values, vectors = eigh(a)
        return (vectors * jnp.sqrt(jnp.where(values > floor, values, 0.0))[None, :]) @ vectors.T

    if S.ndim == 2:
        return one(S)
    return jnp.reshape(jax.lax.map(one, jnp.reshape(S, (-1, *S.shape[-2:]))), S.shape)


def distinct_factors(kernel, grid: TimeGrid, periodic_order: int):
    """``(A_u, R_u, L, h)``: the transition and the principal root of the process noise per distinct step, shape
    ``(U, d, d)``, the Cholesky factor ``L`` of ``P_inf`` and the measurement row ``h`` of shape ``(d,)``."""
    A_u, Q_u, h, P_inf = transitions(kernel, jnp.asarray(grid.distinct), periodic_order)
    return A_u, principal_square_root(Q_u, NOISE_FLOOR * jnp.trace(P_inf)), cholesky(P_inf), h


def innovation_factors(kernel, grid: TimeGrid, periodic_order: int):
    """``(A, R, h)``: per sorted point the transition ``A_k`` and the root ``R_k`` of its process noise, shape
    ``(N, d, d)`` (``A_0 = I``, ``R_0`` the Cholesky factor of ``P_inf``), and the measurement row ``h`` of shape
    ``(d,)``."""
    A_u, R_u, L, h = distinct_factors(kernel, grid, periodic_order)
    A, R = A_u[grid.index], R_u[grid.index]
    return A.at[0].set(jnp.eye(L.shape[0])), R.at[0].set(L), h


def states_from_innovations(A, R, z) -> jax.Array:
    """The states ``s_k = A_k s_{k-1} + R_k z_k`` (``s_{-1} = 0``) along sorted points, shape ``(N, d)``, by one
    associative scan (``O(log N)`` depth: what a GPU runs in parallel)."""
    b = jnp.einsum("nij,nj->ni", R, z)

    def combine(earlier, later):
        A1, b1 = earlier
        A2, b2 = later
        return A2 @ A1, jnp.einsum("...ij,...j->...i", A2, b1) + b2

    return jax.lax.associative_scan(combine, (A, b))[1]


def sequential_latent(A_u, R_u, L, h, index, z) -> jax.Array:
    """``f`` along sorted points by the recursion one step after another (a :func:`jax.lax.scan` that looks up each
    step's factors among the distinct ones): fewer operations than the associative scan, and faster on a CPU."""
    first = L @ z[0]

    def step(state, point):
        i, z_k = point
        state = A_u[i] @ state + R_u[i] @ z_k
        return state, h @ state

    _, rest = jax.lax.scan(step, first, (jnp.asarray(index[1:]), z[1:]))
    return jnp.concatenate([(h @ first)[None], rest])


def latent_from_innovations(kernel, grid: TimeGrid, innovations, periodic_order: int,
                            parallel: bool | None = None) -> jax.Array:
    """``f`` at the data's points (their order) from the innovations ``z`` (``N d`` values, row ``k`` of the
    ``(N, d)`` reshape for the ``k``-th sorted time): the module docstring's recursion, by the associative scan with
    ``parallel`` (default: on any platform but the CPU) and else step by step (:func:`sequential_latent`), its
    result behind an optimisation barrier: XLA's CPU compiler otherwise fuses what reads ``f`` (a likelihood over
    every point) into the scan, which made a Poisson log-likelihood at 10^5 points 2.3 times slower."""
    parallel = run_platform() != "cpu" if parallel is None else parallel
    if parallel:
        A, R, h = innovation_factors(kernel, grid, periodic_order)
        z = jnp.reshape(innovations, (grid.size, A.shape[-1]))
        return (states_from_innovations(A, R, z) @ h)[grid.unsort]
    A_u, R_u, L, h = distinct_factors(kernel, grid, periodic_order)
    z = jnp.reshape(innovations, (grid.size, L.shape[0]))
    return jax.lax.optimization_barrier(sequential_latent(A_u, R_u, L, h, grid.index, z)[grid.unsort])
