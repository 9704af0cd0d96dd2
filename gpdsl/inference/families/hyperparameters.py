"""What every family view shares: the model's hyperparameters as one flat unconstrained vector ``theta``."""

from __future__ import annotations

import jax

from gpdsl.backends.jax.lowering import (
    Block,
    constrain_blocks,
    lower,
    unconstrain_blocks,
)


class HyperparameterBlocks:
    """Mixin of the family views: ``theta`` is the concatenation of the parameter blocks ``theta_blocks``."""

    theta_blocks: list[Block]

    @property
    def theta_names(self) -> list[str]:
        """Hyperparameter names in block order."""
        return [b.name for b in self.theta_blocks]

    def constrain(self, theta) -> tuple[dict, jax.Array]:
        """Constrained hyperparameters by name and the log-Jacobian of the transform."""
        return constrain_blocks(theta, self.theta_blocks)

    def unconstrain_theta(self, values: dict) -> jax.Array:
        """The flat ``theta`` of constrained hyperparameter values by name."""
        return unconstrain_blocks(values, self.theta_blocks)


def lowered_with_blocks(model, data, marginalise: bool, allow_external: bool = False, sampled=()):
    """The centred lowering of a model and its hyperparameter blocks, in ``theta`` order; the latent GPs named in
    ``sampled`` stay sampled variables."""
    jax_model = lower(model, data, "centred", allow_external=allow_external, marginalise=marginalise,
                      sampled=sampled)
    return jax_model, [b for b in jax_model.blocks if b.role == "parameter"]
