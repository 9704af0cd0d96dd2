"""The size of a state-space GP's state, read from its kernel in the IR (no JAX): what the innovations of a sampled
state-space latent (``<f>_z``, one standard normal per state component and time) are sized by."""

from __future__ import annotations

from gpdsl.ir import nodes as ir
from gpdsl.kernel_table import KERNEL_SPECS


def state_dimension(kernel: ir.Kernel, order: int) -> int:
    """The number of components of ``kernel``'s state-space form with ``order`` harmonics of a periodic series: a
    leaf's table entry (:meth:`~gpdsl.kernel_table.KernelSpec.state_dimension`), sums adding, products multiplying,
    scales keeping it (the checker admits no other kernel under ``approx = state_space``)."""
    if isinstance(kernel, ir.KernelScale):
        return state_dimension(kernel.kernel, order)
    if isinstance(kernel, ir.KernelPair):
        left, right = state_dimension(kernel.left, order), state_dimension(kernel.right, order)
        return left + right if isinstance(kernel, ir.KernelSum) else left * right
    return KERNEL_SPECS[kernel.name].state_dimension(order)
