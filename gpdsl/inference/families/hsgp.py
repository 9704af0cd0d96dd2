"""The view of a model with one latent GP in the Hilbert-space approximation: a latent GP over its basis weights.

``f(x) = phi(x) (sqrt(S_theta(omega)) .* z) + m(x)`` with ``z ~ N(0, I_M)`` (:mod:`gpdsl.backends.jax.hsgp`). To the
latent-GP engines the sampled vector is ``z``: its prior covariance is the identity whatever ``theta``, and the
likelihood reads ``f`` computed from ``(theta, z)``; so elliptical slice sampling updates ``z`` and the
hyperparameter updates move ``theta`` with ``z`` fixed (``gibbs``). The likelihood reads ``z`` through the linear map
``A = PHI diag(sqrt(S_theta(omega)))`` (:meth:`HSGPLatent.likelihood_map`), so the Laplace approximation of ``z``
(:mod:`gpdsl.inference.approximations.weight_space`) costs ``O(N M^2)`` per Newton step, or less with the cosine sums
of :meth:`HSGPLatent.likelihood_operator`, and ``pm`` runs on it. Given one draw ``(theta, z)``, ``f`` is
known everywhere: predictions evaluate the basis functions at the new inputs with the same weights.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from gpdsl.backends.jax.hsgp import HSGPBasis, hsgp_values
from gpdsl.data.new_inputs import input_matrix
from gpdsl.inference.families.hyperparameters import lowered_with_blocks
from gpdsl.inference.families.mapped_latent import MappedLatent
from gpdsl.ir.family_forms import LatentGPFacts


@dataclass
class HSGPLatent(MappedLatent):
    """A :class:`~gpdsl.inference.families.mapped_latent.MappedLatent` whose sampled vector is an HSGP's weights ``z``
    (``n`` is the number of basis functions)."""

    @property
    def basis(self) -> HSGPBasis:
        """The basis on the training inputs."""
        return self.jax_model.hsgp_basis(self.node.statement)

    @property
    def points(self) -> int:
        """The number of training inputs."""
        return self.basis.phi.shape[0]

    def values(self, z, env) -> jnp.ndarray:
        """``PHI (sqrt(S_theta(omega)) .* z)`` plus the GP's mean."""
        return self.jax_model.hsgp_latent(self.node.statement, z, env)

    def centring_scale(self, theta) -> jnp.ndarray:
        """``sqrt(S_theta(omega))``: the basis coefficients ``beta = sqrt(S) .* z`` are the centred coordinates."""
        kernel = self.jax_model.gp_kernel(self.node.statement, self.environment(theta))
        return jnp.sqrt(self.basis.weight_variances(kernel))

    def likelihood_map(self, theta) -> jnp.ndarray:
        """``A = PHI diag(sqrt(S_theta(omega)))``, shape ``(N, M)``: ``f = A z`` plus :meth:`location_offset`."""
        kernel = self.jax_model.gp_kernel(self.node.statement, self.environment(theta))
        basis = self.basis
        return jnp.asarray(basis.phi) * jnp.sqrt(basis.weight_variances(kernel))[None, :]

    def likelihood_operator(self, theta):
        """The Laplacian basis's map, which forms neither ``A`` nor ``A^T W A`` by products
        (:mod:`gpdsl.backends.jax.hsgp_map`); the matrix for a basis with periodic series."""
        basis = self.basis
        return basis.linear_map(self.centring_scale(theta)) if isinstance(basis, HSGPBasis) \
            else self.likelihood_map(theta)

    def check_new_inputs(self, X_new) -> np.ndarray:
        """``X_new`` as a finite float matrix with the training inputs' number of columns, or a DataError."""
        return input_matrix(X_new, self.basis.dim, f"new inputs of '{self.name}'")

    def values_at(self, free: dict, phi_new, X_new):
        """``f`` at the new inputs whose basis functions are ``phi_new``, for one draw ``free`` of every free variable
        (traceable)."""
        kernel = self.jax_model.gp_kernel(self.node.statement, {**self.jax_model.data, **free})
        return hsgp_values(kernel, self.basis, phi_new, free[self.weights]) + self.mean_at(free, X_new)


def hsgp_view(model, data: dict, facts: LatentGPFacts, allow_external: bool = False, **_) -> HSGPLatent:
    """The :class:`HSGPLatent` of ``model`` and its validated ``data``."""
    jax_model, theta_blocks = lowered_with_blocks(model, data, False, allow_external)
    node = next(n for n in jax_model.gp_nodes if n.name == facts.name)
    size = jax_model.block(facts.name + "_z").size
    return HSGPLatent(jax_model, node, theta_blocks, sum(b.size for b in theta_blocks), size, facts.likelihood,
                      np.asarray(jax_model.data[facts.target]), (), facts)
