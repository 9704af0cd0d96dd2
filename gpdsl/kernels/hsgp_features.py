"""The Hilbert-space approximation of a kernel as a kernel of its own: ``k(x, x') = phi(x)^T diag(S) phi(x')``.

On the box ``[centre - L, centre + L]`` the basis functions are the Laplacian's sine eigenfunctions
``phi_j(x) = prod_d L_d^(-1/2) sin(omega_jd (x_d - centre_d + L_d))``, ``omega_jd = j_d pi / (2 L_d)``, over the
index tuples of ``1..m_1 x ... x 1..m_D`` (last dimension fastest, :func:`gpdsl.numerics.hsgp.basis_indices`), and
``S_j`` is the spectral density of the approximated kernel at ``omega_j`` (Solin & Särkkä 2020; Riutort-Mayol et al.
2023). Over data inputs the box comes from the inputs' range (:mod:`gpdsl.backends.jax.hsgp`); over latent inputs
(a GPLVM) from their prior (:mod:`gpdsl.ir.latent_hsgp`), and this kernel is what the model's GP is: the engines
evaluate it like any kernel, and its Psi statistics have closed forms (:mod:`gpdsl.kernels.psi.hsgp`).
"""

from __future__ import annotations

from functools import cached_property

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.kernels.base import Kernel
from gpdsl.numerics.hsgp import basis_indices, frequencies


class HSGPFeatureKernel(Kernel):
    """The HSGP approximation of ``kernel`` on a fixed box, as a finite feature expansion.

    Parameters
    ----------
    kernel : Kernel
        A stationary kernel with a spectral density (:meth:`Kernel.spectral_density`), over all ``D`` columns.
    centre, half_widths : sequence of float, length D
        The box ``[centre - L, centre + L]``.
    m : sequence of int, length D
        Basis functions per dimension; ``M = prod(m)`` in all.
    """

    def __init__(self, kernel: Kernel, centre, half_widths, m):
        self.kernel = kernel
        self.centre = tuple(float(c) for c in np.ravel(centre))
        self.half_widths = tuple(float(h) for h in np.ravel(half_widths))
        self.m = tuple(int(k) for k in np.ravel(m))
        if not len(self.centre) == len(self.half_widths) == len(self.m):
            raise ValueError(f"centre, half_widths and m need one entry per input column; got {len(self.centre)}, "
                             f"{len(self.half_widths)} and {len(self.m)}")

    def tree_flatten(self):
        """The approximated kernel is the only child; the box and the basis sizes are static."""
        return (self.kernel,), (self.centre, self.half_widths, self.m)

    @classmethod
    def tree_unflatten(cls, aux, children):
        """The kernel of :meth:`tree_flatten`'s ``aux`` around the child kernel."""
        return cls(children[0], *aux)

    @property
    def dim(self) -> int:
        """The number of input columns ``D``."""
        return len(self.m)

    @property
    def size(self) -> int:
        """The number of basis functions ``M``."""
        return int(np.prod(self.m))

    @cached_property
    def indices(self) -> np.ndarray:
        """Index tuples of the tensor-product basis, ``(M, D)``."""
        return basis_indices(self.m)

    @cached_property
    def omega(self) -> np.ndarray:
        """Square roots of the eigenvalues per dimension, ``(M, D)``."""
        return frequencies(self.indices, self.half_widths)

    def axis_frequencies(self, d: int) -> np.ndarray:
        """The frequencies ``j pi / (2 L_d)``, ``j = 1..m_d``, of dimension ``d``: ``(m_d,)``."""
        return np.arange(1, self.m[d] + 1) * np.pi / (2.0 * self.half_widths[d])

    def weight_variances(self) -> jax.Array:
        """``S_j``: the approximated kernel's spectral density at each ``omega_j``, shape ``(M,)`` (traceable)."""
        return self.kernel.spectral_density(jnp.asarray(self.omega))

    def features(self, X) -> jax.Array:
        """The basis functions at the rows of ``X`` (N, D): ``(N, M)`` (traceable)."""
        X = jnp.asarray(X, dtype=jnp.float64)
        X = X[:, None] if X.ndim == 1 else X
        half = jnp.asarray(self.half_widths)
        shifted = X - jnp.asarray(self.centre) + half
        return jnp.prod(jnp.sin(shifted[:, None, :] * jnp.asarray(self.omega)[None]) / jnp.sqrt(half), axis=-1)

    def evaluate(self, x1, x2):
        return self.cross(x1[None, :], x2[None, :])[0, 0]

    def cross(self, X1, X2):
        """``Phi(X1) diag(S) Phi(X2)^T``."""
        return (self.features(X1) * self.weight_variances()) @ self.features(X2).T

    def gram(self, X):
        """``Phi(X) diag(S) Phi(X)^T`` (no same-index terms)."""
        phi = self.features(X)
        return (phi * self.weight_variances()) @ phi.T

    def diag(self, X):
        """``sum_j S_j phi_j(x_n)^2``."""
        return jnp.sum(jnp.square(self.features(X)) * self.weight_variances(), axis=-1)
