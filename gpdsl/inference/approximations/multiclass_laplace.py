"""The Laplace approximation of multiclass GP classification (Williams & Barber 1998; Rasmussen & Williams 2006,
Sec. 3.5): ``C`` latent values per observation under a softmax, ``y ~ categorical_logit(f)``.

``f`` holds the ``N x C`` latent matrix row by row (length ``n = N C``) and its prior covariance is ``K`` (in a
:class:`~gpdsl.inference.families.latent_gp.LatentGP`, ``K(theta)`` kron ``I_C``: independent classes). The
negative Hessian of ``log p(y | f)`` is block-diagonal, one ``C x C`` block ``diag(pi_n) - pi_n pi_n^T`` per
observation (``pi_n = softmax(f_n)``), so Newton's method for the mode is Alg. 3.1 of Rasmussen & Williams with
the diagonal ``W^1/2`` replaced by the symmetric square root of each block (a block-diagonal ``S``, ``S S = W``):
``B = I + S K S`` is symmetric positive definite however singular ``W`` is (each block has the null vector
``1``), one Cholesky factorisation per iteration, no ``K^-1``. This is R&W's Alg. 3.3 written for a general
block structure of ``K`` rather than per class; for independent classes it costs ``O((N C)^3)`` per iteration
against their ``O(C N^3)``, which is what the small ``N`` of an exact pseudo-marginal run allows.

The approximation ``q(f) = N(f_hat, (K^-1 + W)^-1)`` is what pseudo-marginal MH draws its importance samples
from; :func:`log_prior_minus_log_q` gives each sample's ``log N(f | 0, K) - log q(f)`` without ``K^-1``.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from gpdsl.inference.approximations.laplace import halve_until_better
from gpdsl.numerics.linalg import cho_solve, cholesky, cholesky_with_jitter, eigh, solve_triangular



class MulticlassLaplace(NamedTuple):
    """``q(f | y) = N(mean, (K^-1 + W)^-1)`` and the approximate ``log p(y | theta)``; a JAX pytree.

    Attributes
    ----------
    mean : jax.Array, shape (n,)
        The mode ``f_hat`` (row by row).
    alpha : jax.Array, shape (n,)
        ``K^-1 mean``: the Newton vector ``a`` with ``f_hat = K a``.
    root_w : jax.Array, shape (n, n)
        ``S``: block-diagonal, the symmetric square root of each ``C x C`` block of ``W``.
    chol_b : jax.Array, shape (n, n)
        Lower Cholesky factor ``L`` of ``B = I + S K S``.
    log_marginal : jax.Array, shape ()
        ``-a^T f_hat / 2 + log p(y | f_hat) - sum log diag L`` (R&W eq. 3.44 with ``log |B|``).
    converged : jax.Array, shape (), bool
    iterations : jax.Array, shape (), int
    cubic_ops : jax.Array, shape (), int
        One Cholesky factorisation per Newton iteration.
    """

    mean: jax.Array
    alpha: jax.Array
    root_w: jax.Array
    chol_b: jax.Array
    log_marginal: jax.Array
    converged: jax.Array
    iterations: jax.Array
    cubic_ops: jax.Array


def softmax_derivatives(y, f, classes: int, offset=None):
    """``log p(y | f)``, its gradient and the blocks of its negative Hessian under ``categorical_logit``.

    Parameters
    ----------
    y : array_like, shape (N,)
        Labels in ``1..classes``.
    f : array_like, shape (N * classes,)
        The latent matrix row by row.
    classes : int
    offset : array_like, optional
        Added to ``f`` before the softmax (broadcast against it).

    Returns
    -------
    log_lik : jax.Array, shape ()
    grad : jax.Array, shape (N * classes,)
        ``onehot(y) - pi`` row by row.
    blocks : jax.Array, shape (N, classes, classes)
        ``diag(pi_n) - pi_n pi_n^T``.
    """
    logits = jnp.reshape(f if offset is None else f + offset, (-1, classes))
    log_pi = jax.nn.log_softmax(logits, axis=-1)
    pi = jnp.exp(log_pi)
    onehot = jax.nn.one_hot(jnp.asarray(y).astype(int) - 1, classes, dtype=pi.dtype)
    blocks = jax.vmap(jnp.diag)(pi) - pi[:, :, None] * pi[:, None, :]
    return jnp.sum(onehot * log_pi), jnp.ravel(onehot - pi), blocks


def block_diagonal(blocks) -> jax.Array:
    """The ``(N C, N C)`` matrix with the ``C x C`` ``blocks`` on its diagonal."""
    count, size, _ = blocks.shape
    return jnp.reshape(jnp.einsum("nij,nm->nimj", blocks, jnp.eye(count, dtype=blocks.dtype)),
                       (count * size, count * size))


def _symmetric_root(block):
    values, vectors = eigh(block)
    return (vectors * jnp.sqrt(jnp.clip(values, 0.0, None))) @ vectors.T


def multiclass_laplace(K, y, classes: int, tol=None, max_iter: int = 100, offset=None) -> MulticlassLaplace:
    """The Laplace approximation of ``p(f | y)`` for ``y ~ categorical_logit(f)`` and ``f ~ N(0, K)``.

    Newton's method from ``f = 0`` until the squared norm of the change in ``f`` is below ``tol`` or ``max_iter``
    iterations, each step halved (at most ten times) until the objective ``-a^T f / 2 + log p(y | f)`` does not
    decrease; works under ``jit`` and ``vmap``.

    Parameters
    ----------
    K : array_like, shape (n, n)
        Prior covariance of ``f`` (row by row, ``n = N * classes``).
    y : array_like, shape (N,)
        Labels in ``1..classes``.
    classes : int
        The number of classes ``C``. Static under ``jit``.
    tol : float, optional
        Convergence threshold on ``||f_new - f_old||^2``; ``n / 1e4`` by default.
    max_iter : int
        Iteration limit (``converged`` is then False). Static under ``jit``.
    offset : array_like, optional
        The likelihood acts on ``f + offset`` (broadcast to ``(n,)``).

    Returns
    -------
    MulticlassLaplace
    """
    K = jnp.asarray(K, dtype=jnp.float64)
    n = K.shape[0]
    offset = jnp.zeros(n) if offset is None else jnp.broadcast_to(jnp.asarray(offset, dtype=K.dtype), (n,))
    tol = n / 1e4 if tol is None else tol
    return _multiclass_laplace(K, jnp.asarray(y), classes, jnp.asarray(tol, K.dtype), max_iter, offset)


@partial(jax.jit, static_argnames=("classes", "max_iter"))
def _multiclass_laplace(K, y, classes, tol, max_iter, offset):
    n = K.shape[0]
    eye = jnp.eye(n, dtype=K.dtype)

    def objective(a, f):
        return -0.5 * a @ f + softmax_derivatives(y, f, classes, offset)[0]

    def newton_step(state):
        f, a, _, _, _, iteration = state
        _, grad, blocks = softmax_derivatives(y, f, classes, offset)
        root = block_diagonal(jax.vmap(_symmetric_root)(blocks))
        L = cholesky(eye + root @ K @ root)
        b = jnp.ravel(jnp.einsum("nij,nj->ni", blocks, jnp.reshape(f, (-1, classes)))) + grad
        direction = b - root @ cho_solve((L, True), root @ (K @ b)) - a
        a_new, f_new = halve_until_better(objective, K, a, f, direction)
        return f_new, a_new, root, L, jnp.sum((f_new - f) ** 2), iteration + 1

    def not_done(state):
        return (state[4] >= tol) & (state[5] < max_iter)

    zeros = jnp.zeros(n, dtype=K.dtype)
    start = (zeros, zeros, eye, eye, jnp.asarray(jnp.inf, K.dtype), jnp.asarray(0))
    f, a, root, L, change, iterations = lax.while_loop(not_done, newton_step, start)
    return MulticlassLaplace(mean=f, alpha=a, root_w=root, chol_b=L,
                             log_marginal=objective(a, f) - jnp.sum(jnp.log(jnp.diag(L))),
                             converged=change < tol, iterations=iterations, cubic_ops=iterations)


def covariance(approx: MulticlassLaplace, K) -> jax.Array:
    """``Sigma = (K^-1 + W)^-1 = K - K S B^-1 S K`` (one triangular solve with ``n`` right-hand sides)."""
    V = solve_triangular(approx.chol_b, approx.root_w @ K, lower=True)
    return K - V.T @ V


def sample(approx: MulticlassLaplace, K, key, num: int) -> jax.Array:
    """``num`` draws of ``q``, shape ``(num, n)`` (one more Cholesky factorisation, of ``Sigma``)."""
    chol_sigma, _ = cholesky_with_jitter(covariance(approx, K))
    return approx.mean + jax.random.normal(key, (num, K.shape[0]), dtype=K.dtype) @ chol_sigma.T


def log_prior_minus_log_q(approx: MulticlassLaplace, draws) -> jax.Array:
    """``log N(f | 0, K) - log q(f)`` of each draw (rows of ``draws``), with no ``K^-1``:
    ``-alpha^T f + alpha^T m / 2 + (f - m)^T W (f - m) / 2 - log |B| / 2`` (``W = S S``)."""
    deviations = (draws - approx.mean) @ approx.root_w
    return (-draws @ approx.alpha + 0.5 * approx.alpha @ approx.mean + 0.5 * jnp.sum(deviations ** 2, axis=-1)
            - jnp.sum(jnp.log(jnp.diag(approx.chol_b))))
