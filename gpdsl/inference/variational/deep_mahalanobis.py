"""The two-layer deep Mahalanobis GP (DVMGP; de Souza 2020, Sec. 4.3.1 and App. A): its variational bound and
predictive, in the forms the spec sheet checked against the author's code.

Each input ``x_i`` (``D`` values) is projected by its own matrix ``W_i`` (``Q x D``), ``z_i = W_i x_i``, and the
output is ``f = sigma_f s`` with ``s ~ GP(0, SRBF)`` over the projected points, ``y ~ N(f, sigma^2)``. The entries
of ``W`` are GP fields over the inputs: ``w_qd ~ GP(0, RBF_q)``, ``Q`` ARD-RBF kernels shared across ``d``, with
inducing values ``v_qd`` at shared pseudo-inputs ``Xi`` and ``q(v_qd) = N(mu_qd, diag(sigma_q^2))``.

Under ``q(W)`` each ``w_qd,i`` is Gaussian with mean ``mu_w[i, q, d]`` and a variance ``var_w[i, q]`` shared across
``d`` (eq. A.2), independent across ``(q, d)``, so each projected point is Gaussian with independent coordinates:
``z_qi ~ N(a_qi, b_qi)`` with ``a_qi = x_i . mu_w[i, q]`` and ``b_qi = var_w[i, q] ||x_i||^2``. The bound is then the
collapsed bound of a GP on Gaussian inputs (:mod:`gpdsl.inference.variational.collapsed_bound`) with the Psi
statistics of the output kernel ``sigma_f^2 SRBF`` under those inputs, from the Psi registry
(:func:`gpdsl.kernels.psi.psi_statistics`: the RBF's closed forms, which :mod:`gpdsl.kernels.psi.projection` spells
out for this kernel, or quadrature for another output kernel), minus
``KL(q(V) || p(V))`` (eq. A.1). Putting the inducing values on ``f`` rather than on ``s`` (the thesis's choice)
rescales them by ``sigma_f``, which leaves the collapsed bound unchanged; the reference code's jitters (on ``K_u``
and on ``sigma^2 K_u + Psi2``, which keeps the noise variance from collapsing on noiseless data) are kept, scaled by
the output kernel's variance to match.

With ``var_w = 0`` the bound is Titsias's SGPR bound on the points ``z_i = W_i x_i``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from gpdsl.kernels import Kernel
from gpdsl.kernels.psi import PsiMethod, projection, psi_statistics
from gpdsl.numerics.linalg import cho_solve, cholesky, solve_triangular
from gpdsl.numerics import GPFLOW_JITTER

JITTER = GPFLOW_JITTER
"""Diagonal jitter on ``K_u`` and ``K_v`` (the reference code's ``gpflow.settings.jitter``)."""


class DMGPVariational(NamedTuple):
    """The DVMGP's inducing inputs and ``q(V)``.

    Attributes
    ----------
    Z : jax.Array, shape (m_u, Q)
        Inducing inputs of the output layer, in the projected space.
    Xi : jax.Array, shape (m_v, D)
        Pseudo-inputs of the projection fields, shared by every ``(q, d)``.
    mean_v : jax.Array, shape (Q, D, m_v)
        Means of ``q(v_qd)``.
    log_std_v : jax.Array, shape (Q, m_v)
        Log standard deviations of ``q(v_qd)``, shared across ``d``.
    """

    Z: jax.Array
    Xi: jax.Array
    mean_v: jax.Array
    log_std_v: jax.Array


class DMGPKernels(NamedTuple):
    """The DVMGP's hyperparameters as kernels.

    Attributes
    ----------
    fields : tuple of Kernel
        The kernel of the projection fields ``w_qd`` of each ``q`` (ARD-RBF in the thesis), on the inputs.
    output : Kernel
        The output layer's kernel on the projected points (``sigma_f^2 SRBF`` in the thesis).
    noise_variance : jax.Array
        ``sigma^2``.
    """

    fields: tuple
    output: Kernel
    noise_variance: jax.Array


def projection_moments(params: DMGPVariational, kernels: DMGPKernels, X) -> tuple[jax.Array, jax.Array]:
    """Marginals of ``q(W)`` at the inputs ``X`` (eq. A.2): means ``(N, Q, D)`` and variances ``(N, Q)``."""
    X = jnp.asarray(X, dtype=jnp.float64)
    means, variances = [], []
    for q, kernel in enumerate(kernels.fields):
        L = cholesky(kernel(params.Xi) + JITTER * jnp.eye(params.Xi.shape[0]))
        A = solve_triangular(L, kernel(params.Xi, X), lower=True)          # L^-1 K_vw, (m_v, N)
        projection = solve_triangular(L.T, A, lower=False)                  # K_v^-1 K_vw
        means.append(projection.T @ params.mean_v[q].T)                     # (N, D)
        shrink = jnp.sum(A ** 2, axis=0) - jnp.sum((jnp.exp(params.log_std_v[q])[:, None] * projection) ** 2, axis=0)
        variances.append(jnp.maximum(kernel.diag(X) - shrink, 0.0))
    return jnp.stack(means, axis=1), jnp.stack(variances, axis=1)


def projected_inputs(params: DMGPVariational, kernels: DMGPKernels, X) -> tuple[jax.Array, jax.Array]:
    """Means and variances ``(N, Q)`` of the projected points ``z_i = W_i x_i`` under ``q(W)``
    (:func:`gpdsl.kernels.psi.projection.projected_inputs` of the marginals of ``q(W)``)."""
    return projection.projected_inputs(X, *projection_moments(params, kernels, X))


def kl_projection(params: DMGPVariational, kernels: DMGPKernels) -> jax.Array:
    """``KL(q(V) || p(V))`` (eq. A.1), summed over ``(q, d)``."""
    total = jnp.zeros(())
    Q, D, m = params.mean_v.shape
    for q, kernel in enumerate(kernels.fields):
        L = cholesky(kernel(params.Xi) + JITTER * jnp.eye(m))
        variance = jnp.exp(2.0 * params.log_std_v[q])
        L_inverse = solve_triangular(L, jnp.eye(m), lower=True)
        trace = jnp.sum(L_inverse ** 2 * variance[None, :])
        mahalanobis = jnp.sum(solve_triangular(L, params.mean_v[q].T, lower=True) ** 2)
        log_det = 2.0 * jnp.sum(jnp.log(jnp.diag(L)))
        total = total + 0.5 * (D * trace + mahalanobis + D * log_det - D * jnp.sum(jnp.log(variance)) - D * m)
    return total


def dmgp_bound(params: DMGPVariational, kernels: DMGPKernels, X, y, psi_method: PsiMethod = PsiMethod()) -> jax.Array:
    """The collapsed ELBO of the DVMGP (spec sheet C, Sec. 1.3): the data term minus ``KL(q(V) || p(V))``.

    Parameters
    ----------
    params : DMGPVariational
    kernels : DMGPKernels
    X : array_like, shape (N, D)
        Inputs.
    y : array_like, shape (N,)
        Outputs.
    psi_method : PsiMethod
        How the output kernel's Psi statistics are computed (closed form by default).

    Returns
    -------
    jax.Array
        The scalar bound (NaN where a covariance is not positive definite).
    """
    mean, variance = projected_inputs(params, kernels, X)
    return output_layer_bound(params, kernels, mean, variance, y, psi_method) - kl_projection(params, kernels)


def _scale(params: DMGPVariational, kernels: DMGPKernels) -> jax.Array:
    """The output kernel's mean prior variance at the inducing inputs (``sigma_f^2`` for ``sigma_f^2 SRBF``): the
    reference code's jitters, set on ``SRBF``, scale with it here, where the inducing values sit on ``f``."""
    return jnp.mean(kernels.output.diag(params.Z))


def _inducing_covariance(params: DMGPVariational, kernels: DMGPKernels) -> jax.Array:
    """``K_u`` of the output kernel, with ``JITTER`` times the kernel's scale on its diagonal."""
    return kernels.output(params.Z) + JITTER * _scale(params, kernels) * jnp.eye(params.Z.shape[0])


def output_layer_bound(params: DMGPVariational, kernels: DMGPKernels, mean, variance, y,
                       psi_method: PsiMethod = PsiMethod()) -> jax.Array:
    """The data term of the collapsed bound (spec sheet C, Sec. 1.3) on Gaussian projected points
    ``N(mean, variance)`` (``(N, Q)`` each)::

        -n/2 log 2 pi - (n - m)/2 log sigma^2 + 1/2 log|K_u| - 1/2 log|sigma^2 K_u + Psi2 + j I| - y'y / (2 sigma^2)
        - psi0 / (2 sigma^2) + tr(K_u^-1 Psi2) / (2 sigma^2) + y' Psi1 (sigma^2 K_u + Psi2 + j I)^-1 Psi1' y / (2 sigma^2)

    with the reference code's jitter ``j`` on ``sigma^2 K_u + Psi2`` (Titsias's SGPR bound on the points ``mean``
    when ``variance`` is zero and ``j`` is 0)."""
    psi = psi_statistics(kernels.output, params.Z, mean, variance, psi_method)
    y = jnp.reshape(jnp.asarray(y, dtype=jnp.float64), (-1,))
    n, m = y.shape[0], params.Z.shape[0]
    noise = kernels.noise_variance
    L_u = cholesky(_inducing_covariance(params, kernels))
    L_C = cholesky(noise * (L_u @ L_u.T) + psi.psi2 + JITTER * _scale(params, kernels) * jnp.eye(m))
    projected = solve_triangular(L_C, psi.psi1.T @ y, lower=True)
    L_u_inverse_psi2 = solve_triangular(L_u, solve_triangular(L_u, psi.psi2, lower=True).T, lower=True)
    return (-0.5 * n * math.log(2 * math.pi) - 0.5 * (n - m) * jnp.log(noise)
            + jnp.sum(jnp.log(jnp.diag(L_u))) - jnp.sum(jnp.log(jnp.diag(L_C)))
            - 0.5 * (y @ y + jnp.sum(psi.psi0) - jnp.trace(L_u_inverse_psi2) - projected @ projected) / noise)


def dmgp_predict(params: DMGPVariational, kernels: DMGPKernels, X, y, X_new) -> tuple[jax.Array, jax.Array]:
    """The moment-matched predictive of ``f*`` at ``X_new`` (spec sheet C, Sec. 1.3): mean and variance ``(m,)``;
    add ``kernels.noise_variance`` for ``y*``."""
    return output_layer_predict(params, kernels, *projected_inputs(params, kernels, X), y,
                                *projected_inputs(params, kernels, X_new))


def output_layer_predict(params: DMGPVariational, kernels: DMGPKernels, mean, variance, y, new_mean, new_variance):
    """The output layer's predictive of ``f*`` at Gaussian projected points ``N(new_mean, new_variance)``, trained on
    ``N(mean, variance)``: ``mu* = psi1* alpha`` and ``psi0* - mu*^2 + tr([sigma^2 C + alpha alpha^T - K_u^-1]
    Psi2*)`` with ``C = (sigma^2 K_u + Psi2)^-1`` and ``alpha = C Psi1^T y``."""
    kernel = kernels.output
    noise = kernels.noise_variance
    psi = psi_statistics(kernel, params.Z, mean, variance)
    m = params.Z.shape[0]
    Kuu = _inducing_covariance(params, kernels)
    L_C = cholesky(noise * Kuu + psi.psi2 + JITTER * _scale(params, kernels) * jnp.eye(m))
    y = jnp.reshape(jnp.asarray(y, dtype=jnp.float64), (-1,))
    alpha = cho_solve((L_C, True), psi.psi1.T @ y)
    C = cho_solve((L_C, True), jnp.eye(m))
    middle = noise * C + jnp.outer(alpha, alpha) - cho_solve((cholesky(Kuu), True), jnp.eye(m))

    def one(mean_n, variance_n):
        psi_n = psi_statistics(kernel, params.Z, mean_n[None], variance_n[None])
        mu = psi_n.psi1[0] @ alpha
        return mu, psi_n.psi0[0] - mu ** 2 + jnp.sum(middle * psi_n.psi2)

    mu, var = jax.vmap(one)(jnp.asarray(new_mean), jnp.asarray(new_variance))
    return mu, jnp.maximum(var, 0.0)


def gaussian_nlpd(y, mean, variance) -> jax.Array:
    """Mean negative log predictive density of ``y`` under ``N(mean, variance)`` per point (spec sheet C)."""
    return 0.5 * math.log(2 * math.pi) + 0.5 * jnp.mean(jnp.log(variance) + (y - mean) ** 2 / variance)
