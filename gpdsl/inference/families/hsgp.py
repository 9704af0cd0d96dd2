"""The view of a model with one latent GP in the Hilbert-space approximation: its lowered model, the GP's node and
basis, and the latent's values at any inputs from a draw of the hyperparameters and the basis weights.

``f(x) = phi(x) (sqrt(S(omega)) .* z) + m(x)`` (:mod:`gpdsl.backends.jax.hsgp`): given one draw of the
hyperparameters and of the weights ``z``, ``f`` is known everywhere, so predictions at new inputs evaluate the basis
functions there (on the training inputs' box) with the same weights.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from gpdsl.backends.jax.hsgp import HSGPBasis, hsgp_values
from gpdsl.backends.jax.lowering import JaxModel, lower
from gpdsl.errors import DataError, MethodError
from gpdsl.ir.family_forms import LatentGPFacts
from gpdsl.ir.structure import GPNode, mean_prediction_refusal


@dataclass
class HSGPLatent:
    """One HSGP latent of a lowered model.

    Attributes
    ----------
    jax_model : JaxModel
        The lowered model (free variables: the parameters and the weights ``<f>_z``).
    facts : LatentGPFacts
        The family's facts: the node and its likelihood.
    """

    jax_model: JaxModel
    facts: LatentGPFacts

    @property
    def node(self) -> GPNode:
        """The HSGP latent's node."""
        return self.facts.node

    @property
    def name(self) -> str:
        """The latent's name."""
        return self.node.name

    @property
    def weights(self) -> str:
        """The free variable of its basis weights."""
        return self.name + "_z"

    @property
    def basis(self) -> HSGPBasis:
        """Its basis on the training inputs."""
        return self.jax_model.hsgp_basis(self.node.statement)

    @property
    def free_names(self) -> list[str]:
        """The free variables a draw holds, in the lowered model's order."""
        return [block.name for block in self.jax_model.blocks]

    def check_new_inputs(self, X_new) -> np.ndarray:
        """``X_new`` as a finite float matrix with the training inputs' number of columns, or a DataError."""
        X_new = np.asarray(X_new, dtype=float)
        width = self.basis.centre.size
        if X_new.ndim == 1 and width == 1:
            X_new = X_new[:, None]
        if X_new.ndim != 2 or X_new.shape[1] != width or not np.all(np.isfinite(X_new)):
            raise DataError(f"new inputs of '{self.name}' must be a finite matrix with {width} column(s); got shape "
                            f"{X_new.shape}")
        return X_new

    def values_at(self, free: dict, phi_new, X_new):
        """``f`` at the new inputs whose basis functions are ``phi_new``, for one draw ``free`` (traceable)."""
        statement = self.node.statement
        env = self.jax_model.environment(free)
        kernel = self.jax_model.gp_kernel(statement, env)
        values = hsgp_values(kernel, self.basis.omega, phi_new, free[self.weights])
        if statement.mean is None:
            return values
        refusal = mean_prediction_refusal(self.jax_model.model, self.node)
        if refusal:
            raise MethodError(refusal, statement.mean.span)
        name = statement.inputs.components[0].name
        env[name] = jnp.reshape(X_new, (-1,)) if jnp.ndim(env[name]) == 1 else jnp.asarray(X_new)
        return values + jnp.asarray(self.jax_model.evaluate(statement.mean, env), dtype=float)


def hsgp_view(model, data: dict, facts: LatentGPFacts, **_) -> HSGPLatent:
    """The :class:`HSGPLatent` of ``model`` and its validated ``data``."""
    return HSGPLatent(lower(model, data), facts)
