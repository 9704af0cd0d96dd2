"""Kernels without a length-scale: white noise, a constant, and the indicator of equal inputs."""

from __future__ import annotations

import jax.numpy as jnp

from gpdsl.kernel_table import KERNEL_SPECS
from gpdsl.kernels.base import Kernel
from gpdsl.kernels.state_space import PERIODIC_ORDER, StateSpace


class _VarianceOnly(Kernel):
    """A kernel whose one hyperparameter is ``variance`` and which ignores the input values.

    ``active_dims`` is accepted for uniformity with the other kernels and has no effect.
    """

    def __init__(self, variance=1.0, *, active_dims=None):
        self._set_hyperparameters(active_dims, variance=variance)


class White(_VarianceOnly):
    """Independent noise: ``variance`` between a point and itself at the same index, else 0.

    Follows ``GPy.kern.White``: ``k(X)`` (one argument, :meth:`~Kernel.gram`) is
    ``variance * I`` even when rows of ``X`` repeat, while ``k(X1, X2)``
    (:meth:`~Kernel.cross`) is zero even when ``X1`` and ``X2`` hold the same points.
    Adding ``White(1e-6)`` to a kernel is the usual way to add jitter.

    Parameters
    ----------
    variance : float
        Noise variance.
    active_dims : tuple of int or slice, optional
        Accepted for uniformity; has no effect.
    """

    spec = KERNEL_SPECS["white"]

    def evaluate(self, x1, x2):
        return jnp.zeros((), dtype=self.variance.dtype)

    def evaluate_same(self, x):
        return self.variance


class Constant(_VarianceOnly):
    """Constant kernel ``k(x, x') = variance`` (GPy's ``Bias``).

    Parameters
    ----------
    variance : float
        Variance of a shared offset.
    active_dims : tuple of int or slice, optional
        Accepted for uniformity; has no effect.
    """

    spec = KERNEL_SPECS["constant"]
    has_state_space = True

    def evaluate(self, x1, x2):
        return self.variance

    def state_space(self, periodic_order: int = PERIODIC_ORDER) -> StateSpace:
        """:meth:`Kernel.state_space`: a state of one dimension that never moves (``F = 0``, no noise)."""
        return StateSpace(jnp.zeros((1, 1)), jnp.zeros((1, 1)), jnp.zeros((1, 1)), jnp.ones((1, 1)),
                          jnp.reshape(self.variance, (1, 1)))

    def discretise(self, dt, periodic_order: int = PERIODIC_ORDER):
        """:meth:`Kernel.discretise`: ``A = 1`` at every step."""
        return jnp.ones(jnp.shape(dt) + (1, 1)), jnp.reshape(self.variance, (1, 1))


class Same(Kernel):
    """``k(x, x') = 1`` when ``x`` and ``x'`` agree in every active input, else 0.

    Over a group label (a sequence number) it makes points of different groups independent: ``rbf(t) *
    same(sequence)`` is the block-diagonal covariance of independent sequences that share one kernel
    (Damianou, Titsias & Lawrence 2016, end of Sec. 3.3.2).

    Parameters
    ----------
    active_dims : tuple of int or slice, optional
        The input columns compared (all by default).
    """

    spec = KERNEL_SPECS["same"]

    def __init__(self, *, active_dims=None):
        self._set_params({}, active_dims)

    def evaluate(self, x1, x2):
        return jnp.all(x1 == x2).astype(jnp.float64)
