"""What the views of a state-space GP share: the kernel over the time, the harmonics of its periodic terms, and the
training times (with group labels for independent series) as the Kalman code takes them."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from gpdsl.kernels import Kernel


class StateSpaceSeries:
    """Mixin for a view (``jax_model``, ``node``, ``environment``) whose GP has ``approx = state_space``."""

    @property
    def order(self) -> int:
        """Harmonics of a periodic kernel's truncated series (``state_space(order = J)``)."""
        return int(self.node.statement.approximation.value("order"))

    def kernel(self, theta) -> Kernel:
        """The GP's kernel over the time at ``theta`` (less a ``same(g)`` factor, whose groups :attr:`times`
        carries)."""
        return self.jax_model.state_space_kernel(self.node.statement, self.environment(theta))

    def series(self, points) -> jax.Array:
        """Points of the GP's inputs, shape ``(M, input_dim)``, as times ``(M,)`` or times and group labels ``(M,
        2)`` (:meth:`~gpdsl.backends.jax.lowering.JaxModel.series_points`)."""
        return jnp.asarray(self.jax_model.series_points(self.node.statement, jnp.asarray(points, dtype=float)))

    @property
    def times(self) -> jax.Array:
        """The training rows (missing outputs included) as :meth:`series` gives them (data: free of ``theta``)."""
        with jax.ensure_compile_time_eval():
            return self.series(self.jax_model.gp_inputs(self.node.statement, self.jax_model.data))
