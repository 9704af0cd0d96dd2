"""Kernels with kernel-valued arguments: a change point between two kernels, and input warping."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.errors import ModelCheckError
from gpdsl.kernel_table import KERNEL_SPECS
from gpdsl.kernels.base import Kernel
from gpdsl.kernels.params import check_ard, select_columns


class Changepoint(Kernel):
    """A change from one kernel to another along one input column.

    ``k(x, x') = (1 - s(x)) before(x, x') (1 - s(x')) + s(x) after(x, x') s(x')`` with the sigmoid
    ``s(x) = 1 / (1 + exp(-steepness (x - location)))``: ``before`` well below ``location``, ``after``
    well above it (GPflow's ``ChangePoints`` with one change point). Each term is a covariance scaled by a
    function of the input on both sides, so the sum is one.

    Parameters
    ----------
    before, after : Kernel
        The kernels on either side; each applies its own ``active_dims``.
    location : float
        Where the sigmoid is 1/2.
    steepness : float
        Positive rate of the sigmoid (a change over about ``4 / steepness``).
    active_dims : tuple of int or slice, optional
        The one input column of the sigmoid.
    """

    spec = KERNEL_SPECS["changepoint"]

    def __init__(self, before=None, after=None, location=None, steepness=1.0, *, active_dims=None):
        self._set_hyperparameters(active_dims, before=before, after=after, location=location, steepness=steepness)

    def weight(self, x):
        """``s(x)`` of a single point given with all input columns."""
        t = select_columns(x, self.active_dims)
        if t.shape[-1] != 1:
            raise ModelCheckError(f"changepoint() acts on one input column, got {t.shape[-1]}")
        return jax.nn.sigmoid(self.steepness * (t[0] - self.location))

    def pair(self, x1, x2):
        s1, s2 = self.weight(x1), self.weight(x2)
        return (1.0 - s1) * (1.0 - s2) * self.before.pair(x1, x2) + s1 * s2 * self.after.pair(x1, x2)

    def same(self, x):
        s = self.weight(x)
        return jnp.square(1.0 - s) * self.before.same(x) + jnp.square(s) * self.after.same(x)


class Warp(Kernel):
    """A kernel on inputs warped by the Kumaraswamy CDF ``w(x) = 1 - (1 - x^a)^b`` (for ``x`` in [0, 1]).

    ``k(x, x') = kernel(w(x), w(x'))``, where ``w`` acts on the columns ``active_dims`` (each with its own
    ``a_d``, ``b_d`` when they are vectors) and leaves the others as they are; a monotone map of [0, 1]
    onto itself, the identity for ``a = b = 1`` (Snoek et al. 2014's input warping, PyMC's
    ``WarpedInput`` example). Inputs outside [0, 1] are clamped to it, as in the Stan function (the data
    checks refuse such data inputs).

    Parameters
    ----------
    kernel : Kernel
        The kernel of the warped inputs.
    a, b : float or array of shape (d,)
        Positive shapes of the Kumaraswamy CDF, shared or one per warped column.
    active_dims : tuple of int or slice, optional
        The columns warped; all by default.
    """

    spec = KERNEL_SPECS["warp"]

    def __init__(self, kernel=None, a=1.0, b=1.0, *, active_dims=None):
        self._set_hyperparameters(active_dims, kernel=kernel, a=a, b=b)

    def warped(self, x):
        """A single point (all input columns) with the warped columns replaced by ``w(x)``."""
        columns = jnp.clip(select_columns(x, self.active_dims), 0.0, 1.0)
        check_ard(self.a, "a", self.spec.name, columns.shape[-1])
        check_ard(self.b, "b", self.spec.name, columns.shape[-1])
        values = 1.0 - _power(1.0 - _power(columns, self.a), self.b)
        if self.active_dims is None:
            return values
        where = slice(*self.active_dims[1:]) if self.active_dims[0] == "slice" else np.asarray(self.active_dims)
        return x.at[..., where].set(values)

    def pair(self, x1, x2):
        return self.kernel.pair(self.warped(x1), self.warped(x2))

    def same(self, x):
        return self.kernel.same(self.warped(x))


def _power(base, exponent):
    """``base ** exponent`` for ``base >= 0``: zero at zero, with finite gradients there."""
    positive = base > 0
    return jnp.where(positive, jnp.exp(exponent * jnp.log(jnp.where(positive, base, 1.0))), 0.0)
