"""The Hilbert-space approximate GP in the JAX lowering: ``f = PHI (sqrt(S(omega)) .* z) + mean``, ``z ~ N(0, I)``.

The basis (:mod:`gpdsl.numerics.hsgp`) depends on the training inputs alone, so it is computed once from the data;
the spectral density ``S`` of the kernel (:meth:`gpdsl.kernels.Kernel.spectral_density`) carries the
hyperparameters. The generated Stan program computes the same basis in its transformed data.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from gpdsl.ir import nodes as ir
from gpdsl.kernels import Kernel
from gpdsl.numerics.hsgp import basis_indices, eigenfunctions, frequencies, hsgp_box


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
    """

    indices: np.ndarray
    centre: np.ndarray
    half_widths: np.ndarray
    omega: np.ndarray
    phi: np.ndarray

    @property
    def size(self) -> int:
        """The number of basis functions ``M``."""
        return int(self.indices.shape[0])

    def at(self, X) -> np.ndarray:
        """The basis functions at other inputs ``X`` (N*, D), on the training inputs' box (predictions)."""
        return eigenfunctions(X, self.centre, self.half_widths, self.indices)


def basis_size(statement: ir.GPStatement) -> int:
    """The number of basis functions of an HSGP statement: the product of its ``m`` over the input columns."""
    return int(np.prod(_per_dimension(statement)))


def hsgp_basis(statement: ir.GPStatement, X) -> HSGPBasis:
    """The basis of an HSGP statement on its training inputs ``X`` (N, D).

    Raises
    ------
    DataError
        An input column has the same value at every point.
    """
    approximation = statement.approximation
    indices = basis_indices(_per_dimension(statement))
    X = np.asarray(X, dtype=float)
    names = [n for n in statement.inputs.names if n]
    where = f"the inputs {', '.join(names)} of '{statement.target.name}'" if names else \
        f"the inputs of '{statement.target.name}'"
    centre, L = hsgp_box(X, float(approximation.value("c")), where)
    return HSGPBasis(indices, centre, L, frequencies(indices, L), eigenfunctions(X, centre, L, indices))


def hsgp_values(kernel: Kernel, basis_omega, phi, weights) -> jnp.ndarray:
    """``PHI (sqrt(S(omega)) .* z)``: the approximate GP's values at the rows of ``phi`` (traceable)."""
    density = kernel.spectral_density(jnp.asarray(basis_omega))
    return jnp.asarray(phi) @ (jnp.sqrt(density) * weights)


def _per_dimension(statement: ir.GPStatement) -> tuple[int, ...]:
    m = statement.approximation.value("m")
    return tuple(int(k) for k in m) if isinstance(m, tuple) else (int(m),) * int(statement.inputs.dim)
