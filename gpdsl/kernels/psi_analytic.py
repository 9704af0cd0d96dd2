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

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from gpdsl.kernels.composite import Product, Scale, Sum  # noqa: E402
from gpdsl.kernels.dot_product import Linear  # noqa: E402
from gpdsl.kernels.params import check_ard, select_columns  # noqa: E402
from gpdsl.kernels.static import Constant, White  # noqa: E402
from gpdsl.kernels.stationary import RBF  # noqa: E402

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
    return jnp.zeros(Q).at[dims].add(jnp.broadcast_to(value, (len(dims),)))


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
        denominator = 1.0 + term.weights * variance
        exponent = _gaussian_exponent(term.weights / denominator, mean, Z, jax.lax.stop_gradient(jnp.mean(Z, 0)),
                                      -0.5 * jnp.sum(jnp.log(denominator), -1), jnp.zeros(Z.shape[0]))
        return term.variance * jnp.exp(exponent)
    if isinstance(term, _LinearTerm):
        return (mean * term.variances) @ Z.T
    if isinstance(term, _ConstantTerm):
        return jnp.full((N, M), term.value)
    return jnp.zeros((N, M))


def _gaussian_exponent(gain, mean, centres, reference, point_offset, centre_offset):
    """``point_offset[n] + centre_offset[k] - 1/2 sum_q gain[n, q] (mean[n, q] - centres[k, q])^2``.

    Computed as one matrix product of shape (N, K). The square is expanded about ``reference``
    (near the centres), which keeps the rounding error of the expansion at the size of the
    exponent itself.
    """
    mean_c = mean - reference
    centres_c = centres - reference
    ones_n, ones_k = jnp.ones_like(point_offset), jnp.ones_like(centre_offset)
    point_part = point_offset - 0.5 * jnp.sum(gain * jnp.square(mean_c), -1)
    point_features = jnp.concatenate([gain * mean_c, -0.5 * gain, point_part[:, None], ones_n[:, None]], axis=-1)
    centre_features = jnp.concatenate([centres_c, jnp.square(centres_c), ones_k[:, None], centre_offset[:, None]], -1)
    return point_features @ centre_features.T


def _rbf_rbf(t1, t2, Z, mean, variance, W, symmetric):
    """``sum_n W[n, g] E[k1(x_n, z_m) k2(x_n, z_m')]`` for two RBF terms.

    Per dimension the product of the two exponentiated quadratics is one Gaussian in ``x`` with
    precision ``w1 + w2`` centred at ``(w1 z_m + w2 z_m') / (w1 + w2)``, times
    ``exp(-w1 w2 / (2 (w1 + w2)) (z_m - z_m')^2)``. When ``symmetric`` (the two terms are the
    same) only pairs ``m <= m'`` are evaluated.
    """
    M = Z.shape[0]
    rows, cols = np.triu_indices(M) if symmetric else np.indices((M, M)).reshape(2, -1)
    Z1, Z2 = Z[rows], Z[cols]
    total = t1.weights + t2.weights
    seen = total > 0
    safe_total = jnp.where(seen, total, 1.0)
    centres = (t1.weights * Z1 + t2.weights * Z2) / safe_total
    pair_gain = jnp.where(seen, t1.weights * t2.weights / safe_total, 0.0)
    pair_exponent = -0.5 * jnp.sum(pair_gain * jnp.square(Z1 - Z2), -1)

    denominator = 1.0 + total * variance
    exponent = _gaussian_exponent(total / denominator, mean, centres, jax.lax.stop_gradient(jnp.mean(Z, 0)),
                                  -0.5 * jnp.sum(jnp.log(denominator), -1), pair_exponent)
    sums = W.T @ jnp.exp(exponent)
    if symmetric:
        pair_index = np.zeros((M, M), dtype=int)
        pair_index[rows, cols] = pair_index[cols, rows] = np.arange(len(rows))
        sums = sums[:, pair_index]
    return (t1.variance * t2.variance) * sums.reshape(-1, M, M)


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
