"""The view of a model that variational EM works on: a GPLVM.

Variational EM with Psi statistics (Titsias & Lawrence 2010; Damianou, Titsias & Lawrence 2016) needs
a model of the form ``X ~ normal(0, 1); F ~ gp(X, k); Y ~ normal(F, s)`` (the Bayesian GPLVM) or
``X ~ gp(t, k_x); F ~ gp(X, k); Y ~ normal(F, s)`` (latent inputs with a GP prior over time or observed
inputs: the dynamical and the supervised GPLVM): one GP over the latent inputs integrated out under a
Gaussian likelihood with scalar noise. A :class:`GPLVMProblem` gives the engine the kernel, the noise
variance, the prior covariance of the latent inputs and the log prior of the hyperparameters as
functions of one flat unconstrained vector ``theta``, the family of ``q(X)`` that matches the prior, and
the outputs with their missingness mask.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.backends.jax.lowering import Block, JaxModel
from gpdsl.inference.families.hyperparameters import (
    HyperparameterBlocks,
    NormalObservations,
    lowered_with_blocks,
)
from gpdsl.inference.variational.gp_prior_q import GPPriorGaussian
from gpdsl.inference.variational.latent_q import FactorisedGaussian, LatentQ
from gpdsl.inference.variational.markov_q import MATERN_ORDERS, MarkovGaussian, markov_hyperparameters
from gpdsl.ir import nodes as ir
from gpdsl.ir.families import BAYESIAN_GPLVM, GP_PRIOR_GPLVM, GPLVMFacts, classify
from gpdsl.ir.latent_hsgp import is_latent_hsgp
from gpdsl.ir.structure import GPNode
from gpdsl.kernels import Kernel
from gpdsl.numerics import GP_JITTER


@dataclass
class GPLVMProblem(HyperparameterBlocks, NormalObservations):
    """A GPLVM read from a checked model.

    Attributes
    ----------
    jax_model : JaxModel
        The model's lowering (the GP over X is marginalised).
    latent : str
        Name of the latent inputs (``X``).
    node : GPNode
        The GP over them.
    output : str
        Name of the observed outputs (``Y``).
    Y : numpy.ndarray
        Outputs ``(N, D)``; missing entries are NaN.
    theta_blocks : list of Block
        The hyperparameters, in the order of the flat ``theta`` vector.
    latent_prior : GPNode or None
        The GP prior of the latent inputs (``X ~ gp(t, k_x)``), or None for ``X ~ normal(0, 1)``.
    """

    jax_model: JaxModel
    latent: str
    node: GPNode
    output: str
    Y: np.ndarray
    theta_blocks: list[Block]
    latent_prior: GPNode | None = None

    @property
    def num_points(self) -> int:
        return self.Y.shape[0]

    @property
    def output_dim(self) -> int:
        return self.Y.shape[1]

    @property
    def latent_dim(self) -> int:
        return self.jax_model.model.latents[self.latent].type.concrete_shape(self.jax_model.sizes)[1]

    @property
    def observed(self) -> np.ndarray:
        """Boolean mask of observed output entries, shape ``(N, D)``."""
        return ~np.isnan(self.Y)

    @property
    def theta_dim(self) -> int:
        return sum(b.size for b in self.theta_blocks)

    @property
    def unpriored(self) -> list[str]:
        """Hyperparameters without a prior (point-estimated by maximising the bound alone)."""
        return self.jax_model.model.unpriored_parameters()

    @property
    def inducing_features(self) -> bool:
        """The GP is an HSGP over the latent inputs (:mod:`gpdsl.ir.latent_hsgp`): its kernel is a finite feature
        expansion, whose basis weights are the inducing variables of the bound (no inducing inputs)."""
        return is_latent_hsgp(self.node.statement)

    @property
    def observed_gp(self) -> GPNode:
        """The GP over the latent inputs (observed through ``normal(F, s)``)."""
        return self.node

    def kernel(self, theta) -> Kernel:
        """The GP's kernel at ``theta``."""
        return self.jax_model.gp_kernel(self.node.statement, self.environment(theta))

    def latent_prior_kernel(self, theta) -> Kernel:
        """The kernel ``k_x`` of the latent inputs' GP prior at ``theta``."""
        return self.jax_model.gp_kernel(self.latent_prior.statement, self.environment(theta))

    def latent_prior_covariance(self, theta, index=None) -> jax.Array:
        """``K = k_x(t, t)`` (jitter added) of each latent dimension's GP prior at ``theta``, shape ``(N, N)``.

        With ``index``, a ``(B, n)`` batch of index sets, the covariances of those sets, ``(B, n, n)``.
        """
        if index is None:
            return self.jax_model.gp_covariance(self.latent_prior.statement, self.environment(theta))
        points = self.jax_model.gp_inputs(self.latent_prior.statement, self.environment(theta))[index]
        return jax.vmap(self.latent_prior_kernel(theta).gram)(points) + GP_JITTER * jnp.eye(index.shape[1])

    def latent_prior_inputs(self) -> np.ndarray:
        """The inputs ``t`` of the latent inputs' GP prior, shape ``(N, d)``."""
        return np.asarray(self.jax_model.gp_inputs(self.latent_prior.statement, self.jax_model.data))

    def latent_q(self) -> LatentQ:
        """The family of ``q(X)`` that matches the prior of the latent inputs."""
        if self.latent_prior is None:
            return FactorisedGaussian()
        offsets = self.jax_model.gp_input_offsets(self.latent_prior.statement)
        markov = _markov_time_prior(self.latent_prior.statement.kernel, offsets)
        if markov is not None:  # a Matérn time prior: the same family in O(N) (markov_q)
            two_nu, time, labels = markov
            inputs = self.latent_prior_inputs()
            return MarkovGaussian(self.latent_prior_covariance, self.latent_prior_blocks(), inputs[:, time],
                                  inputs[:, labels] if labels else None,
                                  lambda theta: markov_hyperparameters(self.latent_prior_kernel(theta)), two_nu)
        return GPPriorGaussian(self.latent_prior_covariance, self.latent_prior_blocks())

    def latent_prior_blocks(self) -> list[np.ndarray] | None:
        """Index sets of the independent groups of the latent inputs' GP prior, or None.

        The prior's covariance is block diagonal when every term of its kernel is a product with
        ``same(g)`` over one input component ``g`` or is white noise: the blocks are the points that
        share a value of ``g`` (e.g. the frames of one sequence).
        """
        component = _grouping_component(self.latent_prior.statement.kernel)
        if component is None:
            return None
        offsets = self.jax_model.gp_input_offsets(self.latent_prior.statement)
        labels = self.latent_prior_inputs()[:, offsets[component]:offsets[component + 1]]
        _, group = np.unique(labels, axis=0, return_inverse=True)
        group = np.ravel(group)
        return [np.flatnonzero(group == g) for g in range(group.max() + 1)]


def _grouping_component(kernel: ir.Kernel) -> int | None:
    """The input component ``g`` of ``same(g)`` that splits every term of ``kernel`` into independent groups, or None."""
    if isinstance(kernel, ir.KernelLeaf):
        return kernel.component if kernel.name == "same" and kernel.component is not None else None
    if isinstance(kernel, ir.KernelScale):
        return _grouping_component(kernel.kernel)
    left, right = _grouping_component(kernel.left), _grouping_component(kernel.right)
    if isinstance(kernel, ir.KernelProduct):
        return left if left is not None else right
    white = [isinstance(k, ir.KernelLeaf) and k.name == "white" for k in (kernel.left, kernel.right)]
    if left is not None and (left == right or white[1]):
        return left
    return right if right is not None and white[0] else None


def _markov_time_prior(kernel: ir.Kernel, offsets) -> tuple[int, int, list[int]] | None:
    """``(2 nu, time column, label columns)`` when ``kernel`` is a Markovian time prior, else None.

    The form: one term ``[c *] matern{12,32,52}(t) [* same(g) ...]`` over a scalar input ``t``, plus any
    white-noise terms (each possibly scaled or times ``same``). The label columns are those of the
    ``same`` factors of the Matérn term (the independent sequences).
    """
    def products(k):
        if isinstance(k, ir.KernelLeaf):
            return [[k]]
        if isinstance(k, ir.KernelScale):
            return products(k.kernel)
        if isinstance(k, ir.KernelSum):
            return products(k.left) + products(k.right)
        return [a + b for a in products(k.left) for b in products(k.right)]

    def columns(component):
        return list(range(int(offsets[component]), int(offsets[component + 1])))

    markov = []
    for term in products(kernel):
        names = [leaf.name for leaf in term]
        others = [leaf for leaf in term if leaf.name != "same"]
        if any(leaf.component is None for leaf in term if leaf.name == "same") or not others:
            return None
        if names.count("white") == 1 and len(others) == 1:
            continue
        if len(others) != 1 or others[0].name not in MATERN_ORDERS:
            return None
        markov.append((others[0], [leaf.component for leaf in term if leaf.name == "same"]))
    if len(markov) != 1:
        return None
    matern, groups = markov[0]
    time = matern.active_columns(offsets) or list(range(int(offsets[-1])))
    if len(time) != 1 or matern.component in groups:
        return None
    return MATERN_ORDERS[matern.name], time[0], sorted({c for g in groups for c in columns(g)})


def gplvm_problem(model: ir.Model, data: dict, method: str = "vem") -> GPLVMProblem:
    """Build the :class:`GPLVMProblem` view of a model, or refuse it with what the method needs.

    Raises
    ------
    MethodError
        The model is not a Bayesian GPLVM (see :mod:`gpdsl.ir.families`).
    """
    _, facts = classify(model).require((BAYESIAN_GPLVM, GP_PRIOR_GPLVM), method)
    return gplvm_view(model, data, facts)


def gplvm_view(model: ir.Model, data: dict, facts: GPLVMFacts) -> GPLVMProblem:
    """The :class:`GPLVMProblem` of a model already classified as a GPLVM (``facts``)."""
    jax_model, theta_blocks = lowered_with_blocks(model, data, marginalise=True)
    node = next(n for n in jax_model.gp_nodes if n.name == facts.node.name)
    Y = np.asarray(jax_model.data[facts.output], dtype=float)
    prior = facts.latent_prior and next(n for n in jax_model.gp_nodes if n.name == facts.latent_prior.name)
    return GPLVMProblem(jax_model, facts.latent, node, facts.output, Y, theta_blocks, prior)
