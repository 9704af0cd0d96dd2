"""Which HSGP statements are a periodic kernel's truncated cosine series.

Under ``approx = hsgp(m = J)`` a periodic kernel over one input column (possibly scaled) is approximated by its
cosine series truncated after ``J`` harmonics (Solin & Särkkä 2014; Riutort-Mayol et al. 2023, section on
periodic kernels): the basis ``1, cos(j w t), sin(j w t)``, ``j = 1 .. J``, ``w = 2 pi / period``, with weights of
variances the series' coefficients. The basis depends on the period, so the period must be a constant.
"""

from __future__ import annotations

from gpdsl.ir import nodes as ir


def periodic_leaf(kernel: ir.Kernel) -> ir.KernelLeaf | None:
    """The periodic kernel under the scalings that make up ``kernel``, or None when ``kernel`` is anything else."""
    while isinstance(kernel, ir.KernelScale):
        kernel = kernel.kernel
    if isinstance(kernel, ir.KernelLeaf) and not isinstance(kernel, ir.KernelCombination) \
            and kernel.name == "periodic":
        return kernel
    return None


def series_period(kernel: ir.Kernel) -> float | None:
    """The constant period of a periodic-series HSGP kernel (:func:`periodic_leaf`), or None when it has none."""
    leaf = periodic_leaf(kernel)
    if leaf is None:
        return None
    period = leaf.param("period")
    return float(period.value) if isinstance(period, ir.Constant) else None


def series_size(order: int) -> int:
    """The number of basis functions of a cosine series with ``order`` harmonics: ``2 order + 1``."""
    return 2 * int(order) + 1
