"""Stationary kernels: functions of the scaled distance between inputs."""

from __future__ import annotations

import jax.numpy as jnp

from gpdsl.errors import ModelCheckError
from gpdsl.kernel_table import KERNEL_SPECS
from gpdsl.kernels.base import Kernel
from gpdsl.kernels.params import check_ard, safe_sqrt, scaled_sqdist, sum_over_inputs


class RBF(Kernel):
    r"""Squared-exponential kernel ``variance * exp(-r^2 / 2)``.

    ``r^2 = sum_d (x_d - x'_d)^2 / l_d^2`` with ``lengthscale`` ``l``, or equivalently
    ``r^2 = sum_d w_d (x_d - x'_d)^2`` with inverse squared length-scales
    ``inv_ls2`` ``w_d = 1 / l_d^2`` (GPy/Titsias ARD weights). Give exactly one of the two.
    Matches ``GPy.kern.RBF``.

    Parameters
    ----------
    variance : float
        Marginal variance ``k(x, x)``.
    lengthscale : float or array of shape (d,), optional
        Isotropic (scalar) or ARD (one per active input dimension) length-scale.
    inv_ls2 : float or array of shape (d,), optional
        Inverse squared length-scale(s), instead of ``lengthscale``.
    active_dims : tuple of int or slice, optional
        Input columns the kernel sees; all by default.
    """

    spec = KERNEL_SPECS["rbf"]
    lengthscale = None
    inv_ls2 = None

    def __init__(self, variance=1.0, lengthscale=None, inv_ls2=None, *, active_dims=None):
        if (lengthscale is None) == (inv_ls2 is None):
            raise ModelCheckError("rbf() needs exactly one of lengthscale, inv_ls2")
        if lengthscale is not None:
            self._set_hyperparameters(active_dims, variance=variance, lengthscale=lengthscale)
        else:
            self._set_hyperparameters(active_dims, variance=variance, inv_ls2=inv_ls2)

    def evaluate(self, x1, x2):
        scale = self.lengthscale if self.lengthscale is not None else self.inv_ls2
        check_ard(scale, self._param_names[1], "rbf", x1.shape[-1])
        r2 = scaled_sqdist(x1, x2, self.lengthscale, self.inv_ls2)
        return self.variance * jnp.exp(-0.5 * r2)


def _matern_doc(title: str, name: str, gpy: str) -> str:
    """The docstring of a Matérn kernel class: its covariance is the table's doc text."""
    return f"""{title} kernel ``{KERNEL_SPECS[name].doc}``.

    ``r = sqrt(sum_d (x_d - x'_d)^2 / l_d^2)``. Matches ``GPy.kern.{gpy}``.

    Parameters
    ----------
    variance : float
        Marginal variance.
    lengthscale : float or array of shape (d,)
        Isotropic or ARD length-scale.
    active_dims : tuple of int or slice, optional
        Input columns the kernel sees.
    """


class _Matern(Kernel):
    """A half-integer Matérn kernel ``variance * polynomial(s) * exp(-s)`` with ``s = sqrt(2 nu) r``.

    A subclass gives its :mod:`gpdsl.kernel_table` name, the title and GPy class its docstring names
    (:func:`_matern_doc`) and ``two_nu`` (``2 nu``) as class keywords, and defines the static method
    ``polynomial``.
    """

    two_nu: float

    def __init_subclass__(cls, *, name: str, title: str, gpy: str, two_nu: float, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.spec = KERNEL_SPECS[name]
        cls.__doc__ = _matern_doc(title, name, gpy)
        cls.two_nu = two_nu

    def __init__(self, variance=1.0, lengthscale=None, *, active_dims=None):
        self._set_hyperparameters(active_dims, variance=variance, lengthscale=lengthscale)

    def evaluate(self, x1, x2):
        check_ard(self.lengthscale, "lengthscale", self.spec.name, x1.shape[-1])
        s = jnp.sqrt(self.two_nu) * safe_sqrt(scaled_sqdist(x1, x2, self.lengthscale))
        return self.variance * (self.polynomial(s) * jnp.exp(-s))


class Matern12(_Matern, name="matern12", title="Matérn-1/2 (exponential)", gpy="Exponential", two_nu=1.0):
    @staticmethod
    def polynomial(s):
        return 1.0


class Matern32(_Matern, name="matern32", title="Matérn-3/2", gpy="Matern32", two_nu=3.0):
    @staticmethod
    def polynomial(s):
        return 1.0 + s


class Matern52(_Matern, name="matern52", title="Matérn-5/2", gpy="Matern52", two_nu=5.0):
    @staticmethod
    def polynomial(s):
        return 1.0 + s + s * s / 3.0


class Periodic(Kernel):
    """Standard periodic kernel in GPy's ``StdPeriodic`` parameterisation.

    ``k(x, x') = variance * exp(-1/2 * sum_d sin^2(pi (x_d - x'_d) / p_d) / l_d^2)``

    This is GPy's form, with the factor ``1/2`` and the sum over dimensions inside the
    exponential. MacKay's form ``exp(-2 sin^2(pi |x - x'| / p) / l^2)`` is the same kernel
    with ``l_MacKay = 2 * l``.

    Parameters
    ----------
    variance : float
        Marginal variance.
    lengthscale : float or array of shape (d,)
        Isotropic or ARD length-scale (GPy's ``ARD2``).
    period : float or array of shape (d,)
        Isotropic or per-dimension period (GPy's ``ARD1``).
    active_dims : tuple of int or slice, optional
        Input columns the kernel sees.
    """

    spec = KERNEL_SPECS["periodic"]

    def __init__(self, variance=1.0, lengthscale=None, period=None, *, active_dims=None):
        self._set_hyperparameters(active_dims, variance=variance, lengthscale=lengthscale, period=period)

    def evaluate(self, x1, x2):
        check_ard(self.lengthscale, "lengthscale", "periodic", x1.shape[-1])
        check_ard(self.period, "period", "periodic", x1.shape[-1])
        sines = jnp.sin(jnp.pi * (x1 - x2) / self.period) / self.lengthscale
        return self.variance * jnp.exp(-0.5 * sum_over_inputs(jnp.square(sines)))
