"""When a GP's covariance over its training rows is a Kronecker product, and its factors.

A GP over tuple inputs ``(t, x)`` whose kernel is a product of kernels of one column each (``rbf(t) *
matern32(x)``), observed on a full grid of distinct points, has ``K = K_1 ⊗ ... ⊗ K_D`` with the rows in grid order
(:mod:`gpdsl.inference.approximations.kronecker`). Both the GP regression view (the marginal likelihood, ``ml``) and
the latent grid view (``gibbs``, ``pm``; :mod:`gpdsl.inference.families.latent_grid`) ask the same two questions:
:func:`separable_grid` (is ``K`` a Kronecker product here, and over which grid?) and :func:`grid_factors` (its
factors at given hyperparameters).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.inference.approximations import kronecker
from gpdsl.ir.structure import column_factors, expression_refs
from gpdsl.kernels import KERNELS, Kernel


def separable_grid(jax_model, statement) -> kronecker.GridLayout | None:
    """The grid of a GP statement's training rows when its covariance there is a Kronecker product; else None.

    That needs inputs of data alone, a full grid of distinct points over two or more columns
    (:func:`~gpdsl.inference.approximations.kronecker.grid_layout`), and a kernel that is a product of kernels of one
    column each (:func:`~gpdsl.ir.structure.column_factors`), none with same-index terms (``white``).

    Parameters
    ----------
    jax_model : JaxModel
        The model's lowering, with its data.
    statement : ir.GPStatement
        The GP statement.
    """
    if any(not expression_refs(c) <= set(jax_model.data) for c in statement.inputs.components):
        return None
    leaves = column_factors(statement.kernel, jax_model.gp_input_offsets(statement))
    if leaves is None or any(leaf.name not in KERNELS or KERNELS[leaf.name].evaluate_same is not Kernel.evaluate_same
                             for leaf in leaves):
        return None
    with jax.ensure_compile_time_eval():
        points = np.asarray(jax_model.gp_inputs(statement, jax_model.data))
    return kronecker.grid_layout(points.T) if points.ndim == 2 and points.shape[1] > 1 else None


def grid_factors(kernel: Kernel, points, layout: kronecker.GridLayout) -> list[jax.Array]:
    """``K_1, ..., K_D`` with ``K = K_1 ⊗ ... ⊗ K_D`` over ``layout`` (rows in grid order), without jitter.

    For a kernel separable by column, ``K_j`` is the kernel over the points that vary column ``j`` alone from a
    reference point ``x0`` (the point of largest prior variance), divided, for the first factor, by
    ``k(x0, x0)^(D - 1)`` (so that the product counts the variance once).

    Parameters
    ----------
    kernel : Kernel
        The GP's kernel at the hyperparameters (traceable).
    points : array_like, shape (N, D)
        The training inputs (any row order).
    layout : GridLayout
        Their grid (:func:`separable_grid`).
    """
    points = jnp.asarray(points, dtype=float)
    variances = kernel.diag(points)
    reference = points[jnp.argmax(variances)]
    factors = []
    for column, axis in enumerate(layout.axes):
        varied = jnp.tile(reference, (axis.size, 1)).at[:, column].set(jnp.asarray(axis))
        factors.append(kernel(varied))
    factors[0] = factors[0] / jnp.max(variances) ** (len(factors) - 1)
    return factors
