"""Kernel classes by their model-language names, paired with the entries of :mod:`gpdsl.kernel_table`."""

from __future__ import annotations

from gpdsl.kernel_table import KERNEL_SPECS, KernelSpec, kernel_spec
from gpdsl.kernels.dot_product import MLP, Linear
from gpdsl.kernels.static import Constant, Same, White
from gpdsl.kernels.stationary import RBF, Matern12, Matern32, Matern52, Periodic

__all__ = ["KERNELS", "KERNEL_SPECS", "KernelSpec", "build_kernel", "kernel_spec"]

KERNELS = {cls.spec.name: cls
           for cls in (RBF, Matern12, Matern32, Matern52, Periodic, Linear, White, Constant, Same, MLP)}
"""Kernel classes by model-language name; each class's ``spec`` is its :data:`KERNEL_SPECS` entry."""


def build_kernel(name: str, *args, active_dims=None, **params):
    """Construct a kernel by model-language name, e.g. ``build_kernel("rbf", lengthscale=0.5)``.

    Raises
    ------
    ModelCheckError
        Unknown kernel or arguments that do not fit its :class:`KernelSpec`.
    """
    spec = kernel_spec(name)
    spec.bind(len(args), params)
    return KERNELS[name](*args, active_dims=active_dims, **params)
