"""Closed-form psi statistics of sums, scalar scalings and products with a constant kernel."""

from __future__ import annotations

from gpdsl.kernels.composite import Product, Scale, Sum
from gpdsl.kernels.psi.closed_form import register_expansion
from gpdsl.kernels.static import Constant


@register_expansion(Sum)
def _sum(kernel, coefficient):
    return [(coefficient, kernel.k1), (coefficient, kernel.k2)]


@register_expansion(Scale)
def _scale(kernel, coefficient):
    return [(coefficient * kernel.scale, kernel.kernel)]


@register_expansion(Product)
def _product(kernel, coefficient):
    """A product with a Constant is a scaling; any other product has no closed form here."""
    if type(kernel.k1) is Constant:
        return [(coefficient * kernel.k1.variance, kernel.k2)]
    if type(kernel.k2) is Constant:
        return [(coefficient * kernel.k2.variance, kernel.k1)]
    return None
