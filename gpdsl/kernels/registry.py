"""Kernel constructors by their model-language names."""

from __future__ import annotations

import difflib

from gpdsl.errors import ModelCheckError
from gpdsl.kernels.dot_product import MLP, Linear
from gpdsl.kernels.spec import KernelSpec
from gpdsl.kernels.static import Constant, White
from gpdsl.kernels.stationary import RBF, Matern12, Matern32, Matern52, Periodic
from gpdsl.source import Span

KERNELS = {
    "rbf": RBF,
    "matern12": Matern12,
    "matern32": Matern32,
    "matern52": Matern52,
    "periodic": Periodic,
    "linear": Linear,
    "white": White,
    "constant": Constant,
    "mlp": MLP,
}
"""Kernel classes by model-language name; each has a ``spec`` :class:`KernelSpec`."""

KERNEL_SPECS: dict[str, KernelSpec] = {name: cls.spec for name, cls in KERNELS.items()}
"""Call signatures by model-language name."""


def kernel_spec(name: str, span: Span | None = None) -> KernelSpec:
    """Look up a kernel's call signature by name.

    Parameters
    ----------
    name : str
        Model-language name, e.g. ``"rbf"``.
    span : Span, optional
        Location of the call, attached to the error.

    Raises
    ------
    ModelCheckError
        No kernel has this name; the hint suggests the closest one.
    """
    if name in KERNEL_SPECS:
        return KERNEL_SPECS[name]
    close = difflib.get_close_matches(name, KERNEL_SPECS, n=1)
    hint = f"did you mean '{close[0]}'?" if close else f"known kernels: {', '.join(KERNEL_SPECS)}"
    raise ModelCheckError(f"unknown kernel '{name}'", span, hint)


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
