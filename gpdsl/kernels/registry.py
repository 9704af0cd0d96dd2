"""Kernel classes by their model-language names, paired with the entries of :mod:`gpdsl.kernel_table`."""

from __future__ import annotations

from gpdsl.errors import ModelCheckError
from gpdsl.kernel_table import KERNEL_SPECS, KernelSpec, kernel_spec
from gpdsl.kernels.combinators import Changepoint, Warp
from gpdsl.kernels.coregion import Coregion, CoregionCorr
from gpdsl.kernels.dot_product import MLP, Linear, Polynomial
from gpdsl.kernels.nonstationary import Gibbs
from gpdsl.kernels.spectral import Cosine, SpectralMixture
from gpdsl.kernels.static import Constant, Same, White
from gpdsl.kernels.stationary import RBF, Matern, Matern12, Matern32, Matern52, Periodic, RationalQuadratic

__all__ = ["KERNELS", "KERNEL_SPECS", "KernelSpec", "build_kernel", "kernel_spec", "register_kernel",
           "unregister_kernel"]

KERNELS = {cls.spec.name: cls
           for cls in (RBF, Matern12, Matern32, Matern52, Periodic, Linear, White, Constant, Same, MLP,
                        RationalQuadratic, Cosine, Polynomial, SpectralMixture, Matern, Changepoint, Warp, Gibbs,
                        Coregion, CoregionCorr)}
"""Kernel classes by model-language name; each class's ``spec`` is its :data:`KERNEL_SPECS` entry."""


def register_kernel(kernel_class: type, replace: bool = False) -> type:
    """Add a kernel to the language: its class to :data:`KERNELS` and its ``spec`` to :data:`KERNEL_SPECS`.

    The checker, the JAX lowering and the Stan code generator read both tables when they run, so a model
    checked after this call may use the kernel. Its closed-form psi statistics, if any, are registered
    separately (:func:`gpdsl.kernels.psi.register_term`).

    Parameters
    ----------
    kernel_class : type
        A :class:`~gpdsl.kernels.Kernel` subclass whose ``spec`` is a :class:`KernelSpec` and whose
        constructor takes the spec's parameters, then ``active_dims``.
    replace : bool
        Allow replacing a kernel of the same name.

    Returns
    -------
    type
        ``kernel_class``.

    Raises
    ------
    ModelCheckError
        The class has no ``spec``, the spec has no Stan spelling, or the name is taken (and ``replace`` is
        False).
    """
    spec = getattr(kernel_class, "spec", None)
    if not isinstance(spec, KernelSpec):
        raise ModelCheckError(f"kernel class {kernel_class.__name__} has no spec (a gpdsl.kernel_table.KernelSpec)")
    if not spec.stan:
        raise ModelCheckError(f"kernel '{spec.name}' has no Stan spelling (KernelSpec.stan)")
    if spec.name in KERNEL_SPECS and not replace:
        raise ModelCheckError(f"a kernel named '{spec.name}' is already registered")
    KERNEL_SPECS[spec.name] = spec
    KERNELS[spec.name] = kernel_class
    return kernel_class


def unregister_kernel(name: str) -> None:
    """Remove the kernel ``name`` from :data:`KERNELS` and :data:`KERNEL_SPECS` (for plugins and tests)."""
    KERNEL_SPECS.pop(name, None)
    KERNELS.pop(name, None)


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
