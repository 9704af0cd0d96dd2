"""Closed-form psi statistics of the RBF (exponentiated quadratic) kernel.

With weights ``w_q`` (inverse squared length-scales, 0 on dimensions the kernel does not see),
``E[k(x, z)]`` and ``E[k(x, z) k'(x, z')]`` for two RBF kernels are Gaussian integrals of
exponentiated quadratics (Titsias & Lawrence 2010; Damianou, Titsias & Lawrence 2016, App. B). They
are written as matrix products of point and centre features with hand-written gradients, which
compile to far fewer operations than differentiating the broadcast formulas.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.kernels.psi.closed_form import full_dims, register_cross, register_term
from gpdsl.kernels.stationary import RBF


@register_term(RBF)
class RBFTerm(NamedTuple):
    """An RBF kernel over all ``Q`` latent dimensions.

    Attributes
    ----------
    variance : jax.Array
        The kernel's variance.
    weights : jax.Array, shape (Q,)
        Inverse squared length-scales, 0 on dimensions the kernel does not see.
    """

    variance: jax.Array
    weights: jax.Array

    @classmethod
    def from_kernel(cls, kernel, Q):
        if kernel.inv_ls2 is not None:
            weights = full_dims(kernel.inv_ls2, kernel, "inv_ls2", Q)
        else:
            weights = full_dims(1.0 / jnp.square(kernel.lengthscale), kernel, "lengthscale", Q)
        return cls(kernel.variance, weights)

    def psi0(self, mean, variance):
        return jnp.full((mean.shape[0],), self.variance)

    def psi1(self, Z, mean, variance):
        reference = jax.lax.stop_gradient(jnp.mean(Z, 0))
        exponentials = _gaussian_exponentials(self.weights, variance, mean - reference, Z - reference,
                                              jnp.zeros(Z.shape[0]))
        return self.variance * exponentials.T


def _gaussian_features(precision, variance, mean, centres, centre_offset):
    """Features whose product ``centre @ point_t`` is the ``(K, N)`` matrix of exponents of the Gaussian
    integral ``E[exp(-1/2 sum_q precision_q (x_q - centres[k, q])^2)]`` over ``x ~ N(mean[n], diag(variance[n]))``,
    plus ``centre_offset[k]``: with ``d = 1 + precision * variance`` and ``gain = precision / d``::

        -1/2 sum_q log d[n, q] - 1/2 sum_q gain[n, q] (mean[n, q] - centres[k, q])^2 + centre_offset[k]

    Returns the point features transposed ``(2Q + 2, N)``, the centre features ``(K, 2Q + 2)`` and, built
    separately, their transpose (XLA folds a transpose into the matrix product that takes it, which then runs
    in a slower kernel), and ``gain`` transposed. The means and centres should be centred near the centres,
    which keeps the rounding error of the expanded square at the size of the exponent itself.
    """
    mean_t, variance_t = mean.T, variance.T
    denominator_t = 1.0 + precision[:, None] * variance_t
    gain_t = precision[:, None] / denominator_t
    point_part = -0.5 * (jnp.sum(jnp.log(denominator_t), 0) + jnp.sum(gain_t * jnp.square(mean_t), 0))
    point_t = jnp.concatenate([gain_t * mean_t, -0.5 * gain_t, point_part[None], jnp.ones_like(point_part)[None]])
    centre = jnp.concatenate([centres, jnp.square(centres), jnp.ones_like(centre_offset)[:, None],
                              centre_offset[:, None]], 1)
    centres_t = centres.T
    centre_t = jnp.concatenate([centres_t, jnp.square(centres_t), jnp.ones_like(centre_offset)[None],
                                centre_offset[None]])
    return point_t, centre, centre_t, gain_t


def _feature_cotangents(precision, variance, mean, centres, gain_t, d_point_t, d_centre):
    """Cotangents of ``(precision, variance, mean, centres, centre_offset)`` from those of the features."""
    Q = gain_t.shape[0]
    mean_t = mean.T
    d_scaled, d_gain_part, d_point_part = d_point_t[:Q], d_point_t[Q:2 * Q], d_point_t[2 * Q]
    d_gain = mean_t * d_scaled - 0.5 * d_gain_part - 0.5 * jnp.square(mean_t) * d_point_part
    inverse = 1.0 / (1.0 + precision[:, None] * variance.T)
    d_precision = jnp.sum(inverse * (inverse * d_gain - 0.5 * variance.T * d_point_part), 1)
    d_variance = -gain_t * (gain_t * d_gain + 0.5 * d_point_part)
    d_mean = gain_t * (d_scaled - mean_t * d_point_part)
    d_centres = d_centre[:, :Q] + 2.0 * centres * d_centre[:, Q:2 * Q]
    return d_precision, d_variance.T, d_mean.T, d_centres, d_centre[:, 2 * Q + 1]


@jax.custom_vjp
def _gaussian_exponentials(precision, variance, mean, centres, centre_offset):
    """``exp`` of the ``(K, N)`` exponents of :func:`_gaussian_features`, with a hand-written gradient
    (two matrix products and the map of :func:`_feature_cotangents`)."""
    point_t, centre, _, _ = _gaussian_features(precision, variance, mean, centres, centre_offset)
    return jnp.exp(centre @ point_t)


def _gaussian_exponentials_forward(precision, variance, mean, centres, centre_offset):
    point_t, centre, centre_t, gain = _gaussian_features(precision, variance, mean, centres, centre_offset)
    exponentials = jnp.exp(centre @ point_t)
    return exponentials, (precision, variance, mean, centres, gain, point_t, centre_t, exponentials)


def _gaussian_exponentials_backward(residuals, cotangent):
    *inputs, point_t, centre_t, exponentials = residuals
    tilted = cotangent * exponentials
    return _feature_cotangents(*inputs, centre_t @ tilted, tilted @ point_t.T)


_gaussian_exponentials.defvjp(_gaussian_exponentials_forward, _gaussian_exponentials_backward)


@jax.custom_vjp
def _weighted_gaussian_exponentials(precision, variance, mean, centres, centre_offset, W):
    """``(exp(X) @ W).T``, shape ``(G, K)``, for the ``(K, N)`` exponents ``X`` of :func:`_gaussian_features`.

    The gradient reuses the exponentials in plain matrix products; for one column of weights it never forms
    their elementwise product with the cotangent.
    """
    return _weighted_gaussian_exponentials_forward(precision, variance, mean, centres, centre_offset, W)[0]


def _weighted_gaussian_exponentials_forward(precision, variance, mean, centres, centre_offset, W):
    point_t, centre, centre_t, gain = _gaussian_features(precision, variance, mean, centres, centre_offset)
    exponentials = jnp.exp(centre @ point_t)
    return (exponentials @ W).T, (precision, variance, mean, centres, gain, point_t, centre_t, W, exponentials)


def _weighted_gaussian_exponentials_backward(residuals, cotangent):
    *inputs, point_t, centre_t, W, exponentials = residuals
    if W.shape[1] == 1:
        w, g = W[:, 0], cotangent[0]
        d_point_t = w * ((centre_t * g) @ exponentials)
        d_centre = g[:, None] * (exponentials @ (w * point_t).T)
    else:
        tilted = exponentials * (cotangent.T @ W.T)
        d_point_t, d_centre = centre_t @ tilted, tilted @ point_t.T
    return (*_feature_cotangents(*inputs, d_point_t, d_centre), (cotangent @ exponentials).T)


_weighted_gaussian_exponentials.defvjp(_weighted_gaussian_exponentials_forward,
                                       _weighted_gaussian_exponentials_backward)


@register_cross(RBFTerm, RBFTerm)
def _rbf_rbf(t1, t2, psi1_1, psi1_2, inputs, symmetric):
    """``sum_n W[n, g] E[k1(x_n, z_m) k2(x_n, z_m')]`` for two RBF terms.

    Per dimension the product of the two exponentiated quadratics is one Gaussian in ``x`` with
    precision ``w1 + w2`` centred at ``(w1 z_m + w2 z_m') / (w1 + w2)``, times
    ``exp(-w1 w2 / (2 (w1 + w2)) (z_m - z_m')^2)``. When ``symmetric`` (the two terms are the
    same) only pairs ``m <= m'`` are evaluated. Pairs are picked and put back by products with one-hot
    matrices, which are exact and cheaper to compile and differentiate than gathers and scatters.
    """
    Z, mean, variance, W = inputs
    M = Z.shape[0]
    rows, cols = np.triu_indices(M) if symmetric else np.indices((M, M)).reshape(2, -1)
    first, second = np.eye(M)[rows], np.eye(M)[cols]
    Z1, Z2 = first @ Z, second @ Z
    total = t1.weights + t2.weights
    seen = total > 0
    safe_total = jnp.where(seen, total, 1.0)
    centres = (t1.weights * Z1 + t2.weights * Z2) / safe_total
    pair_gain = jnp.where(seen, t1.weights * t2.weights / safe_total, 0.0)
    pair_exponent = -0.5 * jnp.sum(pair_gain * jnp.square(Z1 - Z2), -1)

    reference = jax.lax.stop_gradient(jnp.mean(Z, 0))
    sums = _weighted_gaussian_exponentials(total, variance, mean - reference, centres - reference, pair_exponent, W)
    if not symmetric:
        return (t1.variance * t2.variance) * sums.reshape(-1, M, M)
    upper = (first.T * sums[:, None, :]) @ second
    return (t1.variance * t2.variance) * (upper + jnp.swapaxes(upper * (1.0 - np.eye(M)), -1, -2))
