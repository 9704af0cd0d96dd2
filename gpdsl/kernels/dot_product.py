"""Non-stationary kernels built from (weighted) inner products of the inputs."""

from __future__ import annotations

import jax.numpy as jnp

from gpdsl.kernel_table import KERNEL_SPECS
from gpdsl.kernels.base import Kernel
from gpdsl.kernels.params import check_ard, sum_over_inputs


class Linear(Kernel):
    """Linear kernel ``sum_d v_d x_d x'_d``.

    Matches ``GPy.kern.Linear``.

    Parameters
    ----------
    variance : float or array of shape (d,)
        One shared (scalar) or per-dimension (ARD) variance of the linear coefficients.
    active_dims : tuple of int or slice, optional
        Input columns the kernel sees.
    """

    spec = KERNEL_SPECS["linear"]

    def __init__(self, variance=1.0, *, active_dims=None):
        self._set_hyperparameters(active_dims, variance=variance)

    def evaluate(self, x1, x2):
        check_ard(self.variance, "variance", "linear", x1.shape[-1])
        return sum_over_inputs(self.variance * x1 * x2)


class MLP(Kernel):
    """Arc-sine (multi-layer perceptron) kernel, as ``GPy.kern.MLP``.

    ``k(x, x') = variance * 2/pi * asin((p(x, x') / sqrt((p(x, x) + 1) (p(x', x') + 1)))``
    with ``p(x, x') = sum_d w_d x_d x'_d + b``, ``w`` the ``weight_variance`` and ``b`` the
    ``bias_variance``.

    Parameters
    ----------
    variance : float
        Overall scale.
    weight_variance : float or array of shape (d,)
        Prior variance of the hidden-unit weights, shared or per dimension (ARD).
    bias_variance : float
        Prior variance of the hidden-unit bias.
    active_dims : tuple of int or slice, optional
        Input columns the kernel sees.
    """

    spec = KERNEL_SPECS["mlp"]

    def __init__(self, variance=1.0, weight_variance=1.0, bias_variance=1.0, *, active_dims=None):
        self._set_hyperparameters(
            active_dims, variance=variance, weight_variance=weight_variance, bias_variance=bias_variance
        )

    def evaluate(self, x1, x2):
        check_ard(self.weight_variance, "weight_variance", "mlp", x1.shape[-1])

        def inner(a, b):
            return sum_over_inputs(self.weight_variance * a * b) + self.bias_variance

        ratio = inner(x1, x2) / jnp.sqrt((inner(x1, x1) + 1.0) * (inner(x2, x2) + 1.0))
        return self.variance * (2.0 / jnp.pi) * jnp.arcsin(ratio)


class Polynomial(Kernel):
    """Polynomial kernel ``(sum_d v_d x_d x'_d + bias)^degree``.

    GPflow's ``Polynomial`` (its ``offset`` is ``bias`` here, GPy's name). A whole ``degree`` of at least 1
    and a ``bias`` of at least 0 make it a covariance; ``Polynomial(v, 0, 1)`` is :class:`Linear` ``(v)``.

    Parameters
    ----------
    variance : float or array of shape (d,)
        One shared (scalar) or per-dimension (ARD) weight of the inner product.
    bias : float
        Non-negative offset added to the inner product.
    degree : int
        The power, a whole number of at least 1.
    active_dims : tuple of int or slice, optional
        Input columns the kernel sees.
    """

    spec = KERNEL_SPECS["polynomial"]

    def __init__(self, variance=1.0, bias=1.0, degree=None, *, active_dims=None):
        self._set_hyperparameters(active_dims, variance=variance, bias=bias, degree=degree)

    def evaluate(self, x1, x2):
        check_ard(self.variance, "variance", self.spec.name, x1.shape[-1])
        return jnp.power(sum_over_inputs(self.variance * x1 * x2) + self.bias, self.degree)
