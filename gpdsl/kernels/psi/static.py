"""Closed-form psi statistics of the constant and white-noise kernels, with any other term."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from gpdsl.kernels.psi.closed_form import register_cross, register_term
from gpdsl.kernels.static import Constant, White


class _StaticTerm(NamedTuple):
    value: jax.Array

    @classmethod
    def from_kernel(cls, kernel, Q):
        return cls(kernel.variance)

    def psi0(self, mean, variance):
        return jnp.full((mean.shape[0],), self.value)


@register_term(White)
class WhiteTerm(_StaticTerm):
    """White noise: its variance at the same index, zero between a point and an inducing input."""

    def psi1(self, Z, mean, variance):
        return jnp.zeros((mean.shape[0], Z.shape[0]))


@register_term(Constant)
class ConstantTerm(_StaticTerm):
    """A constant kernel."""

    def psi1(self, Z, mean, variance):
        return jnp.full((mean.shape[0], Z.shape[0]), self.value)


@register_cross(WhiteTerm)
def _white_any(t1, t2, psi1_1, psi1_2, inputs, symmetric):
    """Zero: white noise never correlates a latent point with an inducing input."""
    M = inputs.Z.shape[0]
    return jnp.zeros((inputs.W.shape[1], M, M))


@register_cross(ConstantTerm)
def _constant_any(t1, t2, psi1_1, psi1_2, inputs, symmetric):
    """The constant times the weighted ``psi1`` of the other term."""
    G, M = inputs.W.shape[1], inputs.Z.shape[0]
    if isinstance(t1, ConstantTerm):
        return jnp.broadcast_to(t1.value * (inputs.W.T @ psi1_2)[:, None, :], (G, M, M))
    return jnp.broadcast_to(t2.value * (inputs.W.T @ psi1_1)[:, :, None], (G, M, M))
