"""The sparse variational GP bound for any factorised likelihood (Hensman, Matthews & Ghahramani 2015).

A latent GP ``f`` with kernel ``k`` is summarised by its values ``u = f(Z)`` at ``M`` inducing inputs ``Z``, with
``q(u) = N(m, S)``. In the *whitened* parameterisation (the default of :mod:`gpdsl.inference.variational.svgp_fit`)
``q`` is over ``v = L^-1 u``, ``L L^T = K(Z) + jitter I``, whose prior is ``N(0, I)``; unwhitened, over ``u`` itself,
prior ``N(0, K(Z))``. Either way every point's latent value has the Gaussian marginal

    q(f_n) = N(a_n^T m_v, k(x_n, x_n) - a_n^T a_n + a_n^T S_v a_n),   a_n = L^-1 k(Z, x_n),

with ``(m_v, S_v)`` the moments of ``q(v)``, and the bound on ``log p(y)`` is

    ELBO = sum_n E_q(f_n)[log p(y_n | f_n)] - KL(q(v) || N(0, I)),

a sum over the points, so ``N / B`` times the sum over a minibatch of ``B`` points estimates it without bias. The
expectations are the likelihood's ``expected_log_density`` (closed forms for ``normal`` and ``poisson_log``,
Gauss-Hermite otherwise; :mod:`gpdsl.likelihoods.quadrature`); the caller passes them as a function of the
batch's marginal means and variances (which carries the batch's observations, offsets and other likelihood
arguments). Under a Gaussian likelihood the optimal ``q(u)`` is Titsias's (:func:`gaussian_optimal_moments`), at
which the bound equals the collapsed bound of :mod:`gpdsl.inference.variational.sgpr`; with ``Z = X`` both equal
the exact log marginal likelihood.

:func:`natural_gradient_step` is a step of ``q``'s natural parameters along the natural gradient (Salimbeni,
Eleftheriadis & Hensman 2018): the gradient with respect to the expectation parameters ``(m, S + m m^T)``. A step of
size 1 on the whole data of a Gaussian likelihood lands on the optimal ``q``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from gpdsl.inference.variational.sgpr import (DEFAULT_JITTER, cross_covariance, inducing_covariance, sgpr_statistics,
                                              whitened_statistics)
from gpdsl.inference.variational.uncollapsed_bound import optimal_inducing_q
from gpdsl.numerics import CHOLESKY_JITTER_CEILING
from gpdsl.numerics.linalg import cho_solve, cholesky, cholesky_with_jitter, logdet_chol, solve_triangular

SMALLEST_VARIANCE = 1e-12
"""Floor of a marginal variance ``q(f_n)`` (rounding can make it negative where ``x_n`` is an inducing input)."""


def inducing_factor(kernel, Z, jitter: float = DEFAULT_JITTER) -> jax.Array:
    """``L`` with ``L L^T = K(Z) + jitter I`` (jitter escalated only if the factorisation fails; traceable)."""
    return cholesky_with_jitter(inducing_covariance(kernel, Z, jitter), jitter=CHOLESKY_JITTER_CEILING)[0]


def whitened_moments(L, mean, covariance, whiten: bool):
    """The moments of ``q(v)``, ``v = L^-1 u``, from those of ``q`` (``q(v)``'s own when ``whiten``)."""
    if whiten:
        return mean, covariance
    half = solve_triangular(L, covariance, lower=True)
    return solve_triangular(L, mean, lower=True), solve_triangular(L, half.T, lower=True)


def marginals_from_whitened(kernel, Z, X, L, mean_v, covariance_v):
    """Means and variances of ``q(f_n)`` at the rows of ``X`` (see the module docstring; traceable)."""
    A = solve_triangular(L, cross_covariance(kernel, X, Z).T, lower=True)          # L^-1 K(Z, X), (M, n)
    variance = kernel.diag(X) - jnp.sum(A**2, axis=0) + jnp.sum(A * (covariance_v @ A), axis=0)
    return A.T @ mean_v, jnp.maximum(variance, SMALLEST_VARIANCE)


def latent_marginals(kernel, Z, X, mean, covariance, *, whiten: bool = True, jitter: float = DEFAULT_JITTER):
    """Means and variances of ``q(f)`` at the rows of ``X`` for ``q(u)`` (or ``q(v)`` when ``whiten``) with moments
    ``mean`` (M,) and ``covariance`` (M, M) (traceable): the predictive of the latent values at new inputs."""
    L = inducing_factor(kernel, Z, jitter)
    return marginals_from_whitened(kernel, Z, X, L, *whitened_moments(L, mean, covariance, whiten))


def svgp_bound_moments(expected, kernel, Z, X, mean, covariance, *, whiten: bool = True,
                       jitter: float = DEFAULT_JITTER, scale: float = 1.0, log_det=None) -> jax.Array:
    """The bound ``scale * sum_n E[log p(y_n | f_n)] - KL(q || p)`` for ``q`` given by its moments (traceable).

    Parameters
    ----------
    expected : callable
        ``expected(mean, var)``: ``E[log p(y_n | f_n)]`` at the points of ``X`` for ``f_n ~ N(mean_n, var_n)``,
        elementwise.
    kernel : Kernel
    Z : array_like, shape (M, d)
        Inducing inputs.
    X : array_like, shape (B, d)
        The points of the batch (all points for the bound itself).
    mean, covariance : array_like, shapes (M,) and (M, M)
        Moments of ``q(v)`` (``whiten``) or ``q(u)``.
    whiten : bool
    jitter : float
        Added to the diagonal of ``K(Z)``.
    scale : float
        ``N / B`` for a minibatch of ``B`` of ``N`` points.
    log_det : array_like, optional
        ``log det covariance`` when the caller has it from a Cholesky factor (else from ``covariance``).

    Returns
    -------
    jax.Array
    """
    L = inducing_factor(kernel, Z, jitter)
    mean_v, covariance_v = whitened_moments(L, mean, covariance, whiten)
    f_mean, f_variance = marginals_from_whitened(kernel, Z, X, L, mean_v, covariance_v)
    if log_det is None:
        log_det_v = logdet_chol(cholesky(covariance_v))
    else:
        log_det_v = log_det if whiten else log_det - 2.0 * jnp.sum(jnp.log(jnp.diag(L)))
    kl = 0.5 * (jnp.trace(covariance_v) + mean_v @ mean_v - mean_v.shape[0] - log_det_v)
    return scale * jnp.sum(expected(f_mean, f_variance)) - kl


def svgp_bound(expected, kernel, Z, X, mean, chol, **options) -> jax.Array:
    """:func:`svgp_bound_moments` for ``q`` given by its mean and the lower-triangular factor ``chol`` of its
    covariance (the upper triangle ignored): the parameterisation Adam moves."""
    chol = jnp.tril(chol)
    log_det = 2.0 * jnp.sum(jnp.log(jnp.abs(jnp.diag(chol))))
    return svgp_bound_moments(expected, kernel, Z, X, mean, chol @ chol.T, log_det=log_det, **options)


def natural_gradient_step(bound_of_moments, mean, covariance, step: float):
    """One natural-gradient step of ``q = N(mean, covariance)`` of size ``step`` (traceable).

    Parameters
    ----------
    bound_of_moments : callable
        ``bound_of_moments(mean, covariance) -> scalar`` (the bound, or its minibatch estimate, in ``q``'s moments).
    mean, covariance : array_like
    step : float
        ``gamma``: the natural parameters ``(S^-1 m, -S^-1 / 2)`` move by ``gamma`` times the gradient of the bound
        with respect to the expectation parameters ``(m, S + m m^T)``.

    Returns
    -------
    mean, covariance : jax.Array
        The moved ``q``; ``q`` itself where the step leaves no positive-definite covariance.
    """
    def of_expectations(first, second):
        return bound_of_moments(first, second - jnp.outer(first, first))

    first_gradient, second_gradient = jax.grad(of_expectations, argnums=(0, 1))(
        mean, covariance + jnp.outer(mean, mean))
    second_gradient = 0.5 * (second_gradient + second_gradient.T)
    identity = jnp.eye(mean.shape[0])
    precision = cho_solve((cholesky(covariance), True), identity)
    new_precision = precision - 2.0 * step * second_gradient
    factor = cholesky(0.5 * (new_precision + new_precision.T))
    new_covariance = cho_solve((factor, True), identity)
    new_mean = new_covariance @ (precision @ mean + step * first_gradient)
    usable = jnp.all(jnp.isfinite(new_covariance)) & jnp.all(jnp.isfinite(new_mean))
    return (jnp.where(usable, new_mean, mean),
            jnp.where(usable, 0.5 * (new_covariance + new_covariance.T), covariance))


def gaussian_optimal_moments(kernel, Z, X, y, noise_variance, *, whiten: bool = True,
                             jitter: float = DEFAULT_JITTER):
    """The moments of the ``q`` that maximises the bound under ``y ~ N(f, noise_variance)`` on the whole data
    (Titsias's): those of :func:`~gpdsl.inference.variational.uncollapsed_bound.optimal_inducing_q`, of ``q(v)`` from
    the whitened statistics when ``whiten`` (traceable)."""
    y = jnp.reshape(jnp.asarray(y, dtype=float), (-1, 1))
    if whiten:
        L, stats = whitened_statistics(kernel, X, Z, jitter)
        q = optimal_inducing_q(y, stats.psi1, stats.psi2, jnp.eye(L.shape[0]), noise_variance)
    else:
        stats = sgpr_statistics(kernel, X, Z)
        q = optimal_inducing_q(y, stats.psi1, stats.psi2, inducing_covariance(kernel, Z, jitter), noise_variance)
    return q.mean[:, 0], q.chol @ q.chol.T
