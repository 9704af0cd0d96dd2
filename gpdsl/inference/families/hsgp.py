"""The view of a model with one latent GP in the Hilbert-space approximation: a latent GP over its basis weights.

``f(x) = phi(x) (sqrt(S_theta(omega)) .* z) + m(x)`` with ``z ~ N(0, I_M)`` (:mod:`gpdsl.backends.jax.hsgp`). To the
latent-GP engines the sampled vector is ``z``: its prior covariance is the identity whatever ``theta``, and the
likelihood reads ``f`` computed from ``(theta, z)``; so elliptical slice sampling updates ``z`` and the
hyperparameter updates move ``theta`` with ``z`` fixed (``gibbs``). The likelihood reads ``z`` through the linear map
``A = PHI diag(sqrt(S_theta(omega)))`` (:meth:`HSGPLatent.likelihood_map`), so the Laplace approximation of ``z``
(:mod:`gpdsl.inference.approximations.weight_space`) costs ``O(N M^2)`` per Newton step, and ``pm`` runs on it. Given one draw ``(theta, z)``, ``f`` is
known everywhere: predictions evaluate the basis functions at the new inputs with the same weights.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from gpdsl.backends.jax.hsgp import HSGPBasis, hsgp_values
from gpdsl.data.new_inputs import input_matrix
from gpdsl.errors import MethodError
from gpdsl.inference.families.hyperparameters import lowered_with_blocks
from gpdsl.inference.families.latent_gp import LatentGP
from gpdsl.ir.family_forms import LatentGPFacts
from gpdsl.ir.structure import mean_prediction_refusal


@dataclass
class HSGPLatent(LatentGP):
    """A :class:`~gpdsl.inference.families.latent_gp.LatentGP` whose sampled vector is an HSGP's weights ``z``
    (``n`` is the number of basis functions).

    Attributes
    ----------
    facts : LatentGPFacts
        The family's facts: the node and its likelihood.
    """

    facts: LatentGPFacts | None = None

    @property
    def weights(self) -> str:
        """The free variable of the basis weights."""
        return self.name + "_z"

    @property
    def basis(self) -> HSGPBasis:
        """The basis on the training inputs."""
        return self.jax_model.hsgp_basis(self.node.statement)

    @property
    def has_mean(self) -> bool:
        """The weights have a zero mean (the GP's mean is added to ``f`` in :meth:`environment`)."""
        return False

    def mean(self, theta, env=None) -> jnp.ndarray:
        return jnp.zeros((self.n,))

    def environment(self, theta, f=None) -> dict:
        """Data, constrained hyperparameters and, given weights ``f``, the weights and the latent ``f`` by name."""
        env = {**self.jax_model.data, **self.theta_values(theta)}
        if f is not None:
            env[self.weights] = f
            env[self.name] = self.jax_model.hsgp_latent(self.node.statement, f, env)
        return env

    def covariance(self, theta) -> jnp.ndarray:
        """The weights' prior covariance, the identity."""
        return jnp.eye(self.n)

    def latent(self, theta, z) -> jnp.ndarray:
        """``f`` at the training inputs from ``(theta, z)`` (traceable)."""
        return self.environment(theta, z)[self.name]

    def with_mean(self, theta_draws, f_draws) -> np.ndarray:
        """The weights' draws and ``f``'s beside them, ``(chain, draw, M + N)`` (what :meth:`split` names)."""
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
        """The likelihood reads the weights through :meth:`likelihood_map`."""
        return True

    def likelihood_map(self, theta) -> jnp.ndarray:
        """``A = PHI diag(sqrt(S_theta(omega)))``, shape ``(N, M)``: ``f = A z`` plus :meth:`location_offset`."""
        kernel = self.jax_model.gp_kernel(self.node.statement, self.environment(theta))
        basis = self.basis
        return jnp.asarray(basis.phi) * jnp.sqrt(basis.weight_variances(kernel))[None, :]

    def location_offset(self, theta) -> jnp.ndarray:
        """What the likelihood's latent argument adds to ``A z`` (:meth:`likelihood_map`), shape ``(N,)``: the GP's
        mean plus the likelihood's offset (``log_exposure`` of ``poisson_log(log_exposure + f)``).

        Raises
        ------
        MethodError
            The latent argument is not ``f`` plus terms free of it.
        """
        self.require_offset_form()
        env = self.environment(theta)
        size = self.basis.phi.shape[0]
        at_zero = jnp.asarray(self.latent_argument_at_zero(theta), dtype=float)
        return jnp.broadcast_to(at_zero + self.jax_model.gp_mean(self.node.statement, env), (size,))

    @property
    def free_names(self) -> list[str]:
        """The free variables a draw holds, in the lowered model's order."""
        return [block.name for block in self.jax_model.blocks]

    def check_new_inputs(self, X_new) -> np.ndarray:
        """``X_new`` as a finite float matrix with the training inputs' number of columns, or a DataError."""
        return input_matrix(X_new, self.basis.dim, f"new inputs of '{self.name}'")

    def values_at(self, free: dict, phi_new, X_new):
        """``f`` at the new inputs whose basis functions are ``phi_new``, for one draw ``free`` of every free variable
        (traceable)."""
        statement = self.node.statement
        env = {**self.jax_model.data, **free}
        kernel = self.jax_model.gp_kernel(statement, env)
        values = hsgp_values(kernel, self.basis, phi_new, free[self.weights])
        if statement.mean is None:
            return values
        refusal = mean_prediction_refusal(self.jax_model.model, self.node)
        if refusal:
            raise MethodError(refusal, statement.mean.span)
        name = statement.inputs.components[0].name
        env[name] = jnp.reshape(X_new, (-1,)) if jnp.ndim(env[name]) == 1 else jnp.asarray(X_new)
        return values + jnp.asarray(self.jax_model.evaluate(statement.mean, env), dtype=float)


def hsgp_view(model, data: dict, facts: LatentGPFacts, allow_external: bool = False, **_) -> HSGPLatent:
    """The :class:`HSGPLatent` of ``model`` and its validated ``data``."""
    jax_model, theta_blocks = lowered_with_blocks(model, data, False, allow_external)
    node = next(n for n in jax_model.gp_nodes if n.name == facts.name)
    size = jax_model.block(facts.name + "_z").size
    return HSGPLatent(jax_model, node, theta_blocks, sum(b.size for b in theta_blocks), size, facts.likelihood,
                      np.asarray(jax_model.data[facts.target]), (), facts)
