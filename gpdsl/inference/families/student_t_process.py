"""The view of Student-t process regression: ``f ~ student_t_process(nu, X, k); y ~ normal(f, s)``, f integrated out.

The marginal is exact: ``y ~ MVT(nu, 0, K + s^2 I)`` with that covariance, the noise inside the process's kernel
(Shah, Wilson & Ghahramani 2014; GPy's ``TPRegression``). The view is GP regression's
(:class:`~gpdsl.inference.families.gp_regression.GPRegression`: inputs, kernel, noise, hyperparameters) with this
marginal and the degrees of freedom ``nu``, so type-II maximum likelihood fits ``nu`` with the kernel and noise.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.backends.jax.student_t_process import student_t_process_log_marginal
from gpdsl.errors import DataError
from gpdsl.inference.families.gp_regression import GPRegression
from gpdsl.inference.families.hyperparameters import complete_outputs, lowered_with_blocks
from gpdsl.ir import nodes as ir
from gpdsl.ir.families import LatentGPFacts
from gpdsl.numerics.linalg import cholesky


@dataclass
class StudentTProcessRegression(GPRegression):
    """Student-t process regression read from a checked model (the attributes of :class:`GPRegression`)."""

    def dof(self, theta) -> jax.Array:
        """The degrees of freedom ``nu`` at ``theta``."""
        return jnp.asarray(self.jax_model.evaluate(self.node.statement.dof, self.environment(theta)), dtype=float)

    def covariance_factor(self, theta) -> jax.Array:
        """Lower Cholesky factor of ``K + s^2 I`` (``K`` with the lowering's jitter)."""
        K = self.jax_model.gp_covariance(self.node.statement, self.environment(theta))
        return cholesky(K + self.noise_variance(theta) * jnp.eye(K.shape[0]))

    def log_marginal(self, theta) -> jax.Array:
        """``log MVT(y; nu, 0, K + s^2 I)`` (traceable)."""
        return student_t_process_log_marginal(jnp.asarray(self.y), self.covariance_factor(theta), self.dof(theta))


def student_t_process_view(model: ir.Model, data: dict, facts: LatentGPFacts) -> StudentTProcessRegression:
    """The :class:`StudentTProcessRegression` of a model of the ``student_t_process`` family (``facts``).

    Raises
    ------
    DataError
        Missing outputs, or degrees of freedom given as data that are not above 2.
    """
    jax_model, blocks = lowered_with_blocks(model, data, marginalise=True)
    node = next(n for n in jax_model.process_nodes if n.name == facts.name)
    complete_outputs(jax_model, node, "Student-t process regression needs every output")
    dof = node.statement.dof
    if isinstance(dof, ir.Ref) and dof.role == "data" and not float(np.asarray(jax_model.data[dof.name])) > 2:
        raise DataError(f"'{dof.name}' = {float(np.asarray(jax_model.data[dof.name])):g} is the degrees of freedom "
                        "of a Student-t process; it must be greater than 2", dof.span)
    return StudentTProcessRegression(jax_model, node, facts.target, blocks)
