"""An exact Gaussian importance density for a whitened latent GP on a grid, by Kronecker algebra.

A latent GP on a full grid is sampled as ``v ~ N(0, I_N)`` with ``f = A v + offset``, ``A = L_1 ⊗ ... ⊗ L_D``
(:mod:`gpdsl.inference.families.latent_grid`). The Laplace approximation of ``p(v | y)`` has precision
``I + A^T W A``, ``W`` the likelihood's negative second derivative at the mode: with ``W`` a general diagonal this
is no Kronecker product, so neither its factor (for draws) nor its determinant (for the density) is cheap. The
importance density here keeps the Laplace mode and replaces ``W`` by its *separable* summary ``W_sep = w_1 ⊗ ...
⊗ w_D`` (``log W`` fitted by a sum of one term per axis, least squares over the grid: the row and column effects
of a space-time intensity). Then

    P = I + A^T diag(w_1 ⊗ ... ⊗ w_D) A = I + ⊗_d (L_d^T diag(w_d) L_d) = I + ⊗_d U_d diag(mu_d) U_d^T

with one ``n_d x n_d`` eigendecomposition per axis, so ``q(v) = N(v_hat, P^-1)`` has draws ``v_hat + U (1 + mu)^-1/2
e`` and log density in ``O(N sum n_d)`` each (``U = ⊗ U_d``, ``mu = ⊗ mu_d``). A scalar ``W`` (its mean) is the
special case of constant ``w_d``; the separable one is never worse at fitting ``W`` and costs the same.

``q`` is an exact Gaussian with an exactly computed density whatever ``v_hat`` and ``W_sep`` are, so the importance
estimate ``mean_i p(y | A v_i) N(v_i | 0, I) / q(v_i)`` stays unbiased for ``p(y | theta)``: the mode's accuracy and
the curvature summary change only its variance. The mode is found by Newton's method on ``log p(y | A v + offset) -
|v|^2 / 2``, each step solving ``(I + A^T W A) d = r`` by conjugate gradients with Kronecker matvecs, preconditioned
by ``P^-1`` at the current ``W`` (exact where ``W`` is separable), halving a step that does not increase the
objective.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax
from jax.scipy.sparse.linalg import cg

from gpdsl.inference.approximations.gaussian import iteration_setup
from gpdsl.inference.approximations.kronecker import kron_matvec
from gpdsl.inference.approximations.laplace import check_laplace_likelihood, halve_until_better
from gpdsl.numerics.linalg import eigh

SMALLEST_CURVATURE = 1e-8  # floor of W before its logarithm (missing or flat observations give W = 0)
CG_TOLERANCE = 1e-6  # relative residual of each Newton system's conjugate gradients
CG_MAX_ITERATIONS = 200


class GridGaussian(NamedTuple):
    """``q(v) = N(mean, (I + U diag(mu) U^T)^-1)`` over the whitened grid vector.

    Attributes
    ----------
    mean : jax.Array, shape (N,)
        The Laplace mode ``v_hat`` (grid order).
    eigenvectors : tuple of jax.Array, shapes (n_d, n_d)
        ``U_d`` of ``L_d^T diag(w_d) L_d``.
    eigenvalues : jax.Array, shape (N,)
        ``mu = ⊗ mu_d``, grid order.
    converged : jax.Array, shape (), bool
        Newton's change fell below the tolerance.
    iterations : jax.Array, shape (), int
        Newton iterations.
    """

    mean: jax.Array
    eigenvectors: tuple
    eigenvalues: jax.Array
    converged: jax.Array
    iterations: jax.Array


def _outer(vectors):
    result = jnp.ones(())
    for v in vectors:
        result = result[..., None] * v
    return jnp.ravel(result)


def separable_curvature(W, shape) -> list[jax.Array]:
    """Per-axis positive vectors ``w_d`` with ``log(w_1 ⊗ ... ⊗ w_D)`` the least-squares fit of ``log W`` by one term
    per axis (``W`` floored at :data:`SMALLEST_CURVATURE`); the grand mean goes to the first axis."""
    log_w = jnp.reshape(jnp.log(jnp.maximum(W, SMALLEST_CURVATURE)), shape)
    grand = jnp.mean(log_w)
    effects = [jnp.mean(log_w, axis=tuple(a for a in range(len(shape)) if a != d)) - grand for d in range(len(shape))]
    effects[0] = effects[0] + grand
    return [jnp.exp(e) for e in effects]


def scalar_curvature(W, shape) -> list[jax.Array]:
    """Per-axis vectors whose Kronecker product is the constant ``mean(W)`` (floored at
    :data:`SMALLEST_CURVATURE`)."""
    w = jnp.maximum(jnp.mean(W), SMALLEST_CURVATURE)
    return [jnp.full((n,), w if d == 0 else 1.0) for d, n in enumerate(shape)]


CURVATURES = {"separable": separable_curvature, "scalar": scalar_curvature}


def _spectrum(roots, curvature):
    """``U_d`` and ``mu = ⊗ mu_d`` of ``⊗ L_d^T diag(w_d) L_d`` (eigenvalues clipped at 0)."""
    values, vectors = zip(*(eigh(root.T @ (w[:, None] * root)) for root, w in zip(roots, curvature)))
    return tuple(vectors), jnp.maximum(_outer(values), 0.0)


def grid_laplace(roots, y, likelihood: str, tol=None, max_iter: int = 100, args=(), offset=None,
                 curvature: str = "separable") -> GridGaussian:
    """The importance density of the module docstring for ``v ~ N(0, I)`` under ``p(y | (⊗ L_d) v + offset)``.

    Parameters
    ----------
    roots : sequence of array_like, shapes (n_d, n_d)
        The per-axis factors ``L_d`` (lower triangular or not: only ``A = ⊗ L_d`` matters).
    y : array_like, shape (N,)
        Observations in grid order (NaN where missing: no term).
    likelihood : str
        A likelihood with ``derivatives``.
    tol : float, optional
        Newton stops when ``||A (v_new - v)||^2 < tol``; ``N / 1e4`` by default.
    max_iter : int
        Newton iteration limit.
    args : tuple of array_like
        The likelihood's other parameters (scalars, or per point in grid order).
    offset : array_like, shape (N,), optional
        Added to ``A v`` in the likelihood's latent argument (grid order).
    curvature : {"separable", "scalar"}
        The summary of ``W`` at the mode that makes ``q``'s precision (see the module docstring).

    Returns
    -------
    GridGaussian
    """
    check_laplace_likelihood(likelihood)
    if curvature not in CURVATURES:
        raise ValueError(f"curvature must be one of {', '.join(CURVATURES)}, not {curvature!r}")
    roots = tuple(jnp.asarray(r, dtype=jnp.float64) for r in roots)
    y = jnp.asarray(y, dtype=jnp.float64)
    offset = jnp.zeros(y.shape) if offset is None else jnp.broadcast_to(jnp.asarray(offset, jnp.float64), y.shape)
    args = tuple(jnp.asarray(a, dtype=jnp.float64) for a in args)
    return _grid_laplace(roots, y, likelihood, tol, max_iter, args, offset, curvature)


class _Identity:
    """``I @ x = x``: the objective of :func:`halve_until_better` over ``v`` itself."""

    def __matmul__(self, x):
        return x


@partial(jax.jit, static_argnames=("likelihood", "max_iter", "curvature"))
def _grid_laplace(roots, y, likelihood, tol, max_iter, args, offset, curvature):
    _, tol, y, derivatives_with_args = iteration_setup(y, y, tol, likelihood, "laplace")
    shape = tuple(r.shape[0] for r in roots)
    transposed = tuple(r.T for r in roots)
    summarise = CURVATURES[curvature]

    def apply(v):
        return kron_matvec(roots, v)

    def derivatives(v):
        return derivatives_with_args(y, apply(v) + offset, *args)

    def objective(v_as_alpha, v):
        return -0.5 * v_as_alpha @ v + derivatives(v)[0]

    def newton_step(state):
        v, _, iteration = state
        _, grad, W = derivatives(v)
        vectors, mu = _spectrum(roots, summarise(W, shape))

        def hessian(x):
            return x + kron_matvec(transposed, W * apply(x))

        def preconditioner(x):
            return kron_matvec(vectors, kron_matvec([u.T for u in vectors], x) / (1.0 + mu))

        rhs = kron_matvec(transposed, W * apply(v) + grad)
        solution, _ = cg(hessian, rhs, x0=v, tol=CG_TOLERANCE, maxiter=CG_MAX_ITERATIONS, M=preconditioner)
        _, v_new = halve_until_better(objective, _Identity(), v, v, solution - v)
        return v_new, jnp.sum(apply(v_new - v) ** 2), iteration + 1

    def not_done(state):
        return (state[1] >= tol) & (state[2] < max_iter)

    start = (jnp.zeros(y.shape, y.dtype), jnp.asarray(jnp.inf, y.dtype), jnp.asarray(0))
    v, change, iterations = lax.while_loop(not_done, newton_step, start)
    vectors, mu = _spectrum(roots, summarise(derivatives(v)[2], shape))
    return GridGaussian(v, vectors, mu, change < tol, iterations)


def sample(approx: GridGaussian, key, num: int) -> tuple[jax.Array, jax.Array]:
    """``num`` draws of ``v ~ q`` and their ``log N(v | 0, I) - log q(v)``, shapes ``(num, N)`` and ``(num,)``.

    ``v = mean + U (1 + mu)^-1/2 e`` with ``e ~ N(0, I)``, and then ``log N(v | 0, I) - log q(v) = -|v|^2 / 2 + |e|^2 /
    2 - sum(log(1 + mu)) / 2`` (``O(N sum n_d)`` each).
    """
    noise = jax.random.normal(key, (num, approx.mean.shape[0]), dtype=approx.mean.dtype)
    draws = approx.mean + kron_matvec(approx.eigenvectors, noise / jnp.sqrt(1.0 + approx.eigenvalues))
    log_ratio = (-0.5 * jnp.sum(draws ** 2, axis=-1) + 0.5 * jnp.sum(noise ** 2, axis=-1)
                 - 0.5 * jnp.sum(jnp.log1p(approx.eigenvalues)))
    return draws, log_ratio
