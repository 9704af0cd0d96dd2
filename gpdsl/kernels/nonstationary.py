"""Non-stationary kernels: a length-scale that varies with the input."""

from __future__ import annotations

import jax.numpy as jnp

from gpdsl.errors import ModelCheckError
from gpdsl.kernel_table import KERNEL_SPECS
from gpdsl.kernels.base import Kernel


class Gibbs(Kernel):
    """Gibbs's kernel over one input with the length-scale ``l(x) = lengthscale exp(slope x)``.

    ``k(x, x') = variance sqrt(2 l(x) l(x') / (l(x)^2 + l(x')^2)) exp(-(x - x')^2 / (l(x)^2 + l(x')^2))``
    (Gibbs 1997; Rasmussen & Williams 2006, eq. 4.32 with ``D = 1``): positive definite for any positive
    length-scale function; with ``slope = 0`` it is :class:`RBF` ``(variance, lengthscale)``.

    Parameters
    ----------
    variance : float
        Marginal variance.
    lengthscale : float
        The length-scale at ``x = 0``.
    slope : float
        The rate of change of ``log l(x)`` per unit of ``x`` (any real; 0 is stationary).
    active_dims : tuple of int or slice, optional
        The one input column the kernel sees.
    """

    spec = KERNEL_SPECS["gibbs"]

    def __init__(self, variance=1.0, lengthscale=None, slope=0.0, *, active_dims=None):
        self._set_hyperparameters(active_dims, variance=variance, lengthscale=lengthscale, slope=slope)

    def local_lengthscale(self, x):
        """``l(x) = lengthscale exp(slope x)`` at a scalar input ``x``."""
        return self.lengthscale * jnp.exp(self.slope * x)

    def evaluate(self, x1, x2):
        if x1.shape[-1] != 1:
            raise ModelCheckError(f"gibbs() acts on one input column, got {x1.shape[-1]}")
        l1, l2 = self.local_lengthscale(x1[0]), self.local_lengthscale(x2[0])
        total = jnp.square(l1) + jnp.square(l2)
        return self.variance * jnp.sqrt(2.0 * l1 * l2 / total) * jnp.exp(-jnp.square(x1[0] - x2[0]) / total)
