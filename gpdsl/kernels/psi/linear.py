"""Closed-form psi statistics of the linear kernel, and its cross term with the RBF kernel."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from gpdsl.kernels.dot_product import Linear
from gpdsl.kernels.psi.closed_form import full_dims, register_cross, register_term
from gpdsl.kernels.psi.rbf import RBFTerm


@register_term(Linear)
class LinearTerm(NamedTuple):
    """A linear kernel over all ``Q`` latent dimensions.

    Attributes
    ----------
    variances : jax.Array, shape (Q,)
        Per-dimension variances, 0 on dimensions the kernel does not see.
    """

    variances: jax.Array

    @classmethod
    def from_kernel(cls, kernel, Q):
        return cls(full_dims(kernel.variance, kernel, "variance", Q))

    def psi0(self, mean, variance):
        return (jnp.square(mean) + variance) @ self.variances

    def psi1(self, Z, mean, variance):
        return (mean * self.variances) @ Z.T


@register_cross(LinearTerm, LinearTerm)
def _linear_linear(t1, t2, psi1_1, psi1_2, inputs, symmetric):
    """``z_m^T A1 E[x x^T] A2 z_m'`` from the weighted second moments of the points."""
    Z, mean, variance, W = inputs
    second_moment = jnp.einsum("ng,nq,nr->gqr", W, mean, mean) + jax.vmap(jnp.diag)(W.T @ variance)
    return jnp.einsum("mq,gqr,kr->gmk", Z * t1.variances, second_moment, Z * t2.variances)


@register_cross(RBFTerm, LinearTerm)
def _rbf_linear(rbf, linear, rbf_psi1, linear_psi1, inputs, symmetric):
    """``sum_n W[n, g] E[k_rbf(x_n, z_m) k_lin(x_n, z_m')]`` via the RBF-tilted mean of ``x_n``."""
    Z, mean, variance, W = inputs
    denominator = 1.0 + rbf.weights * variance
    tilted = (mean[:, None, :] + (rbf.weights * variance)[:, None, :] * Z[None, :, :]) / denominator[:, None, :]
    weighted = jnp.einsum("ng,nm,nmq->gmq", W, rbf_psi1, tilted)
    return jnp.einsum("gmq,kq->gmk", weighted, Z * linear.variances)
