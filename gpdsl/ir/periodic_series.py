"""The periodic terms of an HSGP statement's kernel: each a periodic kernel's truncated cosine series.

Under ``approx = hsgp(m = J)`` the kernel of a GP over one input column is a sum of terms; a term that is a periodic
kernel (possibly scaled) is approximated by its cosine series truncated after ``J`` harmonics (Solin & Särkkä 2014;
Riutort-Mayol et al. 2023, periodic covariance functions): the basis ``1, cos(j w t), sin(j w t)``, ``j = 1 .. J``,
``w = 2 pi / period``, its weights of variances the series' coefficients; the other terms share the Laplacian
eigenfunctions. The series basis depends on the period, so the period must be a constant.
"""

from __future__ import annotations

from gpdsl.ir import nodes as ir


def sum_terms(kernel: ir.Kernel) -> list[ir.Kernel]:
    """The terms of a kernel's top-level sum, left to right (the kernel itself when it is no sum)."""
    if isinstance(kernel, ir.KernelSum):
        return sum_terms(kernel.left) + sum_terms(kernel.right)
    return [kernel]


def periodic_leaf(kernel: ir.Kernel) -> ir.KernelLeaf | None:
    """The periodic kernel under the scalings that make up ``kernel``, or None when ``kernel`` is anything else."""
    while isinstance(kernel, ir.KernelScale):
        kernel = kernel.kernel
    if isinstance(kernel, ir.KernelLeaf) and not isinstance(kernel, ir.KernelCombination) \
            and kernel.name == "periodic":
        return kernel
    return None


def series_period(term: ir.Kernel) -> float | None:
    """The constant period of a periodic term (:func:`periodic_leaf`), or None when it is no such term."""
    leaf = periodic_leaf(term)
    if leaf is None:
        return None
    period = leaf.param("period")
    return float(period.value) if isinstance(period, ir.Constant) else None


def has_series(kernel: ir.Kernel) -> bool:
    """Whether some term of the kernel's sum is a periodic kernel with a constant period."""
    return any(series_period(term) is not None for term in sum_terms(kernel))


def series_size(order: int) -> int:
    """The number of basis functions of a cosine series with ``order`` harmonics: ``2 order + 1``."""
    return 2 * int(order) + 1
