"""The Hilbert-space approximate GP in the JAX lowering: ``f = PHI (sqrt(S(omega)) .* z) + mean``, ``z ~ N(0, I)``.

The basis (:mod:`gpdsl.numerics.hsgp`) depends on the training inputs alone, so it is computed once from the data;
the spectral density ``S`` of the kernel (:meth:`gpdsl.kernels.Kernel.spectral_density`) carries the
hyperparameters. The generated Stan program computes the same basis in its transformed data.

A periodic term of the kernel's sum (a periodic kernel, possibly scaled) under ``approx = hsgp(m = J)`` is its cosine
series instead (:class:`PeriodicSeriesBasis`): the basis ``1, cos(j w t), sin(j w t)`` and weights of variances the
series' coefficients (:meth:`gpdsl.kernels.stationary.Periodic.series_coefficients`); a kernel with such terms has
the bases of its parts side by side (:class:`TermBases`). Each basis says the variances of its weights under a kernel
(``weight_variances``), which is all the engines ask of it.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property, reduce

import jax.numpy as jnp
import numpy as np

from gpdsl.backends.jax.hsgp_map import LaplacianBasisMap, basis_cosines
from gpdsl.ir import nodes as ir
from gpdsl.ir.periodic_series import checked_series_period, has_series, is_series_term, series_size, sum_terms
from gpdsl.kernels import Kernel
from gpdsl.kernels.composite import Scale, Sum
from gpdsl.numerics.hsgp import basis_indices, eigenfunctions, frequencies, hsgp_box, periodic_series_basis


@dataclass(frozen=True)
class HSGPBasis:
    """The basis of one HSGP latent.

    Attributes
    ----------
    indices : numpy.ndarray, shape (M, D)
        Index tuples of the tensor-product basis.
    centre, half_widths : numpy.ndarray, shape (D,)
        The box ``[centre - L, centre + L]``.
    omega : numpy.ndarray, shape (M, D)
        Square roots of the eigenvalues per dimension.
    phi : numpy.ndarray, shape (N, M)
        The basis functions at the training inputs.
    angles : numpy.ndarray, shape (N, D)
        ``pi (x_nd - centre_d + L_d) / (2 L_d)`` at the training inputs: ``phi_j(x) = prod_d sin(j_d angle_d) /
        sqrt(L_d)``.
    """

    indices: np.ndarray
    centre: np.ndarray
    half_widths: np.ndarray
    omega: np.ndarray
    phi: np.ndarray
    angles: np.ndarray

    @property
    def size(self) -> int:
        """The number of basis functions ``M``."""
        return int(self.indices.shape[0])

    @property
    def dim(self) -> int:
        """The number of input columns ``D``."""
        return int(self.centre.size)

    def at(self, X) -> np.ndarray:
        """The basis functions at other inputs ``X`` (N*, D), on the training inputs' box (predictions)."""
        return eigenfunctions(X, self.centre, self.half_widths, self.indices)

    def weight_variances(self, kernel: Kernel) -> jnp.ndarray:
        """The prior variances of the weights under ``kernel``: its spectral density at ``omega``, shape (M,)."""
        return kernel.spectral_density(jnp.asarray(self.omega))

    @cached_property
    def cosines(self) -> tuple[np.ndarray, ...]:
        """Per dimension, the cosines of multiples of the training inputs' angles that :meth:`linear_map` sums."""
        return basis_cosines(self.angles, tuple(int(k) for k in self.indices.max(axis=0)))

    def linear_map(self, scale) -> LaplacianBasisMap:
        """``A = PHI diag(scale)`` as a map: its products without forming ``A``, ``A^T diag(w) A`` in
        ``O(N prod_d (2 m_d + 1))`` (:mod:`gpdsl.backends.jax.hsgp_map`)."""
        return LaplacianBasisMap(jnp.asarray(self.phi), tuple(jnp.asarray(c) for c in self.cosines),
                                 jnp.asarray(scale), jnp.asarray(np.prod(0.5 / self.half_widths)),
                                 tuple(c.shape[1] // 2 for c in self.cosines))


@dataclass(frozen=True)
class PeriodicSeriesBasis:
    """The basis of a periodic kernel's cosine series truncated after ``order`` harmonics (one input column).

    Attributes
    ----------
    order : int
        The harmonics ``J`` (the statement's ``m``).
    period : float
        The kernel's period (a number, or data: known before sampling).
    phi : numpy.ndarray, shape (N, 2 J + 1), or (N, 2 J) without the constant
        :func:`gpdsl.numerics.hsgp.periodic_series_basis` at the training inputs.
    constant : bool
        Whether the series keeps its constant harmonic (the statement's ``constant``).
    """

    order: int
    period: float
    phi: np.ndarray
    constant: bool = True

    @property
    def size(self) -> int:
        """The number of basis functions ``2 J + 1`` (``2 J`` without the constant)."""
        return series_size(self.order, self.constant)

    @property
    def dim(self) -> int:
        """The number of input columns, 1."""
        return 1

    def at(self, X) -> np.ndarray:
        """The basis functions at other inputs ``X`` (N*, 1)."""
        return periodic_series_basis(X, self.period, self.order, self.constant)

    def weight_variances(self, kernel: Kernel) -> jnp.ndarray:
        """``c_0, c_1, c_1, ..., c_J, c_J``: the series coefficients of ``kernel``, a periodic kernel under scalings
        (without ``c_0`` when the series has no constant)."""
        scale = 1.0
        while isinstance(kernel, Scale):
            scale, kernel = scale * kernel.scale, kernel.kernel
        coefficients, _ = kernel.series_coefficients(self.order)
        harmonics = jnp.repeat(coefficients[1:], 2)
        return scale * (jnp.concatenate([coefficients[:1], harmonics]) if self.constant else harmonics)


@dataclass(frozen=True)
class TermBases:
    """The basis of a kernel sum with periodic terms: a basis per part side by side.

    Attributes
    ----------
    parts : tuple of (tuple of int, HSGPBasis or PeriodicSeriesBasis)
        Each part's terms (positions in the kernel's sum, :func:`kernel_terms`) and its basis: one
        :class:`PeriodicSeriesBasis` per periodic term, one :class:`HSGPBasis` shared by the other terms (if any).
    """

    parts: tuple

    @cached_property
    def phi(self) -> np.ndarray:
        """The parts' basis functions at the training inputs, side by side: ``(N, M)``."""
        return np.concatenate([basis.phi for _, basis in self.parts], axis=1)

    @property
    def size(self) -> int:
        """The number of basis functions ``M`` of all the parts."""
        return sum(basis.size for _, basis in self.parts)

    @property
    def dim(self) -> int:
        """The number of input columns, 1."""
        return 1

    def at(self, X) -> np.ndarray:
        """The parts' basis functions at other inputs ``X`` (N*, 1), side by side."""
        return np.concatenate([basis.at(X) for _, basis in self.parts], axis=1)

    def weight_variances(self, kernel: Kernel) -> jnp.ndarray:
        """Each part's weight variances under the sum of its terms of ``kernel``, concatenated: ``(M,)``."""
        terms = kernel_terms(kernel)
        return jnp.concatenate([basis.weight_variances(reduce(operator.add, [terms[i] for i in indices]))
                                for indices, basis in self.parts])


def kernel_terms(kernel: Kernel) -> list[Kernel]:
    """The terms of a JAX kernel's top-level sum, left to right, as :func:`gpdsl.ir.periodic_series.sum_terms` splits
    the statement's kernel it was built from."""
    if isinstance(kernel, Sum):
        return kernel_terms(kernel.k1) + kernel_terms(kernel.k2)
    return [kernel]


def basis_size(statement: ir.GPStatement) -> int:
    """The number of basis functions of an HSGP statement: the product of its ``m`` over the input columns, and
    ``2 m + 1`` more per periodic term of its kernel's sum (``2 m`` under ``constant = 0``)."""
    terms = sum_terms(statement.kernel)
    series = sum(is_series_term(term) for term in terms)
    laplacian = int(np.prod(_per_dimension(statement))) if series < len(terms) else 0
    return laplacian + series * series_size(_per_dimension(statement)[0], _keeps_constant(statement))


def hsgp_basis(statement: ir.GPStatement, X, data: Mapping | None = None) -> HSGPBasis | TermBases:
    """The basis of an HSGP statement on its training inputs ``X`` (N, D): the Laplacian's eigenfunctions on a box
    around the inputs, with a cosine series beside them for each periodic term of the kernel's sum (its period
    evaluated on ``data`` where it reads data).

    Raises
    ------
    DataError
        An input column has the same value at every point, or a period given as data is not a positive number.
    """
    if has_series(statement.kernel):
        return _term_bases(statement, X, data)
    return _laplacian_basis(statement, X)


def _term_bases(statement: ir.GPStatement, X, data: Mapping | None) -> TermBases:
    order, constant = _per_dimension(statement)[0], _keeps_constant(statement)
    periods = [checked_series_period(statement, term, data) for term in sum_terms(statement.kernel)]
    parts = [((i,), PeriodicSeriesBasis(order, period, periodic_series_basis(X, period, order, constant), constant))
             for i, period in enumerate(periods) if period is not None]
    others = tuple(i for i, period in enumerate(periods) if period is None)
    if others:
        parts.insert(0, (others, _laplacian_basis(statement, X)))
    return TermBases(tuple(parts))


def _laplacian_basis(statement: ir.GPStatement, X) -> HSGPBasis:
    approximation = statement.approximation
    indices = basis_indices(_per_dimension(statement))
    X = np.asarray(X, dtype=float)
    names = [n for n in statement.inputs.names if n]
    where = f"the inputs {', '.join(names)} of '{statement.target.name}'" if names else \
        f"the inputs of '{statement.target.name}'"
    centre, L = hsgp_box(X, float(approximation.value("c")), where)
    angles = (X.reshape(len(X), -1) - centre + L) * np.pi / (2.0 * L)
    return HSGPBasis(indices, centre, L, frequencies(indices, L), eigenfunctions(X, centre, L, indices), angles)


def hsgp_values(kernel: Kernel, basis, phi, weights) -> jnp.ndarray:
    """``PHI (sqrt(S(omega)) .* z)``: the approximate GP's values at the rows of ``phi`` (traceable), the variances
    ``S(omega)`` from ``basis.weight_variances``."""
    return jnp.asarray(phi) @ (jnp.sqrt(basis.weight_variances(kernel)) * weights)


def _per_dimension(statement: ir.GPStatement) -> tuple[int, ...]:
    m = statement.approximation.value("m")
    return tuple(int(k) for k in m) if isinstance(m, tuple) else (int(m),) * int(statement.inputs.dim)


def _keeps_constant(statement: ir.GPStatement) -> bool:
    return bool(statement.approximation.value("constant"))
