"""The view of a model that the doubly-stochastic deep-GP fit works on (Salimbeni & Deisenroth 2017).

A deep GP in the language is a chain of GP statements, each over the previous one's values::

    H ~ gp(X, k_1, mean = X);       // a hidden layer: matrix[N, D_1] H, mean the identity (or none)
    f ~ gp(H, k_2);                 // the output layer
    y ~ normal(f, s);               // scalar s

with any number of hidden layers. The view gives, at the hyperparameters ``theta`` (one flat unconstrained vector),
each layer's kernel and mean map, the noise variance, and the log prior of the hyperparameters that have one.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from gpdsl.backends.jax.lowering import Block, JaxModel
from gpdsl.errors import MethodError
from gpdsl.inference.families.hyperparameters import (
    HyperparameterBlocks,
    NormalObservations,
    complete_outputs,
    lowered_with_blocks,
    require_normal_observations,
)
from gpdsl.inference.variational.deep_gp import LayerPrior
from gpdsl.ir import nodes as ir
from gpdsl.ir.families import DEEP_GP, classify
from gpdsl.ir.structure import GPNode

DEEP_GP_CHAIN_NEEDS = ("{method} needs a deep GP written as a chain: H ~ gp(X, k_1, mean = X); f ~ gp(H, k_2); "
                       "y ~ normal(f, s) with scalar s (hidden layers matrix[N, D_l], each mean the identity or none)")


@dataclass
class DeepGPChain(HyperparameterBlocks, NormalObservations):
    """A deep GP read from a checked model.

    Attributes
    ----------
    jax_model : JaxModel
        The centred lowering.
    layers : list of GPNode
        The GP statements from the inputs to the output.
    theta_blocks : list of Block
        The hyperparameters, in the order of ``theta``.
    X : numpy.ndarray, shape (N, D)
        Inputs.
    y : numpy.ndarray, shape (N,)
        Outputs.
    widths : list of int
        Each layer's output width (1 for the last).
    """

    jax_model: JaxModel
    layers: list[GPNode]
    theta_blocks: list[Block]
    X: np.ndarray
    y: np.ndarray
    widths: list[int]

    @property
    def observed_gp(self) -> GPNode:
        """The output layer."""
        return self.layers[-1]

    def priors(self, theta) -> list[LayerPrior]:
        """Each layer's kernel and mean map at ``theta``."""
        env = self.environment(theta)
        priors = []
        for node, width in zip(self.layers, self.widths):
            mean_map = None if node.statement.mean is None else jnp.eye(width)
            priors.append(LayerPrior(self.jax_model.gp_kernel(node.statement, env), mean_map))
        return priors


def deep_gp_view(model: ir.Model, data: dict, method: str = "dsdgp") -> DeepGPChain:
    """The :class:`DeepGPChain` of ``model``, or a refusal naming the statement that does not fit.

    Raises
    ------
    MethodError
    """
    _, output = classify(model).require((DEEP_GP,), method)
    needs = DEEP_GP_CHAIN_NEEDS.format(method=method)

    def refuse(detail, span):
        raise MethodError(f"{needs}; {detail}", span)

    require_normal_observations(output, needs)
    jax_model, blocks = lowered_with_blocks(model, data, marginalise=True)
    by_name = {node.name: node for node in jax_model.gp_nodes}
    chain = [by_name[output.name]]
    while True:
        components = chain[0].statement.inputs.components
        if len(components) != 1 or not isinstance(components[0], ir.Ref):
            refuse(f"the inputs of '{chain[0].name}' are not one variable", chain[0].statement.span)
        source = components[0].name
        if source in model.data:
            break
        node = by_name.get(source)
        if node is None or node.loops or node.statement.target.indices:
            refuse(f"'{source}' is not a hidden layer 'H ~ gp(inputs, k)'", chain[0].statement.span)
        layer_type = model.latents[source].type
        if layer_type.container != "matrix" or layer_type.array_dims:
            refuse(f"hidden layer '{source}' must be a matrix[N, D_l]", node.statement.span)
        mean = node.statement.mean
        inputs = node.statement.inputs.components
        if mean is not None and not (isinstance(mean, ir.Ref) and len(inputs) == 1 and isinstance(inputs[0], ir.Ref)
                                     and mean.name == inputs[0].name):
            refuse(f"the mean of '{source}' must be its own inputs (the identity) or none", mean.span)
        chain.insert(0, node)
    unused = sorted(set(model.latents) - {node.name for node in chain})
    if unused:
        refuse(f"this model also has latent {', '.join(unused)}", output.statement.span)
    X = np.asarray(jax_model.data[chain[0].statement.inputs.components[0].name], dtype=float)
    X = X[:, None] if X.ndim == 1 else X
    widths = [int(jax_model.block(node.name).shape[1]) for node in chain[:-1]] + [1]
    for node, width, previous in zip(chain, widths, [X.shape[1]] + widths[:-1]):
        if node.statement.mean is not None and width != previous:
            refuse(f"the identity mean of '{node.name}' needs as many columns ({width}) as its inputs ({previous})",
                   node.statement.mean.span)
    y = complete_outputs(jax_model, output, needs)
    return DeepGPChain(jax_model, chain, [b for b in blocks if b.role == "parameter"], X, y, widths)
