"""Kernels built from other kernels: sums, products and scalar scaling."""

from __future__ import annotations

import jax.numpy as jnp

from gpdsl.errors import ModelCheckError
from gpdsl.kernels.base import Kernel
from gpdsl.kernels.state_space import PERIODIC_ORDER, StateSpace, block_diagonal, kron, kronecker, scaled, stacked


class Sum(Kernel):
    """``k1(x, x') + k2(x, x')``; same-index terms add as well.

    Parameters
    ----------
    k1, k2 : Kernel
        The summands; each applies its own ``active_dims``.
    """

    def __init__(self, k1: Kernel, k2: Kernel):
        self._set_params({"k1": k1, "k2": k2})

    def pair(self, x1, x2):
        return self.k1.pair(x1, x2) + self.k2.pair(x1, x2)

    def same(self, x):
        return self.k1.same(x) + self.k2.same(x)

    @property
    def has_state_space(self) -> bool:
        return self.k1.has_state_space and self.k2.has_state_space

    def state_space(self, periodic_order: int = PERIODIC_ORDER) -> StateSpace:
        """The terms' states stacked (:func:`~gpdsl.kernels.state_space.stacked`)."""
        return stacked(self.k1.state_space(periodic_order), self.k2.state_space(periodic_order))

    def discretise(self, dt, periodic_order: int = PERIODIC_ORDER):
        """Block-diagonal transitions and stationary covariance of the terms' own :meth:`discretise`."""
        (A1, P1), (A2, P2) = self.k1.discretise(dt, periodic_order), self.k2.discretise(dt, periodic_order)
        return block_diagonal(A1, A2), block_diagonal(P1, P2)

    def spectral_density(self, omega):
        return self.k1.spectral_density(omega) + self.k2.spectral_density(omega)


class Product(Kernel):
    """``k1(x, x') * k2(x, x')``; at the same index the factors' same-index values multiply.

    With factors on different ``active_dims`` this is a separable kernel, e.g.
    ``RBF(lengthscale=l_t, active_dims=(0,)) * RBF(lengthscale=l_x, active_dims=(1, 2))``.

    Parameters
    ----------
    k1, k2 : Kernel
        The factors; each applies its own ``active_dims``.
    """

    def __init__(self, k1: Kernel, k2: Kernel):
        self._set_params({"k1": k1, "k2": k2})

    def pair(self, x1, x2):
        return self.k1.pair(x1, x2) * self.k2.pair(x1, x2)

    def same(self, x):
        return self.k1.same(x) * self.k2.same(x)

    @property
    def has_state_space(self) -> bool:
        return self.k1.has_state_space and self.k2.has_state_space

    def state_space(self, periodic_order: int = PERIODIC_ORDER) -> StateSpace:
        """The Kronecker product of the factors' states (:func:`~gpdsl.kernels.state_space.kronecker`)."""
        return kronecker(self.k1.state_space(periodic_order), self.k2.state_space(periodic_order))

    def discretise(self, dt, periodic_order: int = PERIODIC_ORDER):
        """Kronecker products of the factors' transitions and stationary covariances."""
        (A1, P1), (A2, P2) = self.k1.discretise(dt, periodic_order), self.k2.discretise(dt, periodic_order)
        return kron(A1, A2), kron(P1, P2)


class Scale(Kernel):
    """``scale * k(x, x')`` for a scalar (possibly traced) ``scale``.

    ``scale`` multiplies the covariance, so it plays the role of a variance
    (``sigma**2 * RBF(...)`` for a marginal standard deviation ``sigma``).

    Parameters
    ----------
    scale : float or scalar array
        The factor.
    kernel : Kernel
        The scaled kernel.
    """

    def __init__(self, scale, kernel: Kernel):
        scale = jnp.asarray(scale, dtype=jnp.float64)
        if scale.ndim != 0:
            raise ModelCheckError(f"a kernel can only be scaled by a scalar, got shape {scale.shape}")
        self._set_params({"scale": scale, "kernel": kernel})

    def pair(self, x1, x2):
        return self.scale * self.kernel.pair(x1, x2)

    def same(self, x):
        return self.scale * self.kernel.same(x)

    @property
    def has_state_space(self) -> bool:
        return self.kernel.has_state_space

    def state_space(self, periodic_order: int = PERIODIC_ORDER) -> StateSpace:
        """The kernel's state with ``Qc`` and ``P_inf`` scaled (:func:`~gpdsl.kernels.state_space.scaled`)."""
        return scaled(self.kernel.state_space(periodic_order), self.scale)

    def discretise(self, dt, periodic_order: int = PERIODIC_ORDER):
        """The kernel's transitions, its stationary covariance scaled."""
        A, P_inf = self.kernel.discretise(dt, periodic_order)
        return A, self.scale * P_inf

    def spectral_density(self, omega):
        return self.scale * self.kernel.spectral_density(omega)
