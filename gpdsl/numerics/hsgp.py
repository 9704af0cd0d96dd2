"""The Hilbert-space GP approximation's basis, in NumPy (Solin & Särkkä 2020; Riutort-Mayol et al. 2023).

On the box ``[-L_1, L_1] x ... x [-L_D, L_D]`` around the centre of the inputs, the Laplacian with Dirichlet
boundary conditions has eigenfunctions ``phi_j(x) = prod_d L_d^(-1/2) sin(sqrt(lambda_jd) (x_d - centre_d + L_d))``
and eigenvalues ``lambda_j = sum_d lambda_jd``, ``sqrt(lambda_jd) = j_d pi / (2 L_d)``, for the index tuples ``j``
of ``1..m_1`` x ... x ``1..m_D`` (:func:`basis_indices`, the last dimension varying fastest). A stationary kernel
with spectral density ``S`` is then ``k(x, x') ~ sum_j S(sqrt(lambda_j)) phi_j(x) phi_j(x')``, the frequency vector
``sqrt(lambda_j)`` taken per dimension (:func:`frequencies`), and a GP is ``f = PHI (sqrt(S) .* z)``, ``z ~ N(0,
I)``. ``L_d = c`` times the half range of the inputs' column ``d`` (:func:`hsgp_box`). The generated Stan program
computes the same quantities in its transformed data (``stan_templates/hsgp.stan``).

:func:`shortest_lengthscale` and :func:`smallest_boundary_factor` are the paper's rules (section 4.3) relating
``m``, ``c``, the half range ``S`` and the length-scale for the rbf and Matérn-3/2 and -5/2 kernels.
"""

from __future__ import annotations

import itertools

import numpy as np

from gpdsl.errors import DataError

LENGTHSCALE_RULES = {"rbf": (1.75, 3.2), "matern32": (3.42, 4.5), "matern52": (2.65, 4.1)}
"""Per kernel, the paper's constants ``(a, b)``: ``m`` basis functions with boundary factor ``c`` represent
length-scales down to ``a c S / m``, and ``c`` must be at least ``b l / S`` (and 1.2) for a length-scale ``l``
(Riutort-Mayol et al. 2023, section 4.3)."""


def basis_indices(m) -> np.ndarray:
    """The index tuples of the tensor-product basis: ``(prod m, D)`` whole numbers from 1, last column fastest.

    Parameters
    ----------
    m : sequence of int
        Basis functions per input dimension.
    """
    return np.array(list(itertools.product(*(range(1, int(k) + 1) for k in m))), dtype=np.int64).reshape(-1, len(m))


def hsgp_box(X, c: float, name: str = "the inputs") -> tuple[np.ndarray, np.ndarray]:
    """The centre of the inputs and the half-widths ``L = c * max_n |x_nd - centre_d|`` of the box, per column.

    Parameters
    ----------
    X : array_like, shape (N, D)
        The training inputs.
    c : float
        The boundary factor (> 1).
    name : str
        The inputs' name, for the error.

    Raises
    ------
    DataError
        A column has no spread (all its inputs equal), so the box is empty.
    """
    X = np.asarray(X, dtype=float).reshape(len(X), -1)
    centre = (X.max(axis=0) + X.min(axis=0)) / 2.0
    half_range = np.abs(X - centre).max(axis=0)
    if np.any(half_range <= 0):
        column = int(np.flatnonzero(half_range <= 0)[0]) + 1
        raise DataError(f"{name}: column {column} has the same value at every point; hsgp needs inputs that vary "
                        "(its box is c times their half range)")
    return centre, c * half_range


def frequencies(indices, L) -> np.ndarray:
    """The square roots of the eigenvalues per dimension, ``j_d pi / (2 L_d)``: ``(M, D)``."""
    return np.asarray(indices, dtype=float) * np.pi / (2.0 * np.asarray(L, dtype=float))


def eigenfunctions(X, centre, L, indices) -> np.ndarray:
    """The basis functions at the rows of ``X``: ``(N, M)``, column ``j`` holding ``phi_j``."""
    X = np.asarray(X, dtype=float).reshape(len(X), -1)
    L = np.asarray(L, dtype=float)
    omega = frequencies(indices, L)
    shifted = X - np.asarray(centre, dtype=float) + L
    return np.prod(np.sin(shifted[:, None, :] * omega[None, :, :]) / np.sqrt(L), axis=-1)


def shortest_lengthscale(kernel: str, m: int, c: float, half_range: float) -> float | None:
    """The shortest length-scale that ``m`` basis functions with boundary factor ``c`` represent well over inputs of
    half range ``half_range``, by the paper's rule for ``kernel``; None for a kernel it gives no rule for."""
    rule = LENGTHSCALE_RULES.get(kernel)
    return None if rule is None else rule[0] * c * half_range / m


def smallest_boundary_factor(kernel: str, lengthscale: float, half_range: float) -> float | None:
    """The smallest boundary factor ``c`` the paper's rule admits for ``lengthscale`` (at least 1.2); None for a
    kernel it gives no rule for."""
    rule = LENGTHSCALE_RULES.get(kernel)
    return None if rule is None else max(1.2, rule[1] * lengthscale / half_range)


def periodic_series_basis(t, period: float, order: int, constant: bool = True) -> np.ndarray:
    """The basis of a periodic kernel's cosine series at the points ``t`` (N,) or (N, 1): ``(N, 2 order + 1)``,
    the columns ``1, cos(w t), sin(w t), cos(2 w t), sin(2 w t), ...`` with ``w = 2 pi / period``; without the
    column of ones when ``constant`` is false, ``(N, 2 order)``.

    ``cos(j w (t - t')) = cos(j w t) cos(j w t') + sin(j w t) sin(j w t')``, so weights of variances ``c_0, c_1,
    c_1, ..., c_J, c_J`` give the covariance ``sum_j c_j cos(j w (t - t'))``."""
    t = np.asarray(t, dtype=float).reshape(-1)
    angles = t[:, None] * (2.0 * np.pi / float(period)) * np.arange(1, int(order) + 1)[None, :]
    harmonics = np.stack([np.cos(angles), np.sin(angles)], axis=-1).reshape(len(t), 2 * int(order))
    return np.concatenate([np.ones((len(t), 1)), harmonics], axis=1) if constant else harmonics
