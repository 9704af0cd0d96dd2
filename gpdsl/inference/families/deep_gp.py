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
)
from gpdsl.inference.variational.deep_gp import LayerPrior
from gpdsl.ir import nodes as ir
from gpdsl.ir.families import DEEP_GP_CHAIN, DeepGPFacts, DEEP_GP_CHAIN_NEEDS, classify
from gpdsl.ir.structure import GPNode


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


def deep_gp_view(model: ir.Model, data: dict, facts: DeepGPFacts | None = None, method: str = "dsdgp") -> DeepGPChain:
    """The :class:`DeepGPChain` of ``model``, or a refusal naming the statement that does not fit.

    Raises
    ------
    MethodError
    """
    if facts is None:
        _, facts = classify(model).require((DEEP_GP_CHAIN,), method)
    needs = DEEP_GP_CHAIN_NEEDS.format(method=method)

    def refuse(detail, span):
        raise MethodError(f"{needs}; {detail}", span)

    jax_model, blocks = lowered_with_blocks(model, data, marginalise=True)
    by_name = {node.name: node for node in jax_model.gp_nodes}
    chain = [by_name[node.name] for node in (*facts.hidden, facts.output)]
    output = chain[-1]
    X = np.asarray(jax_model.data[chain[0].statement.inputs.components[0].name], dtype=float)
    X = X[:, None] if X.ndim == 1 else X
    widths = [int(jax_model.block(node.name).shape[1]) for node in chain[:-1]] + [1]
    for node, width, previous in zip(chain, widths, [X.shape[1]] + widths[:-1]):
        if node.statement.mean is not None and width != previous:
            refuse(f"the identity mean of '{node.name}' needs as many columns ({width}) as its inputs ({previous})",
                   node.statement.mean.span)
    y = complete_outputs(jax_model, output, needs)
    return DeepGPChain(jax_model, chain, [b for b in blocks if b.role == "parameter"], X, y, widths)
