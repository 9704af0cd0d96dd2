"""Doubly-stochastic variational inference for deep GPs (Salimbeni & Deisenroth 2017).

A deep GP of ``L`` layers maps the inputs through ``h_l = f_l(h_{l-1})`` (``h_0 = X``), each ``f_l`` a vector of
``D_l`` independent GPs with kernel ``k_l`` and a mean function (the identity, or a linear map, for hidden layers;
zero at the output), and ``y ~ N(h_L, sigma^2)``. Each layer has inducing inputs ``Z_l`` (``M x D_{l-1}``) and
``q(u_l) = prod_d N(m_ld, S_ld)`` with ``S_ld = L_ld L_ld^T``; the inducing values are not whitened. Given the
previous layer's sample, a point's value in layer ``l`` is Gaussian with (eq. 8 of the paper)::

    mean = mu_l(h) + k(h, Z) K_ZZ^-1 m,    variance = k(h, h) - k(h, Z) K_ZZ^-1 (K_ZZ - S) K_ZZ^-1 k(Z, h)

per output dimension, so a sample through the layers costs ``O(N M^2)`` per layer with the reparameterisation
``h = mean + sqrt(variance) eps``. The bound (eq. 10) is

    ELBO = sum_i E_q[log p(y_i | h_L,i)] - sum_l KL(q(u_l) || p(u_l)),

where the expectation draws ``h_1 ... h_{L-1}`` by the reparameterisation and integrates the Gaussian likelihood
against the last layer's Gaussian in closed form. :func:`elbo_estimate` returns one unbiased estimate, on a minibatch
(its sum scaled by ``N / batch``) when given one. Predictions (:func:`predict`) draw ``S`` samples through the layers
and moment-match their mixture to one Gaussian per point.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from gpdsl.kernels import Kernel
from gpdsl.inference.variational.uncollapsed_bound import InducingQ, inducing_kl
from gpdsl.numerics.linalg import cholesky, solve_triangular
from gpdsl.numerics import GPFLOW_JITTER


class Layer(NamedTuple):
    """One layer's variational parameters.

    Attributes
    ----------
    Z : jax.Array, shape (M, D_in)
        Inducing inputs.
    q_mean : jax.Array, shape (M, D_out)
        Means of ``q(u)``, one column per output dimension.
    q_sqrt : jax.Array, shape (D_out, M, M)
        Lower-triangular factors of the covariances of ``q(u)`` (the strict upper triangle is ignored).
    """

    Z: jax.Array
    q_mean: jax.Array
    q_sqrt: jax.Array


class LayerPrior(NamedTuple):
    """One layer's kernel and mean function.

    Attributes
    ----------
    kernel : Kernel
        Shared by the layer's output dimensions.
    mean_map : jax.Array or None
        ``P`` of the linear mean ``h P^T`` (``D_out x D_in``; the identity for ``D_out = D_in``), None for zero.
    """

    kernel: Kernel
    mean_map: jax.Array | None


def _tril(q_sqrt):
    return jnp.tril(q_sqrt)


def layer_marginals(layer: Layer, prior: LayerPrior, H) -> tuple[jax.Array, jax.Array]:
    """Means and variances ``(N, D_out)`` of a layer's values at the points ``H`` (``N x D_in``), ``u`` integrated
    against ``q(u)``."""
    M = layer.Z.shape[0]
    L = cholesky(prior.kernel(layer.Z) + GPFLOW_JITTER * jnp.eye(M))
    A = solve_triangular(L, prior.kernel(layer.Z, H), lower=True)              # L^-1 K_ZH, (M, N)
    projection = solve_triangular(L.T, A, lower=False)                          # K_ZZ^-1 K_ZH
    mean = projection.T @ layer.q_mean
    if prior.mean_map is not None:
        mean = mean + H @ prior.mean_map.T
    S_half = jnp.einsum("dmk,mn->dkn", _tril(layer.q_sqrt), projection)         # L_d^T K_ZZ^-1 K_ZH
    variance = prior.kernel.diag(H)[:, None] - jnp.sum(A ** 2, axis=0)[:, None] + jnp.sum(S_half ** 2, axis=1).T
    return mean, jnp.maximum(variance, 1e-12)


def kl_layer(layer: Layer, prior: LayerPrior) -> jax.Array:
    """``KL(q(u) || p(u))`` summed over the layer's output dimensions."""
    Kmm = prior.kernel(layer.Z) + GPFLOW_JITTER * jnp.eye(layer.Z.shape[0])
    return inducing_kl(Kmm, InducingQ(layer.q_mean, layer.q_sqrt))


def propagate(layers, priors, X, key) -> tuple[jax.Array, jax.Array]:
    """One reparameterised sample through every layer but the last; the last layer's means and variances."""
    H = X
    for index, (layer, prior) in enumerate(zip(layers, priors)):
        mean, variance = layer_marginals(layer, prior, H)
        if index == len(layers) - 1:
            return mean, variance
        key, sub = jax.random.split(key)
        H = mean + jnp.sqrt(variance) * jax.random.normal(sub, mean.shape)
    raise ValueError("a deep GP needs at least one layer")


def elbo_estimate(layers, priors, noise_variance, X, y, key, batch=None, num_data=None) -> jax.Array:
    """One unbiased estimate of the bound (eq. 10), on the rows ``batch`` of ``X`` and ``y`` (all rows for None).

    Parameters
    ----------
    layers : sequence of Layer
    priors : sequence of LayerPrior
    noise_variance : float
        ``sigma^2`` of the Gaussian likelihood.
    X : array_like, shape (N, D)
    y : array_like, shape (N,)
    key : jax.Array
        PRNG key of the reparameterised samples.
    batch : array_like of int, optional
        Row indices of a minibatch; the data term is scaled by ``num_data / len(batch)``.
    num_data : int, optional
        ``N`` (defaults to the rows of ``X``).
    """
    X = jnp.asarray(X, dtype=jnp.float64)
    y = jnp.asarray(y, dtype=jnp.float64).reshape(-1)
    N = X.shape[0] if num_data is None else num_data
    if batch is not None:
        X, y = X[batch], y[batch]
    mean, variance = propagate(layers, priors, X, key)
    mean, variance = mean[:, 0], variance[:, 0]
    expected = -0.5 * (math.log(2 * math.pi) + jnp.log(noise_variance)
                       + ((y - mean) ** 2 + variance) / noise_variance)
    kl = sum(kl_layer(layer, prior) for layer, prior in zip(layers, priors))
    return N / X.shape[0] * jnp.sum(expected) - kl


def predict(layers, priors, noise_variance, X_new, key, num_samples: int = 200) -> tuple[jax.Array, jax.Array]:
    """The predictive of ``y*`` moment-matched over ``num_samples`` draws through the layers: mean and variance
    (noise included) per point."""
    X_new = jnp.asarray(X_new, dtype=jnp.float64)
    means, variances = jax.vmap(lambda k: propagate(layers, priors, X_new, k))(jax.random.split(key, num_samples))
    means, variances = means[..., 0], variances[..., 0]
    mean = jnp.mean(means, axis=0)
    return mean, jnp.mean(variances + means ** 2, axis=0) - mean ** 2 + noise_variance
