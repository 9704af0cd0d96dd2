"""The state-space form of a kernel over a scalar input: a linear SDE whose output has the kernel's covariance.

A stationary kernel ``k(tau)`` of a scalar input has a state-space form when it is the covariance of ``f(t) = H
s(t)``, ``s`` the stationary solution of ``ds = F s dt + L dW`` driven by white noise ``W`` of spectral density
``Qc`` (Hartikainen & Särkkä 2010; Särkkä & Solin 2019, ch. 12). The state's stationary covariance ``P_inf``
solves the Lyapunov equation ``F P_inf + P_inf F^T + L Qc L^T = 0`` and ``k(tau) = H expm(F tau) P_inf H^T`` for
``tau >= 0``. Between two times ``dt`` apart the state moves by ``A = expm(F dt)`` with noise covariance ``P_inf -
A P_inf A^T``, which gives Kalman filters and smoothers in ``O(N)``.

A kernel says whether it has the form by ``has_state_space`` (a class attribute, a property of the composites);
one that has implements :meth:`~gpdsl.kernels.base.Kernel.state_space` and, where a closed form is exact or
cheaper than ``expm``, :meth:`~gpdsl.kernels.base.Kernel.discretise`. The forms compose by the functions here: a
sum stacks its terms' states (:func:`stacked`: ``F``, ``L``, ``Qc`` and ``P_inf`` block diagonal, ``H`` side by
side), a product takes Kronecker products (:func:`kronecker`: ``F = F_1 ⊕ F_2``, ``P_inf = P_1 ⊗ P_2``, ``H = H_1
⊗ H_2``, ``A = A_1 ⊗ A_2``), a scale multiplies ``Qc`` and ``P_inf`` (:func:`scaled`). A periodic kernel has no
finite form; its truncated cosine series has one (:func:`cosine_series`, Solin & Särkkä 2014), with
``periodic_order`` terms: every ``state_space``/``discretise`` takes that order and composites pass it on.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import i0e

from gpdsl.kernel_table import PERIODIC_ORDER  # noqa: F401  (re-exported: the default order of every form)

_BESSEL_RATIO_DEPTH = 64
"""Extra levels of the continued fraction of the modified Bessel function ratios beyond the order needed."""


class StateSpace(NamedTuple):
    """The linear SDE ``ds = F s dt + L dW``, ``f = H s``, of a kernel, with its stationary covariance.

    Attributes
    ----------
    F : jax.Array, shape (d, d)
        Feedback matrix.
    L : jax.Array, shape (d, m)
        Noise effect matrix.
    Qc : jax.Array, shape (m, m)
        Spectral density of the white noise ``W``.
    H : jax.Array, shape (1, d)
        Measurement matrix: ``f = H s``.
    P_inf : jax.Array, shape (d, d)
        Stationary covariance of ``s``: ``F P_inf + P_inf F^T + L Qc L^T = 0``.
    """

    F: jax.Array
    L: jax.Array
    Qc: jax.Array
    H: jax.Array
    P_inf: jax.Array


def block_diagonal(first, second) -> jax.Array:
    """The block-diagonal matrix of two matrices, or of two stacks of matrices (leading axes broadcast)."""
    first, second = jnp.asarray(first), jnp.asarray(second)
    lead = jnp.broadcast_shapes(first.shape[:-2], second.shape[:-2])
    first = jnp.broadcast_to(first, lead + first.shape[-2:])
    second = jnp.broadcast_to(second, lead + second.shape[-2:])
    top = jnp.concatenate([first, jnp.zeros(lead + (first.shape[-2], second.shape[-1]))], axis=-1)
    bottom = jnp.concatenate([jnp.zeros(lead + (second.shape[-2], first.shape[-1])), second], axis=-1)
    return jnp.concatenate([top, bottom], axis=-2)


def kron(first, second) -> jax.Array:
    """Kronecker product of two matrices, or of two stacks of matrices (leading axes broadcast)."""
    first, second = jnp.asarray(first), jnp.asarray(second)
    product = first[..., :, None, :, None] * second[..., None, :, None, :]
    shape = product.shape
    return jnp.reshape(product, shape[:-4] + (shape[-4] * shape[-3], shape[-2] * shape[-1]))


def stacked(first: StateSpace, second: StateSpace) -> StateSpace:
    """The state-space form of a sum: the two states side by side, independent."""
    return StateSpace(block_diagonal(first.F, second.F), block_diagonal(first.L, second.L),
                      block_diagonal(first.Qc, second.Qc), jnp.concatenate([first.H, second.H], axis=-1),
                      block_diagonal(first.P_inf, second.P_inf))


def kronecker(first: StateSpace, second: StateSpace) -> StateSpace:
    """The state-space form of a product: the Kronecker product of the two states.

    ``F = F_1 ⊗ I + I ⊗ F_2`` and ``P_inf = P_1 ⊗ P_2``, so the noise ``L Qc L^T = -(F P_inf + P_inf F^T)`` is
    ``N_1 ⊗ P_2 + P_1 ⊗ N_2`` (``N_i = L_i Qc_i L_i^T``): ``L = [L_1 ⊗ I, I ⊗ L_2]`` with ``Qc`` block diagonal
    ``(Qc_1 ⊗ P_2, P_1 ⊗ Qc_2)``.
    """
    eye_1, eye_2 = jnp.eye(first.F.shape[-1]), jnp.eye(second.F.shape[-1])
    return StateSpace(kron(first.F, eye_2) + kron(eye_1, second.F),
                      jnp.concatenate([kron(first.L, eye_2), kron(eye_1, second.L)], axis=-1),
                      block_diagonal(kron(first.Qc, second.P_inf), kron(first.P_inf, second.Qc)),
                      kron(first.H, second.H), kron(first.P_inf, second.P_inf))


def scaled(form: StateSpace, scale) -> StateSpace:
    """The state-space form of ``scale * k``: the noise and the stationary covariance scale."""
    return form._replace(Qc=scale * form.Qc, P_inf=scale * form.P_inf)


@partial(jax.jit, static_argnums=1)
def cosine_series_weights(concentration, order: int) -> jax.Array:
    """``exp(-z) I_j(z)`` for ``j = 0 .. order``: the modified Bessel functions of the first kind, scaled.

    ``I_0`` from :func:`jax.scipy.special.i0e`; the ratios ``I_j / I_{j-1} = z / (2 j + z I_{j+1} / I_j)`` by their
    continued fraction from ``order + 64`` levels down (stable, differentiable in ``z``; accurate to rounding
    for ``z`` up to a few hundred).

    Parameters
    ----------
    concentration : scalar array
        ``z > 0``.
    order : int
        The highest ``j`` (static).

    Returns
    -------
    jax.Array, shape (order + 1,)
    """
    z = jnp.asarray(concentration, dtype=jnp.float64)

    def level(ratio, j):
        ratio = z / (2.0 * j + z * ratio)
        return ratio, ratio

    levels = jnp.arange(order + _BESSEL_RATIO_DEPTH, 0, -1, dtype=jnp.float64)
    _, ratios = jax.lax.scan(level, jnp.zeros_like(z), levels)
    ratios = ratios[::-1][:order]  # I_j / I_{j-1}, j = 1 .. order
    return i0e(z) * jnp.concatenate([jnp.ones(1), jnp.cumprod(ratios)])


def _harmonic_indices(order: int):
    """The rows of each harmonic's two components in the state of :func:`cosine_series` (numpy, static)."""
    first = 2 * np.arange(1, order + 1) - 1
    return first, first + 1


def cosine_series(coefficients, frequency) -> StateSpace:
    """The state-space form of ``sum_j c_j cos(j frequency tau)``, ``j = 0 .. J`` (Solin & Särkkä 2014).

    The constant term is a state of one dimension with ``F = 0``; each harmonic ``j >= 1`` an undamped resonator
    of two dimensions, ``F_j = [[0, -j w], [j w, 0]]`` with ``P_inf = c_j I`` and no driving noise (``L = 0``),
    read through its first component. The state has ``2 J + 1`` dimensions.

    Parameters
    ----------
    coefficients : jax.Array, shape (J + 1,)
        Non-negative ``c_j``.
    frequency : scalar array
        Angular frequency ``w = 2 pi / period``.

    Returns
    -------
    StateSpace
    """
    order = coefficients.shape[0] - 1
    d = 2 * order + 1
    first, second = _harmonic_indices(order)
    rates = frequency * jnp.arange(1, order + 1)
    F = jnp.zeros((d, d)).at[second, first].set(rates).at[first, second].set(-rates)
    variances = jnp.concatenate([coefficients[:1], jnp.repeat(coefficients[1:], 2)])
    H = jnp.zeros((1, d)).at[0, 0].set(1.0).at[0, first].set(1.0)
    return StateSpace(F, jnp.zeros((d, 1)), jnp.zeros((1, 1)), H, jnp.diag(variances))


def cosine_series_transitions(order: int, frequency, dt) -> jax.Array:
    """``expm(F dt)`` of :func:`cosine_series`: a rotation by ``j frequency dt`` per harmonic, shape ``dt.shape + (d, d)``."""
    dt = jnp.asarray(dt, dtype=jnp.float64)
    angles = dt[..., None] * (frequency * jnp.arange(1, order + 1))
    cos, sin = jnp.cos(angles), jnp.sin(angles)
    rotations = jnp.stack([jnp.stack([cos, -sin], -1), jnp.stack([sin, cos], -1)], -2)  # (..., J, 2, 2)
    spread = jnp.eye(order)[:, None, :, None] * rotations[..., :, :, None, :]  # (..., J, 2, J, 2)
    harmonics = jnp.reshape(spread, dt.shape + (2 * order, 2 * order))
    return block_diagonal(jnp.ones(dt.shape + (1, 1)), harmonics)
