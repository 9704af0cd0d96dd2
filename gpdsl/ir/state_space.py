"""What a state-space GP's statement says of its series, read from the IR (no JAX): the kernel over the time, which
input component is the time and which, if any, labels independent series (``k(t) * same(g)``), and the size of the
state, by which the innovations of a sampled state-space latent (``<f>_z``, one standard normal per state component
and time) are sized."""

from __future__ import annotations

from typing import NamedTuple

from gpdsl.ir import nodes as ir
from gpdsl.kernel_table import KERNEL_SPECS


class SeriesLayout(NamedTuple):
    """A state-space GP's inputs as series.

    Attributes
    ----------
    kernel : ir.Kernel
        The kernel over the time: the statement's kernel, or its factor ``k(t)`` of ``k(t) * same(g)``.
    time : int
        The input component (one column) that is the time.
    group : int or None
        The input component (one column) whose labels part the points into independent series, each restarting
        the state; None for one series.
    """

    kernel: ir.Kernel
    time: int
    group: int | None


def _is_same(kernel: ir.Kernel) -> bool:
    return isinstance(kernel, ir.KernelLeaf) and not isinstance(kernel, ir.KernelCombination) and kernel.name == "same"


def group_factor(kernel: ir.Kernel) -> tuple[ir.Kernel, ir.KernelLeaf] | None:
    """``(k, same(g))`` of a kernel ``k * same(g)`` or ``same(g) * k``, either factor maybe scaled (``c * same(g) *
    k`` gives ``(c * k, same(g))``); None for any other kernel."""
    if not isinstance(kernel, ir.KernelProduct):
        return None
    for time_kernel, factor in ((kernel.left, kernel.right), (kernel.right, kernel.left)):
        if _is_same(factor):
            return time_kernel, factor
        if isinstance(factor, ir.KernelScale) and _is_same(factor.kernel):
            return ir.KernelScale(kernel.span, factor.scale, time_kernel), factor.kernel
    return None


def series_layout(statement: ir.GPStatement) -> SeriesLayout:
    """The :class:`SeriesLayout` of a state-space GP (one the checker admitted: one input column, or a time and a
    group column under ``k(t) * same(g)``)."""
    parts = group_factor(statement.kernel) if len(statement.inputs.components) == 2 else None
    if parts is None:
        return SeriesLayout(statement.kernel, 0, None)
    kernel, same = parts
    return SeriesLayout(kernel, 1 - same.component, same.component)


def state_dimension(kernel: ir.Kernel, order: int) -> int:
    """The number of components of ``kernel``'s state-space form with ``order`` harmonics of a periodic series: a
    leaf's table entry (:meth:`~gpdsl.kernel_table.KernelSpec.state_dimension`), sums adding, products multiplying,
    scales keeping it (the checker admits no other kernel under ``approx = state_space``). Of a statement's kernel
    over the time, :attr:`SeriesLayout.kernel`."""
    if isinstance(kernel, ir.KernelScale):
        return state_dimension(kernel.kernel, order)
    if isinstance(kernel, ir.KernelPair):
        left, right = state_dimension(kernel.left, order), state_dimension(kernel.right, order)
        return left + right if isinstance(kernel, ir.KernelSum) else left * right
    return KERNEL_SPECS[kernel.name].state_dimension(order)
