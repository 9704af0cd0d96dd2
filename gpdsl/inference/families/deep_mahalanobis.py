"""The view of a model that the deep Mahalanobis GP's variational fit works on (de Souza 2020, Ch. 4).

``W[q] ~ gp(X, k_q)`` for ``q`` in ``1:Q`` (the projection fields, ``array[Q] matrix[N, D] W``),
``f ~ gp(project(W, X), k_f)`` and ``y ~ normal(f, s)`` with scalar ``s``: the view gives the kernels and the noise
variance at the hyperparameters ``theta`` (one flat unconstrained vector), their log prior where they have one, and
which hyperparameters the likelihood's scale reads (held in the first phase of the training schedule).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpdsl.backends.jax.lowering import Block, JaxModel
from gpdsl.inference.families.hyperparameters import (
    HyperparameterBlocks,
    NormalObservations,
    complete_outputs,
    lowered_with_blocks,
)
from gpdsl.inference.variational.deep_mahalanobis import DMGPKernels
from gpdsl.ir import nodes as ir
from gpdsl.ir.families import DEEP_MAHALANOBIS_GP, DeepGPFacts, DEEP_MAHALANOBIS_NEEDS, classify
from gpdsl.ir.structure import GPNode


@dataclass
class DeepMahalanobisGP(HyperparameterBlocks, NormalObservations):
    """A deep Mahalanobis GP read from a checked model.

    Attributes
    ----------
    jax_model : JaxModel
        The centred lowering (``f`` integrated out).
    fields : GPNode
        The projection fields ``W[q] ~ gp(X, k_q)``.
    output : GPNode
        ``f ~ gp(project(W, X), k_f)``.
    theta_blocks : list of Block
        The hyperparameters, in the order of ``theta``.
    X : numpy.ndarray, shape (N, D)
        Inputs.
    y : numpy.ndarray, shape (N,)
        Outputs.
    """

    jax_model: JaxModel
    fields: GPNode
    output: GPNode
    theta_blocks: list[Block]
    X: np.ndarray
    y: np.ndarray

    @property
    def num_fields(self) -> int:
        """``Q``, the number of projection rows."""
        return int(self.jax_model.block(self.fields.name).shape[0])

    @property
    def observed_gp(self) -> GPNode:
        """The output GP ``f``."""
        return self.output

    def kernels(self, theta) -> DMGPKernels:
        """The field kernels, the output kernel and the noise variance at ``theta``."""
        env = self.environment(theta)
        loop = self.fields.loops[0].variable
        fields = tuple(self.jax_model.gp_kernel(self.fields.statement, {**env, loop: q + 1})
                       for q in range(self.num_fields))
        return DMGPKernels(fields, self.jax_model.gp_kernel(self.output.statement, env), self.noise_variance(theta))


def deep_mahalanobis_view(model: ir.Model, data: dict, facts: DeepGPFacts | None = None,
                          method: str = "dmgp") -> DeepMahalanobisGP:
    """The :class:`DeepMahalanobisGP` of ``model``, or a refusal naming the statement that does not fit.

    Raises
    ------
    MethodError
    """
    if facts is None:
        _, facts = classify(model).require((DEEP_MAHALANOBIS_GP,), method)
    needs = DEEP_MAHALANOBIS_NEEDS.format(method=method)
    output, project = facts.output, facts.output.statement.inputs.components[0]
    jax_model, blocks = lowered_with_blocks(model, data, marginalise=True)
    field = next(n for n in jax_model.gp_nodes if n.name == facts.hidden[0].name)
    X = np.asarray(jax_model.data[project.inputs.name], dtype=float)
    y = complete_outputs(jax_model, output, needs)
    return DeepMahalanobisGP(jax_model, field, output, [b for b in blocks if b.role == "parameter"], X, y)
