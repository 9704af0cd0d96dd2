"""The view of a model with one latent state-space GP under a non-normal likelihood: a latent GP over its innovations.

``f = h s`` along the sorted times with ``s_0 = P_inf^{1/2} z_0`` and ``s_k = A_k s_{k-1} + Q_k^{1/2} z_k``, ``z ~ N(0,
I_{N d})`` (:mod:`gpdsl.backends.jax.state_space`). To the latent-GP engines the sampled vector is ``z``: its prior
covariance is the identity whatever ``theta``, and the likelihood reads ``f`` computed from ``(theta, z)`` in ``O(N
d^3)``; so elliptical slice sampling updates ``z`` (a prior draw is ``N d`` standard normals) and the hyperparameter
updates move ``theta`` with ``z`` fixed (``gibbs``), as for the Hilbert-space approximation
(:mod:`gpdsl.inference.families.hsgp`). Given one draw ``(theta, z)``, ``f`` at new times is drawn from the state-space
prior conditioned on ``f`` at the training times (:mod:`gpdsl.inference.predict.state_space_latent`).
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.kernels.kalman import TimeGrid
from gpdsl.data.new_inputs import input_matrix
from gpdsl.inference.families.hyperparameters import lowered_with_blocks
from gpdsl.inference.families.mapped_latent import MappedLatent
from gpdsl.inference.families.state_space_series import StateSpaceSeries
from gpdsl.ir.family_forms import LatentGPFacts


@dataclass
class StateSpaceLatent(StateSpaceSeries, MappedLatent):
    """A :class:`~gpdsl.inference.families.mapped_latent.MappedLatent` whose sampled vector is a state-space GP's
    innovations ``z`` (``n = N d``: ``N`` times, a state of ``d`` components)."""

    @property
    def grid(self) -> TimeGrid:
        """The training times, sorted once."""
        return self.jax_model.time_grid(self.node.statement)

    @property
    def points(self) -> int:
        """The number of training times."""
        return self.grid.size

    def values(self, z, env) -> jnp.ndarray:
        """The state recursion driven by the innovations ``z``, plus the GP's mean."""
        return self.jax_model.state_space_latent(self.node.statement, z, env)

    def likelihood_map(self, theta) -> jnp.ndarray:
        """The dense map ``f = M z`` less the mean, shape ``(N, N d)``, by pushing the identity's columns through the
        recursion (``O(N^2 d)`` memory: for small ``N``)."""
        env = self.environment(theta)
        mean = self.jax_model.gp_mean(self.node.statement, env)
        columns = jax.vmap(lambda z: self.values(z, env))(jnp.eye(self.n))
        return (columns - mean).T

    def check_new_inputs(self, X_new) -> np.ndarray:
        """``X_new`` as a finite ``(m, 1)`` float matrix of times (``(m, 2)`` of times and group labels under ``k(t) *
        same(g)``), or a DataError."""
        width = len(self.node.statement.inputs.components)
        return input_matrix(X_new, width, f"new times of '{self.name}'" + (" and their groups" if width == 2 else ""))


def state_space_latent_view(model, data: dict, facts: LatentGPFacts, allow_external: bool = False,
                            **_) -> StateSpaceLatent:
    """The :class:`StateSpaceLatent` of ``model`` and its validated ``data``."""
    jax_model, theta_blocks = lowered_with_blocks(model, data, False, allow_external)
    node = next(n for n in jax_model.gp_nodes if n.name == facts.name)
    size = jax_model.block(facts.name + "_z").size
    return StateSpaceLatent(jax_model, node, theta_blocks, sum(b.size for b in theta_blocks), size,
                            facts.likelihood, np.asarray(jax_model.data[facts.target]), (), facts)
