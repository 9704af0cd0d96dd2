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

from gpdsl.backends.jax.state_space import TimeGrid
from gpdsl.data.new_inputs import input_matrix
from gpdsl.errors import MethodError
from gpdsl.inference.families.hyperparameters import lowered_with_blocks
from gpdsl.inference.families.latent_gp import LatentGP
from gpdsl.ir.family_forms import LatentGPFacts
from gpdsl.ir.structure import mean_prediction_refusal


@dataclass
class StateSpaceLatent(LatentGP):
    """A :class:`~gpdsl.inference.families.latent_gp.LatentGP` whose sampled vector is a state-space GP's
    innovations ``z`` (``n = N d``: ``N`` times, a state of ``d`` components).

    Attributes
    ----------
    facts : LatentGPFacts
        The family's facts: the node and its likelihood.
    """

    facts: LatentGPFacts | None = None

    @property
    def weights(self) -> str:
        """The free variable of the innovations (named as an HSGP's weights, ``<f>_z``)."""
        return self.name + "_z"

    @property
    def grid(self) -> TimeGrid:
        """The training times, sorted once."""
        return self.jax_model.time_grid(self.node.statement)

    @property
    def periodic_order(self) -> int:
        """Harmonics of a periodic kernel's truncated series (``approx = state_space(order = J)``)."""
        return int(self.node.statement.approximation.value("order"))

    @property
    def has_mean(self) -> bool:
        """The innovations have a zero mean (the GP's mean is added to ``f`` in :meth:`environment`)."""
        return False

    def mean(self, theta, env=None) -> jnp.ndarray:
        return jnp.zeros((self.n,))

    def environment(self, theta, f=None) -> dict:
        """Data, constrained hyperparameters and, given innovations ``f``, the innovations and the latent ``f`` by
        name."""
        env = {**self.jax_model.data, **self.theta_values(theta)}
        if f is not None:
            env[self.weights] = f
            env[self.name] = self.jax_model.state_space_latent(self.node.statement, f, env)
        return env

    def covariance(self, theta) -> jnp.ndarray:
        """The innovations' prior covariance, the identity."""
        return jnp.eye(self.n)

    def prior_factor(self, theta) -> jnp.ndarray:
        """The identity's factor as its diagonal, ``n`` ones: ESS draws ``n`` standard normals and the hyperparameter
        updates never form an ``n x n`` matrix (:mod:`gpdsl.inference.mcmc.prior_factor`)."""
        return jnp.ones((self.n,))

    def latent(self, theta, z) -> jnp.ndarray:
        """``f`` at the training times (the GP's mean included) from ``(theta, z)`` (traceable)."""
        return self.environment(theta, z)[self.name]

    def with_mean(self, theta_draws, f_draws) -> np.ndarray:
        """The innovations' draws and ``f``'s beside them, ``(chain, draw, N d + N)`` (what :meth:`split` names)."""
        from gpdsl.inference.draw_map import over_draws

        return np.concatenate([np.asarray(f_draws), over_draws(self.latent, theta_draws, f_draws)], axis=-1)

    def split(self, values) -> dict:
        """``<f>_z`` and, when present (:meth:`with_mean`), ``f`` from the last axis."""
        out = {self.weights: values[..., :self.n]}
        if np.shape(values)[-1] > self.n:
            out[self.name] = values[..., self.n:]
        return out

    def stack(self, values: dict):
        return np.asarray(values[self.weights])

    @property
    def mapped(self) -> bool:
        """The likelihood reads the innovations through a linear map (:meth:`likelihood_map`)."""
        return True

    def likelihood_map(self, theta) -> jnp.ndarray:
        """The dense map ``f = M z`` less the mean, shape ``(N, N d)``, by pushing the identity's columns through the
        recursion (``O(N^2 d)`` memory: for small ``N``)."""
        env = self.environment(theta)
        mean = self.jax_model.gp_mean(self.node.statement, env)
        columns = jax.vmap(lambda z: self.jax_model.state_space_latent(self.node.statement, z, env))(jnp.eye(self.n))
        return (columns - mean).T

    def location_offset(self, theta) -> jnp.ndarray:
        """What the likelihood's latent argument adds to ``M z`` (:meth:`likelihood_map`), shape ``(N,)``: the GP's
        mean plus the likelihood's offset.

        Raises
        ------
        MethodError
            The latent argument is not ``f`` plus terms free of it.
        """
        self.require_offset_form()
        env = self.environment(theta)
        at_zero = jnp.asarray(self.latent_argument_at_zero(theta), dtype=float)
        return jnp.broadcast_to(at_zero + self.jax_model.gp_mean(self.node.statement, env), (self.grid.size,))

    @property
    def free_names(self) -> list[str]:
        """The free variables a draw holds, in the lowered model's order."""
        return [block.name for block in self.jax_model.blocks]

    def check_new_inputs(self, X_new) -> np.ndarray:
        """``X_new`` as a finite ``(m, 1)`` float matrix of times, or a DataError."""
        return input_matrix(X_new, 1, f"new times of '{self.name}'")

    def mean_at(self, free: dict, X_new):
        """The GP's mean at new times for one draw ``free`` of every free variable (0 without ``mean =``).

        Raises
        ------
        MethodError
            The mean reads per-observation data, which has no values at new times.
        """
        statement = self.node.statement
        if statement.mean is None:
            return jnp.zeros(())
        refusal = mean_prediction_refusal(self.jax_model.model, self.node)
        if refusal:
            raise MethodError(refusal, statement.mean.span)
        env = {**self.jax_model.data, **free}
        name = statement.inputs.components[0].name
        env[name] = jnp.reshape(X_new, (-1,)) if jnp.ndim(env[name]) == 1 else jnp.asarray(X_new)
        return jnp.asarray(self.jax_model.evaluate(statement.mean, env), dtype=float)


def state_space_latent_view(model, data: dict, facts: LatentGPFacts, allow_external: bool = False,
                            **_) -> StateSpaceLatent:
    """The :class:`StateSpaceLatent` of ``model`` and its validated ``data``."""
    jax_model, theta_blocks = lowered_with_blocks(model, data, False, allow_external)
    node = next(n for n in jax_model.gp_nodes if n.name == facts.name)
    size = jax_model.block(facts.name + "_z").size
    return StateSpaceLatent(jax_model, node, theta_blocks, sum(b.size for b in theta_blocks), size,
                            facts.likelihood, np.asarray(jax_model.data[facts.target]), (), facts)
