"""Cholesky factorisation with jitter, and Gaussian densities and solves from a Cholesky factor."""

from __future__ import annotations

import functools
import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy import linalg as _scipy_linalg

import gpdsl.numerics.float64  # noqa: F401
from gpdsl.errors import NumericalError
from gpdsl.numerics import CHOLESKY_JITTER_CEILING, GP_JITTER
from gpdsl.numerics.devices import run_platform

# Batched LAPACK calls on CPU (vmapped Cholesky factorisations and triangular solves) are fanned out by
# jaxlib into XLA's thread pool from inside that pool, which can wedge it: every worker waits and the
# program hangs at 0% CPU (seen with vmapped chains on n = 200 matrices). The functions below are
# the jax ones, except that under vmap on a CPU they work through the batch one matrix at a time (lax.map), and so
# do their derivatives of every order (the derivative rules solve through lax.custom_linear_solve, which JAX
# can transpose, with the one-at-a-time solves inside). On a GPU (any platform but the CPU: the one code traced
# for, gpdsl.numerics.devices.run_platform) they are the batched jax ones, which the GPU runs in parallel.
# gpdsl code uses them instead of jnp.linalg.cholesky / jax.scipy.linalg (a test checks this).


def _one_at_a_time() -> bool:
    """Work through batches one matrix at a time: on a CPU (see the note above), not on a GPU."""
    return run_platform() == "cpu"


@jax.custom_jvp
def cholesky(a):
    """Lower Cholesky factor of a symmetric positive-definite matrix (NaN where it is not one).

    ``jnp.linalg.cholesky``, but safe under ``vmap`` (see the note above). Differentiable in both
    modes.

    Parameters
    ----------
    a : array_like, shape (n, n)

    Returns
    -------
    jax.Array, shape (n, n)
    """
    return _cholesky_one_at_a_time(a)


@jax.custom_batching.custom_vmap
def _cholesky_one_at_a_time(a):
    if a.ndim > 2 and _one_at_a_time():
        flat = jnp.reshape(a, (-1, *a.shape[-2:]))
        return jnp.reshape(lax.map(jnp.linalg.cholesky, flat), a.shape)
    return jnp.linalg.cholesky(a)


@_cholesky_one_at_a_time.def_vmap
def _cholesky_batch_rule(axis_size, in_batched, a):
    if not _one_at_a_time():
        return jnp.linalg.cholesky(a), True
    return lax.map(_cholesky_one_at_a_time, a), True


@cholesky.defjvp
def _cholesky_jvp(primals, tangents):
    (a,), (da,) = primals, tangents
    L = cholesky(a)
    return L, _cholesky_tangent(L, da)


def _cholesky_tangent(L, dK):
    dK = 0.5 * (dK + _transpose(dK))
    half_solved = _linear_solve(L, dK, trans=0, lower=True)
    inner = _transpose(_linear_solve(L, _transpose(half_solved), trans=0, lower=True))
    phi = jnp.tril(inner) / (1.0 + jnp.eye(L.shape[-1], dtype=L.dtype))
    return L @ phi


def _transpose(a):
    return jnp.swapaxes(a, -1, -2)


def solve_triangular(a, b, trans=0, lower=False):
    """Solve ``a x = b`` (``trans=0``) or ``a^T x = b`` (``trans=1``) for triangular ``a``.

    ``jax.scipy.linalg.solve_triangular``, but safe under ``vmap`` (see the note above).
    """
    return _triangular_solver(int(trans), bool(lower))(a, b)


def cho_solve(c_and_lower, b):
    """Solve ``A x = b`` given ``(L, lower)`` with ``A = L L^T`` (lower) or ``U^T U``; safe under ``vmap``."""
    c, lower = c_and_lower
    if lower:
        return solve_triangular(c, solve_triangular(c, b, lower=True), trans=1, lower=True)
    return solve_triangular(c, solve_triangular(c, b, trans=1, lower=False), lower=False)


@functools.lru_cache(maxsize=None)
def _triangular_solver(trans: int, lower: bool):
    @jax.custom_jvp
    def solver(a, b):
        return _one_at_a_time_solver(trans, lower)(a, b)

    @solver.defjvp
    def _jvp(primals, tangents):
        (a, b), (da, db) = primals, tangents
        x = solver(a, b)
        return x, _linear_solve(a, db - _matmul(_triangle(da, trans, lower), x), trans, lower)

    return solver


@functools.lru_cache(maxsize=None)
def _one_at_a_time_solver(trans: int, lower: bool):
    """The triangular solve, mapped over explicit batch dimensions and over ``vmap`` one matrix at a time."""

    def solve(a, b):
        if a.ndim > 2 and _one_at_a_time():
            batch = a.shape[:-2]
            flat_a = jnp.reshape(a, (-1, *a.shape[-2:]))
            shape = jax.eval_shape(partial(_scipy_linalg.solve_triangular, trans=trans, lower=lower), a, b).shape
            flat_b = jnp.reshape(jnp.broadcast_to(b, shape), (flat_a.shape[0], *shape[len(batch):]))
            solved = lax.map(lambda ab: _scipy_linalg.solve_triangular(*ab, trans=trans, lower=lower), (flat_a, flat_b))
            return jnp.reshape(solved, (*batch, *solved.shape[1:]))
        return _scipy_linalg.solve_triangular(a, b, trans=trans, lower=lower)

    one_at_a_time = jax.custom_batching.custom_vmap(solve)

    @one_at_a_time.def_vmap
    def _batch_rule(axis_size, in_batched, a, b):
        if not in_batched[0] and a.ndim == 2:  # one matrix: the batch joins the right-hand sides' columns
            columns = jnp.moveaxis(b, 0, 1)
            solved = one_at_a_time(a, jnp.reshape(columns, (columns.shape[0], -1)))
            return jnp.moveaxis(jnp.reshape(solved, columns.shape), 1, 0), True
        if not _one_at_a_time():
            batched = jax.vmap(partial(_scipy_linalg.solve_triangular, trans=trans, lower=lower),
                               in_axes=tuple(0 if along else None for along in in_batched))
            return batched(a, b), True
        a = a if in_batched[0] else jnp.broadcast_to(a, (axis_size, *a.shape))
        b = b if in_batched[1] else jnp.broadcast_to(b, (axis_size, *b.shape))
        return lax.map(lambda ab: one_at_a_time(*ab), (a, b)), True

    return one_at_a_time


def _linear_solve(a, b, trans: int, lower: bool):
    """The triangular solve as a linear map of ``b`` that JAX can transpose (derivative rules need one), still
    one matrix at a time under ``vmap``."""
    operator = _triangle(a, trans, lower)
    return lax.custom_linear_solve(
        lambda x: _matmul(operator, x), b,
        solve=lambda _, r: _one_at_a_time_solver(trans, lower)(a, r),
        transpose_solve=lambda _, r: _one_at_a_time_solver(1 - trans, lower)(a, r))


def _triangle(a, trans: int, lower: bool):
    """The triangle of ``a`` a solve reads, transposed when ``trans``."""
    a = jnp.tril(a) if lower else jnp.triu(a)
    return _transpose(a) if trans else a


def _matmul(a, x):
    """``a @ x`` for ``x`` a matrix or a vector (with the batch dimensions of ``a``)."""
    return a @ x if x.ndim == a.ndim else (a @ x[..., None])[..., 0]


def eigh(a):
    """Eigenvalues (ascending) and eigenvectors of a symmetric matrix: ``jnp.linalg.eigh``, but safe under ``vmap``
    (see the note above). Not differentiable."""
    return _eigh_one_at_a_time(a)


@jax.custom_batching.custom_vmap
def _eigh_one_at_a_time(a):
    values, vectors = jnp.linalg.eigh(a)
    return values, vectors


@_eigh_one_at_a_time.def_vmap
def _eigh_batch_rule(axis_size, in_batched, a):
    if not _one_at_a_time():
        values, vectors = jnp.linalg.eigh(a)
        return (values, vectors), (True, True)
    return lax.map(_eigh_one_at_a_time, a), (True, True)


def expm(a):
    """Matrix exponential of a square matrix, or of each matrix of a stack.

    ``jax.scipy.linalg.expm`` (differentiable), over a stack one matrix at a time (``lax.map``), so that no
    batched LAPACK call is made (see the note above); it is not made safe under an outer ``vmap``.

    Parameters
    ----------
    a : array_like, shape (..., n, n)

    Returns
    -------
    jax.Array, shape (..., n, n)
    """
    a = jnp.asarray(a)
    if a.ndim == 2:
        return _scipy_linalg.expm(a)
    return jnp.reshape(lax.map(_scipy_linalg.expm, jnp.reshape(a, (-1, *a.shape[-2:]))), a.shape)


def jitter_ladder(jitter: float = CHOLESKY_JITTER_CEILING, max_tries: int = 5) -> tuple[float, ...]:
    """Relative jitters tried in turn: 0, then geometrically from 1e-8 up to ``jitter``.

    Parameters
    ----------
    jitter : float
        Largest relative jitter (a multiple of the mean diagonal).
    max_tries : int
        Number of factorisations attempted, the unjittered one included.

    Returns
    -------
    tuple of float
        ``max_tries`` values; e.g. ``(0, 1e-8, 4.6e-8, 2.2e-7, 1e-6)`` for the defaults.
    """
    if max_tries < 1:
        raise ValueError("max_tries must be at least 1")
    if max_tries == 1:
        return (0.0,)
    smallest = min(GP_JITTER, jitter)
    return (0.0, *(float(v) for v in np.geomspace(smallest, jitter, max_tries - 1)))


def cholesky_with_jitter(K, jitter: float = CHOLESKY_JITTER_CEILING, max_tries: int = 5):
    """Lower Cholesky factor of ``K``, adding diagonal jitter only when needed.

    Tries ``K + j * mean(diag(K)) * I`` for each relative ``j`` of :func:`jitter_ladder`
    and keeps the first factor without NaN. Works under ``jit``, ``grad`` and ``vmap``:
    the search is a ``lax.while_loop`` and derivatives are those of the Cholesky factor of
    ``K + jitter_used * I`` with the jitter held fixed.

    Parameters
    ----------
    K : array_like, shape (n, n)
        Symmetric matrix.
    jitter : float
        Largest relative jitter.
    max_tries : int
        Number of attempts, the unjittered one included.

    Returns
    -------
    L : jax.Array, shape (n, n)
        Lower-triangular factor; contains NaN if every attempt failed.
    jitter_used : jax.Array
        Absolute jitter added to the diagonal (0 if none was needed).
    """
    return _compiled_search(jnp.asarray(K, dtype=jnp.float64), jitter_ladder(jitter, max_tries))


@partial(jax.custom_jvp, nondiff_argnums=(1,))
def _jittered_cholesky(K, ladder):
    relative = jnp.asarray(ladder, dtype=K.dtype)
    scale = jnp.mean(jnp.diag(K))
    identity = jnp.eye(K.shape[-1], dtype=K.dtype)

    def factor(i):
        added = relative[i] * scale
        L = cholesky(K + added * identity)
        return L, added, jnp.all(jnp.isfinite(L))

    def keep_trying(state):
        i, _, _, ok = state
        return jnp.logical_and(~ok, i < len(ladder) - 1)

    def next_try(state):
        i = state[0] + 1
        return (i, *factor(i))

    _, L, added, _ = lax.while_loop(keep_trying, next_try, (0, *factor(0)))
    return L, added


_compiled_search = jax.jit(_jittered_cholesky, static_argnums=1)


@_jittered_cholesky.defjvp
def _jittered_cholesky_jvp(ladder, primals, tangents):
    (K,), (dK,) = primals, tangents
    L, added = _jittered_cholesky(K, ladder)
    return (L, added), (_cholesky_tangent(L, dK), jnp.zeros_like(added))


def checked_cholesky(K, context: dict | None = None, jitter: float = CHOLESKY_JITTER_CEILING, max_tries: int = 5):
    """:func:`cholesky_with_jitter`, raising a helpful error when it fails (not jit-compatible).

    Parameters
    ----------
    K : array_like, shape (n, n)
        Kernel matrix.
    context : dict, optional
        Values that produced ``K`` (typically hyperparameters), quoted in the error.
    jitter, max_tries
        As in :func:`cholesky_with_jitter`.

    Returns
    -------
    L : jax.Array, shape (n, n)
        Lower-triangular factor.
    jitter_used : float
        Absolute jitter added to the diagonal.

    Raises
    ------
    NumericalError
        ``K`` has non-finite entries or is not positive definite even with the largest jitter.
    """
    where = _describe(context)
    if not bool(jnp.all(jnp.isfinite(jnp.asarray(K)))):
        raise NumericalError(
            f"the kernel matrix contains NaN or infinite entries{where}",
            hint="check the inputs and hyperparameters for NaN, infinities or overflow",
        )
    L, jitter_used = cholesky_with_jitter(K, jitter, max_tries)
    if not bool(jnp.all(jnp.isfinite(L))):
        raise NumericalError(
            f"the kernel matrix is not positive definite{where}, even with relative jitter {jitter:g}",
            hint="try adding white(1e-6) to the kernel, rescaling inputs, or a tighter prior",
        )
    return L, float(jitter_used)


def solve_chol(L, b):
    """Solve ``K x = b`` given the lower Cholesky factor ``L`` of ``K``.

    Parameters
    ----------
    L : array_like, shape (n, n)
    b : array_like, shape (n,) or (n, m)

    Returns
    -------
    jax.Array
        ``K^{-1} b``, shaped like ``b``.
    """
    return cho_solve((L, True), b)


def logdet_chol(L):
    """``log det K = 2 sum_i log L_ii`` from the lower Cholesky factor ``L`` of ``K``."""
    return 2.0 * jnp.sum(jnp.log(jnp.diagonal(L, axis1=-2, axis2=-1)), axis=-1)


def mvn_logpdf_chol(x, L):
    """Log density of ``N(0, K)`` at ``x`` given the lower Cholesky factor ``L`` of ``K``.

    Parameters
    ----------
    x : array_like, shape (n,)
        The point (subtract a mean beforehand).
    L : array_like, shape (n, n)
        Lower Cholesky factor of the covariance.

    Returns
    -------
    jax.Array
        ``-1/2 x^T K^{-1} x - 1/2 log det K - n/2 log(2 pi)``.
    """
    x = jnp.asarray(x)
    alpha = solve_triangular(L, x, lower=True)
    n = x.shape[-1]
    return -0.5 * jnp.sum(jnp.square(alpha)) - 0.5 * logdet_chol(L) - 0.5 * n * math.log(2.0 * math.pi)


def _describe(context: dict | None) -> str:
    if not context:
        return ""
    return " at " + ", ".join(f"{name}={_format_value(value)}" for name, value in context.items())


def _format_value(value) -> str:
    array = np.asarray(value)
    if array.ndim == 0:
        return f"{array.item():.6g}" if np.issubdtype(array.dtype, np.number) else str(value)
    return np.array2string(array, precision=4, threshold=8, separator=", ")
