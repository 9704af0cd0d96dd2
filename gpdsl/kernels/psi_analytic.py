"""Closed-form psi statistics for RBF, Linear, Constant and White kernels, their sums and scalings.

A supported kernel tree is flattened into a list of ``(coefficient, term)`` pairs, each term a
leaf kernel written in the full ``Q``-dimensional latent space: a kernel's ``active_dims`` become
zero entries of its inverse squared length-scales (RBF) or variances (Linear) on the dimensions it
does not see. ``Psi2`` of a sum is the sum over all ordered pairs of terms of
``E[k_i(x, z_m) k_j(x, z_m')]``; each pair has a closed form.

Weighted sums over points use a row-weight matrix ``W`` of shape ``(N, G)`` and return ``(G, M, M)``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.kernels.composite import Product, Scale, Sum
from gpdsl.kernels.dot_product import Linear
from gpdsl.kernels.params import check_ard, select_columns
from gpdsl.kernels.static import Constant, White
from gpdsl.kernels.stationary import RBF

_LEAVES = (RBF, Linear, Constant, White)


class _RBFTerm(NamedTuple):
    variance: jax.Array
    weights: jax.Array  # (Q,) inverse squared length-scales, 0 on unseen dims


class _LinearTerm(NamedTuple):
    variances: jax.Array  # (Q,), 0 on unseen dims


class _ConstantTerm(NamedTuple):
    value: jax.Array


class _WhiteTerm(NamedTuple):
    variance: jax.Array


def kernel_without_closed_form(kernel):
    """The first sub-kernel of ``kernel`` with no closed-form psi statistics, or ``None``.

    Parameters
    ----------
    kernel : Kernel
        A kernel tree.

    Returns
    -------
    Kernel or None
        ``None`` when every part of the tree is an RBF, Linear, Constant or White kernel,
        combined by sums, scalar scalings and products with a Constant.
    """
    kind = type(kernel)
    if kind in _LEAVES:
        return None
    if kind is Sum:
        return kernel_without_closed_form(kernel.k1) or kernel_without_closed_form(kernel.k2)
    if kind is Scale:
        return kernel_without_closed_form(kernel.kernel)
    if kind is Product:
        if type(kernel.k1) is Constant:
            return kernel_without_closed_form(kernel.k2)
        if type(kernel.k2) is Constant:
            return kernel_without_closed_form(kernel.k1)
    return kernel


def analytic_supported(kernel) -> bool:
    """Whether ``kind="analytic"`` psi statistics exist for this kernel tree.

    Parameters
    ----------
    kernel : Kernel
        A kernel tree.

    Returns
    -------
    bool
        True for RBF, Linear, Constant and White kernels and any sums and scalar scalings of
        them (including products with a Constant); False as soon as the tree contains another
        kernel (Matérn, Periodic, MLP, ...) or a product of two non-constant kernels.
    """
    return kernel_without_closed_form(kernel) is None


def _spread(value, kernel, name, Q):
    """A per-active-dimension parameter scattered (added) into a length-``Q`` vector."""
    dims = select_columns(np.arange(Q), kernel.active_dims)
    check_ard(value, name, type(kernel).__name__.lower(), len(dims))
    value = jnp.broadcast_to(value, (len(dims),))
    if np.array_equal(dims, np.arange(Q)):
        return value
    return jnp.zeros(Q).at[dims].add(value)


def _terms(kernel, Q, coefficient=1.0):
    kind = type(kernel)
    if kind is RBF:
        if kernel.inv_ls2 is not None:
            weights = _spread(kernel.inv_ls2, kernel, "inv_ls2", Q)
        else:
            weights = _spread(1.0 / jnp.square(kernel.lengthscale), kernel, "lengthscale", Q)
        return [(coefficient, _RBFTerm(kernel.variance, weights))]
    if kind is Linear:
        return [(coefficient, _LinearTerm(_spread(kernel.variance, kernel, "variance", Q)))]
    if kind is Constant:
        return [(coefficient, _ConstantTerm(kernel.variance))]
    if kind is White:
        return [(coefficient, _WhiteTerm(kernel.variance))]
    if kind is Sum:
        return _terms(kernel.k1, Q, coefficient) + _terms(kernel.k2, Q, coefficient)
    if kind is Scale:
        return _terms(kernel.kernel, Q, coefficient * kernel.scale)
    if type(kernel.k1) is Constant:
        return _terms(kernel.k2, Q, coefficient * kernel.k1.variance)
    return _terms(kernel.k1, Q, coefficient * kernel.k2.variance)


def _psi0(term, mean, variance):
    N = mean.shape[0]
    if isinstance(term, _LinearTerm):
        return (jnp.square(mean) + variance) @ term.variances
    value = term.value if isinstance(term, _ConstantTerm) else term.variance
    return jnp.full((N,), value)


def _psi1(term, Z, mean, variance):
    N, M = mean.shape[0], Z.shape[0]
    if isinstance(term, _RBFTerm):
        reference = jax.lax.stop_gradient(jnp.mean(Z, 0))
        exponentials = _gaussian_exponentials(term.weights, variance, mean - reference, Z - reference, jnp.zeros(M))
        return term.variance * exponentials.T
    if isinstance(term, _LinearTerm):
        return (mean * term.variances) @ Z.T
    if isinstance(term, _ConstantTerm):
        return jnp.full((N, M), term.value)
    return jnp.zeros((N, M))


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


def _rbf_rbf(t1, t2, Z, mean, variance, W, symmetric):
    """``sum_n W[n, g] E[k1(x_n, z_m) k2(x_n, z_m')]`` for two RBF terms.

    Per dimension the product of the two exponentiated quadratics is one Gaussian in ``x`` with
    precision ``w1 + w2`` centred at ``(w1 z_m + w2 z_m') / (w1 + w2)``, times
    ``exp(-w1 w2 / (2 (w1 + w2)) (z_m - z_m')^2)``. When ``symmetric`` (the two terms are the
    same) only pairs ``m <= m'`` are evaluated. Pairs are picked and put back by products with one-hot
    matrices, which are exact and cheaper to compile and differentiate than gathers and scatters.
    """
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


def _rbf_linear(rbf, linear, rbf_psi1, Z, mean, variance, W):
    """``sum_n W[n, g] E[k_rbf(x_n, z_m) k_lin(x_n, z_m')]`` via the RBF-tilted mean of ``x_n``."""
    denominator = 1.0 + rbf.weights * variance
    tilted = (mean[:, None, :] + (rbf.weights * variance)[:, None, :] * Z[None, :, :]) / denominator[:, None, :]
    weighted = jnp.einsum("ng,nm,nmq->gmq", W, rbf_psi1, tilted)
    return jnp.einsum("gmq,kq->gmk", weighted, Z * linear.variances)


def _linear_linear(t1, t2, Z, mean, variance, W):
    second_moment = jnp.einsum("ng,nq,nr->gqr", W, mean, mean) + jax.vmap(jnp.diag)(W.T @ variance)
    return jnp.einsum("mq,gqr,kr->gmk", Z * t1.variances, second_moment, Z * t2.variances)


def _pair(t1, t2, psi1_1, psi1_2, Z, mean, variance, W, symmetric=False):
    """``sum_n W[n, g] E[k1(x_n, z_m) k2(x_n, z_m')]``, shape ``(G, M, M)``."""
    G, M = W.shape[1], Z.shape[0]
    if isinstance(t1, _WhiteTerm) or isinstance(t2, _WhiteTerm):
        return jnp.zeros((G, M, M))
    if isinstance(t1, _ConstantTerm):
        return jnp.broadcast_to(t1.value * (W.T @ psi1_2)[:, None, :], (G, M, M))
    if isinstance(t2, _ConstantTerm):
        return jnp.broadcast_to(t2.value * (W.T @ psi1_1)[:, :, None], (G, M, M))
    if isinstance(t1, _LinearTerm) and isinstance(t2, _LinearTerm):
        return _linear_linear(t1, t2, Z, mean, variance, W)
    if isinstance(t1, _RBFTerm) and isinstance(t2, _RBFTerm):
        return _rbf_rbf(t1, t2, Z, mean, variance, W, symmetric)
    if isinstance(t1, _RBFTerm):
        return _rbf_linear(t1, t2, psi1_1, Z, mean, variance, W)
    return jnp.swapaxes(_rbf_linear(t2, t1, psi1_2, Z, mean, variance, W), -1, -2)


def analytic_statistics(kernel, Z, mean, variance, W):
    """Closed-form ``psi0`` (N,), ``psi1`` (N, M) and weighted ``psi2`` (G, M, M).

    Parameters
    ----------
    kernel : Kernel
        A tree for which :func:`analytic_supported` is True.
    Z : jax.Array, shape (M, Q)
        Inducing inputs.
    mean, variance : jax.Array, shape (N, Q)
        Means and diagonal variances of ``q(x_n)``.
    W : jax.Array, shape (N, G)
        Row weights: ``psi2[g] = sum_n W[n, g] psi2_n``.

    Returns
    -------
    tuple of jax.Array
        ``(psi0, psi1, psi2)``.
    """
    terms = _terms(kernel, mean.shape[1])
    psi0s = [_psi0(term, mean, variance) for _, term in terms]
    psi1s = [_psi1(term, Z, mean, variance) for _, term in terms]
    psi0 = sum(c * p for (c, _), p in zip(terms, psi0s))
    psi1 = sum(c * p for (c, _), p in zip(terms, psi1s))
    psi2 = 0.0
    for i, (ci, ti) in enumerate(terms):
        psi2 = psi2 + ci * ci * _pair(ti, ti, psi1s[i], psi1s[i], Z, mean, variance, W, symmetric=True)
        for j in range(i + 1, len(terms)):
            cj, tj = terms[j]
            cross = _pair(ti, tj, psi1s[i], psi1s[j], Z, mean, variance, W)
            psi2 = psi2 + ci * cj * (cross + jnp.swapaxes(cross, -1, -2))
    return psi0, psi1, psi2
