"""What every family view shares: the model's hyperparameters as one flat unconstrained vector ``theta``, and,
for views whose output GP is observed through ``normal(f, s)`` with scalar ``s``, the noise behind ``s``."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.backends.jax.lowering import (
    Block,
    JaxModel,
    constrain_blocks,
    lower,
    unconstrain_blocks,
)
from gpdsl.errors import MethodError
from gpdsl.ir.structure import GPNode, expression_refs, mean_prediction_refusal


class HyperparameterBlocks:
    """Mixin of the family views: ``theta`` is the concatenation of the parameter blocks ``theta_blocks`` of the
    lowering ``jax_model``."""

    jax_model: JaxModel
    theta_blocks: list[Block]
    node: GPNode

    @property
    def theta_names(self) -> list[str]:
        """Hyperparameter names in block order."""
        return [b.name for b in self.theta_blocks]

    def constrain(self, theta) -> tuple[dict, jax.Array]:
        """Constrained hyperparameters by name and the log-Jacobian of the transform."""
        return constrain_blocks(theta, self.theta_blocks)

    def theta_values(self, theta) -> dict:
        """Constrained hyperparameters by name (:meth:`constrain` without the log-Jacobian)."""
        return self.constrain(theta)[0]

    def unconstrain_theta(self, values: dict) -> jax.Array:
        """The flat ``theta`` of constrained hyperparameter values by name."""
        return unconstrain_blocks(values, self.theta_blocks)

    def environment(self, theta) -> dict:
        """Data and constrained hyperparameters by name."""
        return {**self.jax_model.data, **self.constrain(theta)[0]}

    def log_hyperprior(self, theta) -> jax.Array:
        """Log prior density of the hyperparameters that have one, on their constrained scale.

        Maximising an objective plus this term gives MAP estimates of those hyperparameters (no Jacobian: the
        estimate does not depend on the optimiser's parameterisation).
        """
        return self.jax_model.log_terms(self.environment(theta), ("prior",), targets=set(self.theta_names))

    def mean_in(self, env: dict, X_new) -> jax.Array:
        """The GP's mean (``gp(X, k, mean = m)``) in ``env`` with its input variable set to ``X_new``; 0 without one.

        Raises
        ------
        MethodError
            The mean reads data other than the GP's input variable (:func:`gpdsl.ir.structure.mean_prediction_refusal`).
        """
        statement = self.node.statement
        if statement.mean is None:
            return jnp.zeros(())
        refusal = mean_prediction_refusal(self.jax_model.model, self.node)
        if refusal:
            raise MethodError(refusal, statement.mean.span)
        X_new = jnp.reshape(jnp.asarray(X_new, dtype=float), (jnp.shape(X_new)[0], -1))
        offsets = self.jax_model.gp_input_offsets(statement)
        env = dict(env)
        for name, start, stop in zip(statement.inputs.names, offsets[:-1], offsets[1:]):
            if name is not None:
                columns = X_new[:, start:stop]
                env[name] = columns[:, 0] if jnp.ndim(env[name]) == 1 else columns
        return jnp.asarray(self.jax_model.evaluate(statement.mean, env), dtype=float)

    def theta_mask(self, selects) -> np.ndarray:
        """Boolean mask over ``theta``: the coordinates of the hyperparameters named in ``selects``, or of the blocks
        for which ``selects(block)`` is true."""
        if not callable(selects):
            names = set(selects)
            selects = lambda block: block.name in names  # noqa: E731
        return np.concatenate([np.full(b.size, bool(selects(b))) for b in self.theta_blocks]
                              or [np.zeros(0, dtype=bool)])


class NormalObservations:
    """Mixin of the views whose output GP ``observed_gp`` is observed through ``normal(f, s)`` with scalar ``s``."""

    jax_model: JaxModel
    observed_gp: GPNode

    def noise_variance(self, theta) -> jax.Array:
        """The likelihood's noise variance ``s^2`` at ``theta``."""
        sigma = self.jax_model.evaluate(self.observed_gp.likelihood.distribution.arg("sigma"),
                                        self.environment(theta))
        return jnp.square(sigma)

    @property
    def noise_names(self) -> set[str]:
        """The hyperparameters the likelihood's scale ``s`` reads (held in the first phase of an Adam schedule)."""
        return expression_refs(self.observed_gp.likelihood.distribution.arg("sigma")) & set(self.theta_names)

    def noise_mask(self, size: int) -> np.ndarray:
        """Boolean mask of the noise's coordinates in a flat vector of length ``size`` that starts with ``theta``."""
        mask = np.zeros(size, dtype=bool)
        theta_mask = self.theta_mask(self.noise_names)
        mask[:theta_mask.size] = theta_mask
        return mask


def complete_outputs(jax_model: JaxModel, node: GPNode, needs: str) -> np.ndarray:
    """The outputs observed through ``node``'s likelihood as a vector, refused (``needs``: what the method needs)
    when some are missing.

    Raises
    ------
    MethodError
    """
    target = node.likelihood.target.name
    y = np.asarray(jax_model.data[target], dtype=float).reshape(-1)
    if np.isnan(y).any():
        raise MethodError(f"{needs}; '{target}' has missing values", node.likelihood.span)
    return y


def lowered_with_blocks(model, data, marginalise: bool, allow_external: bool = False, sampled=()):
    """The centred lowering of a model and its hyperparameter blocks, in ``theta`` order; the latent GPs named in
    ``sampled`` stay sampled variables."""
    jax_model = lower(model, data, "centred", allow_external=allow_external, marginalise=marginalise,
                      sampled=sampled)
    return jax_model, [b for b in jax_model.blocks if b.role == "parameter"]
