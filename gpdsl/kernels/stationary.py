"""Stationary kernels: functions of the scaled distance between inputs."""

from __future__ import annotations

import jax.numpy as jnp

from gpdsl.errors import ModelCheckError
from gpdsl.kernels.base import Kernel
from gpdsl.kernels.params import (
    as_param,
    check_ard,
    safe_sqrt,
    scaled_sqdist,
    sum_over_inputs,
)
from gpdsl.kernels.spec import KernelSpec, ParamSpec

_VARIANCE = ParamSpec("variance", default=1.0)
_LENGTHSCALE = ParamSpec("lengthscale", required=True, ard_allowed=True)


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

    spec = KernelSpec(
        "rbf",
        {
            "variance": _VARIANCE,
            "lengthscale": ParamSpec("lengthscale", ard_allowed=True),
            "inv_ls2": ParamSpec("inv_ls2", ard_allowed=True),
        },
        exclusive=(("lengthscale", "inv_ls2"),),
    )
    lengthscale = None
    inv_ls2 = None

    def __init__(self, variance=1.0, lengthscale=None, inv_ls2=None, *, active_dims=None):
        if (lengthscale is None) == (inv_ls2 is None):
            raise ModelCheckError("rbf() needs exactly one of lengthscale, inv_ls2")
        form = "lengthscale" if lengthscale is not None else "inv_ls2"
        value = lengthscale if lengthscale is not None else inv_ls2
        self._set_params(
            {
                "variance": as_param(variance, "variance", "rbf", False),
                form: as_param(value, form, "rbf", True),
            },
            active_dims,
        )

    def evaluate(self, x1, x2):
        scale = self.lengthscale if self.lengthscale is not None else self.inv_ls2
        check_ard(scale, self._param_names[1], "rbf", x1.shape[-1])
        r2 = scaled_sqdist(x1, x2, self.lengthscale, self.inv_ls2)
        return self.variance * jnp.exp(-0.5 * r2)


class _Matern(Kernel):
    name = ""

    def __init__(self, variance=1.0, lengthscale=None, *, active_dims=None):
        if lengthscale is None:
            raise ModelCheckError(f"{self.name}() is missing required parameter 'lengthscale'")
        self._set_params(
            {
                "variance": as_param(variance, "variance", self.name, False),
                "lengthscale": as_param(lengthscale, "lengthscale", self.name, True),
            },
            active_dims,
        )

    def evaluate(self, x1, x2):
        check_ard(self.lengthscale, "lengthscale", self.name, x1.shape[-1])
        r = safe_sqrt(scaled_sqdist(x1, x2, self.lengthscale))
        return self.variance * self.profile(r)

    @staticmethod
    def profile(r):
        raise NotImplementedError


class Matern12(_Matern):
    """Matérn-1/2 (exponential) kernel ``variance * exp(-r)``.

    ``r = sqrt(sum_d (x_d - x'_d)^2 / l_d^2)``. Matches ``GPy.kern.Exponential``.

    Parameters
    ----------
    variance : float
        Marginal variance.
    lengthscale : float or array of shape (d,)
        Isotropic or ARD length-scale.
    active_dims : tuple of int or slice, optional
        Input columns the kernel sees.
    """

    name = "matern12"
    spec = KernelSpec(name, {"variance": _VARIANCE, "lengthscale": _LENGTHSCALE})

    @staticmethod
    def profile(r):
        return jnp.exp(-r)


class Matern32(_Matern):
    """Matérn-3/2 kernel ``variance * (1 + sqrt(3) r) * exp(-sqrt(3) r)``.

    ``r = sqrt(sum_d (x_d - x'_d)^2 / l_d^2)``. Matches ``GPy.kern.Matern32``.

    Parameters
    ----------
    variance : float
        Marginal variance.
    lengthscale : float or array of shape (d,)
        Isotropic or ARD length-scale.
    active_dims : tuple of int or slice, optional
        Input columns the kernel sees.
    """

    name = "matern32"
    spec = KernelSpec(name, {"variance": _VARIANCE, "lengthscale": _LENGTHSCALE})

    @staticmethod
    def profile(r):
        s = jnp.sqrt(3.0) * r
        return (1.0 + s) * jnp.exp(-s)


class Matern52(_Matern):
    """Matérn-5/2 kernel ``variance * (1 + sqrt(5) r + 5 r^2 / 3) * exp(-sqrt(5) r)``.

    ``r = sqrt(sum_d (x_d - x'_d)^2 / l_d^2)``. Matches ``GPy.kern.Matern52``.

    Parameters
    ----------
    variance : float
        Marginal variance.
    lengthscale : float or array of shape (d,)
        Isotropic or ARD length-scale.
    active_dims : tuple of int or slice, optional
        Input columns the kernel sees.
    """

    name = "matern52"
    spec = KernelSpec(name, {"variance": _VARIANCE, "lengthscale": _LENGTHSCALE})

    @staticmethod
    def profile(r):
        s = jnp.sqrt(5.0) * r
        return (1.0 + s + s * s / 3.0) * jnp.exp(-s)


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

    spec = KernelSpec(
        "periodic",
        {
            "variance": _VARIANCE,
            "lengthscale": _LENGTHSCALE,
            "period": ParamSpec("period", required=True, ard_allowed=True),
        },
    )

    def __init__(self, variance=1.0, lengthscale=None, period=None, *, active_dims=None):
        for name, value in (("lengthscale", lengthscale), ("period", period)):
            if value is None:
                raise ModelCheckError(f"periodic() is missing required parameter '{name}'")
        self._set_params(
            {
                "variance": as_param(variance, "variance", "periodic", False),
                "lengthscale": as_param(lengthscale, "lengthscale", "periodic", True),
                "period": as_param(period, "period", "periodic", True),
            },
            active_dims,
        )

    def evaluate(self, x1, x2):
        check_ard(self.lengthscale, "lengthscale", "periodic", x1.shape[-1])
        check_ard(self.period, "period", "periodic", x1.shape[-1])
        sines = jnp.sin(jnp.pi * (x1 - x2) / self.period) / self.lengthscale
        return self.variance * jnp.exp(-0.5 * sum_over_inputs(jnp.square(sines)))
