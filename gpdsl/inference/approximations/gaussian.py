"""Gaussian approximations q(f | y, theta) of a latent GP posterior, and what they predict.

The Laplace approximation and expectation propagation both give

    q(f) = N(f | mean, Sigma),    Sigma = (K^-1 + diag(s))^-1,

with ``s`` the site precisions (``W`` at the mode for Laplace, ``tau_tilde`` for EP). Everything
here works from ``s``, ``alpha = K^-1 mean`` and the Cholesky factor ``L`` of
``B = I + diag(sqrt(s)) K diag(sqrt(s))`` (Rasmussen & Williams 2006, Sec. 3.4-3.6), never from
``K^-1``. Costs are stated in ``O(n^3)`` operations: Cholesky factorisations, triangular solves with
``n`` right-hand sides and products of ``n x n`` matrices, as counted in Table 2 of Filippone &
Girolami (2014).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from gpdsl.errors import MethodError
from gpdsl.likelihoods.approximation_needs import LIKELIHOOD_NEEDS, check_likelihood
from gpdsl.likelihoods import LIKELIHOODS, capability, supporting
from gpdsl.numerics.linalg import cho_solve, cholesky, solve_triangular


class GaussianApproximation(NamedTuple):
    """A Gaussian approximation ``q(f | y, theta)`` and the approximate ``log p(y | theta)``.

    A JAX pytree: it passes through ``jit``, ``vmap`` and ``lax`` control flow.

    Attributes
    ----------
    mean : jax.Array, shape (n,)
        Mean of q: the mode ``f_hat`` (Laplace) or the EP posterior mean ``mu``.
    alpha : jax.Array, shape (n,)
        ``K^-1 mean``, computed without inverting K: the Newton vector ``a`` with ``f_hat = K a``,
        which at the mode is the gradient of ``log p(y | f)`` (Laplace), or
        ``(I + S K)^-1 nu_tilde`` (EP). The predictive mean at new inputs is ``K_star^T alpha``.
    site_precision : jax.Array, shape (n,)
        ``s``: the negative Hessian ``W`` of ``log p(y | f)`` (Laplace) or ``tau_tilde`` (EP).
    site_location : jax.Array, shape (n,)
        Natural location of the Gaussian sites, so that ``mean = Sigma site_location``:
        ``W f_hat + alpha`` (Laplace) or ``nu_tilde`` (EP).
    chol_b : jax.Array, shape (n, n)
        Lower Cholesky factor ``L`` of ``I + diag(sqrt(s)) K diag(sqrt(s))``.
    log_marginal : jax.Array, shape ()
        The approximate ``log p(y | theta)``.
    converged : jax.Array, shape (), bool
        Whether the convergence criterion was met before the iteration limit.
    iterations : jax.Array, shape (), int
        Newton iterations (Laplace) or EP sweeps performed.
    cubic_ops : jax.Array, shape (), int
        ``O(n^3)`` operations performed (see the module docstring for what counts as one).
    log_marginal_ops : jax.Array, shape (), int
        Further ``O(n^3)`` operations that ``log_marginal`` alone needs (a caller that does not use it
        does not pay them under ``jit``): one for parallel EP, none otherwise.
    """

    mean: jax.Array
    alpha: jax.Array
    site_precision: jax.Array
    site_location: jax.Array
    chol_b: jax.Array
    log_marginal: jax.Array
    converged: jax.Array
    iterations: jax.Array
    cubic_ops: jax.Array
    log_marginal_ops: jax.Array


def for_latent_gp(approximate, approximation: str, options: str):
    """``approximate`` for a :class:`~gpdsl.inference.families.latent_gp.LatentGP`: its ``..._for``.

    Parameters
    ----------
    approximate : callable
        :func:`~gpdsl.inference.approximations.laplace.laplace` or
        :func:`~gpdsl.inference.approximations.ep.ep`, called as
        ``approximate(K, y, likelihood=..., **options)``.
    approximation : {"laplace", "ep"}
        Its key in :data:`LIKELIHOOD_NEEDS`.
    options : str
        The keyword arguments of ``approximate`` that the adapter passes on, for its docstring.

    Returns
    -------
    callable
        ``adapted(problem, theta, **options) -> GaussianApproximation``, named ``<approximate>_for``:
        ``approximate`` with the model's covariance at the unconstrained hyperparameters ``theta``,
        its labels and its likelihood. The likelihood is checked first (:func:`check_likelihood`), so
        that a refusal (:class:`MethodError`) names it as the model's likelihood.
    """
    name = approximate.__name__

    def adapted(problem, theta, **options) -> GaussianApproximation:
        check_likelihood(approximation, problem.likelihood, "the model's likelihood")
        options = {"offset": problem.location_offset(theta), "args": problem.likelihood_arguments(theta), **options}
        return approximate(problem.covariance(theta), problem.y, likelihood=problem.likelihood, **options)

    adapted.__name__ = adapted.__qualname__ = f"{name}_for"
    adapted.__module__ = approximate.__module__
    adapted.__doc__ = f""":func:`{name}` for a :class:`~gpdsl.inference.families.latent_gp.LatentGP` at hyperparameters ``theta``.

    By :func:`~gpdsl.inference.approximations.gaussian.for_latent_gp`; ``options`` are {options} of
    :func:`{name}`.

    Raises
    ------
    MethodError
        When the model's likelihood has no ``{LIKELIHOOD_NEEDS[approximation][0]}``.
    """
    return adapted


def iteration_setup(K, y, tol, likelihood: str, approximation: str):
    """What the Laplace and EP iterations start from.

    Parameters
    ----------
    K : jax.Array, shape (n, n)
        Prior covariance.
    y : jax.Array, shape (n,)
        Labels.
    tol : float or None
        Convergence threshold; ``None`` for the paper's ``n / 1e4`` (Sec. 4).
    likelihood : str
        The likelihood's name.
    approximation : {"laplace", "ep"}
        The approximation iterating, a key of :data:`LIKELIHOOD_NEEDS`.

    Returns
    -------
    n : int
    tol : float
    y : jax.Array
        ``y`` in the dtype of ``K``.
    needed : callable
        The likelihood's capability that ``approximation`` needs (``derivatives`` or ``tilted_moments``).
    """
    n = K.shape[-1]
    capability_name = LIKELIHOOD_NEEDS[approximation][0]
    needed = _observed_only(LIKELIHOODS[likelihood], capability_name)
    return n, (n / 1e4 if tol is None else tol), y.astype(K.dtype), needed


def _observed_only(likelihood, capability_name: str):
    """A likelihood's ``derivatives`` or ``tilted_moments`` with a missing observation (NaN in ``y``) left out: it
    adds nothing to the log density, its gradient or ``W``, and its tilted distribution is the cavity. The
    approximation is then exact at the missing sites (their posterior is the GP conditional)."""
    capability_function = getattr(likelihood, capability_name)

    if capability_name == "tilted_moments":
        def tilted_moments(y, cavity_mean, cavity_var, *others):
            missing = jnp.isnan(y)
            log_z, mean, var = capability_function(jnp.where(missing, likelihood.placeholder, y), cavity_mean,
                                                   cavity_var, *others)
            return jnp.where(missing, 0.0, log_z), jnp.where(missing, cavity_mean, mean), \
                jnp.where(missing, cavity_var, var)

        return tilted_moments
    position = likelihood.params.index(likelihood.latent_param)

    def derivatives(y, f, *others):
        missing = jnp.isnan(y)
        y = jnp.where(missing, likelihood.placeholder, y)
        total, grad, W = capability_function(y, f, *others)
        params = [*others[:position], f, *others[position:]]
        total = jnp.where(jnp.any(missing), jnp.sum(jnp.where(missing, 0.0, likelihood.log_density(y, *params))),
                          total)
        return total, jnp.where(missing, 0.0, grad), jnp.where(missing, 0.0, W)

    return derivatives


def posterior_mean_cov(approx: GaussianApproximation, K) -> tuple[jax.Array, jax.Array]:
    """Mean and covariance of ``q``.

    ``Sigma = K - V^T V`` with ``V = L^-1 diag(sqrt(s)) K``. Cost: 2 ``O(n^3)`` operations
    (one triangular solve with ``n`` right-hand sides, one matrix product).

    Parameters
    ----------
    approx : GaussianApproximation
        The approximation.
    K : array_like, shape (n, n)
        The prior covariance it was computed with.

    Returns
    -------
    mean : jax.Array, shape (n,)
    cov : jax.Array, shape (n, n)
    """
    K = jnp.asarray(K)
    V = solve_triangular(approx.chol_b, jnp.sqrt(approx.site_precision)[:, None] * K, lower=True)
    return approx.mean, K - V.T @ V


def sample(approx: GaussianApproximation, K, key, num: int, chol_k=None) -> jax.Array:
    """Draws from ``q`` by Matheron's rule, reusing ``L`` (no factorisation of Sigma).

    ``f = mean + f0 - K sqrt(s) B^-1 (sqrt(s) f0 + z)`` with ``f0 ~ N(0, K)`` and ``z ~ N(0, I)``
    is the posterior draw of a Gaussian regression with noise precisions ``s``, hence ``~ q``.
    Cost: one Cholesky factorisation of K (none if ``chol_k`` is given), then ``O(n^2)`` per draw.

    Parameters
    ----------
    approx, K
        As in :func:`posterior_mean_cov`.
    key : jax.Array
        PRNG key.
    num : int
        Number of draws.
    chol_k : array_like, shape (n, n), optional
        Lower Cholesky factor of K, if already available.

    Returns
    -------
    jax.Array, shape (num, n)
    """
    K = jnp.asarray(K)
    chol_k = cholesky(K) if chol_k is None else chol_k
    n = K.shape[-1]
    prior_key, noise_key = jax.random.split(key)
    f0 = chol_k @ jax.random.normal(prior_key, (n, num), dtype=K.dtype)
    z = jax.random.normal(noise_key, (n, num), dtype=K.dtype)
    root_s = jnp.sqrt(approx.site_precision)[:, None]
    u = cho_solve((approx.chol_b, True), root_s * f0 + z)
    return (approx.mean[:, None] + f0 - K @ (root_s * u)).T


def log_density(approx: GaussianApproximation, K, f, chol_k=None) -> jax.Array:
    """``log q(f)``, for one point or a batch.

    Uses ``Sigma^-1 = K^-1 + diag(s)`` and ``log|Sigma| = log|K| - log|B|``.
    Cost: one Cholesky factorisation of K (none if ``chol_k`` is given), then ``O(n^2)`` per point.

    Parameters
    ----------
    approx, K
        As in :func:`posterior_mean_cov`.
    f : array_like, shape (..., n)
        Points.
    chol_k : array_like, shape (n, n), optional
        As in :func:`sample`.

    Returns
    -------
    jax.Array, shape (...)
    """
    K = jnp.asarray(K)
    chol_k = cholesky(K) if chol_k is None else chol_k
    f = jnp.asarray(f)
    d = jnp.reshape(f - approx.mean, (-1, K.shape[-1])).T
    whitened = solve_triangular(chol_k, d, lower=True)
    quad = jnp.sum(whitened**2, axis=0) + jnp.sum(approx.site_precision[:, None] * d**2, axis=0)
    log_det_sigma = 2.0 * (jnp.sum(jnp.log(jnp.diag(chol_k))) - jnp.sum(jnp.log(jnp.diag(approx.chol_b))))
    n = K.shape[-1]
    values = -0.5 * (quad + log_det_sigma + n * jnp.log(2.0 * jnp.pi))
    return jnp.reshape(values, f.shape[:-1])


def sample_with_log_density(approx: GaussianApproximation, K, key, num: int) -> tuple[jax.Array, jax.Array]:
    """Draws from ``q`` and their ``log q``, sharing one Cholesky factorisation of K.

    This is what an importance-sampling estimate of ``p(y | theta)`` needs.
    Cost: one ``O(n^3)`` operation, then ``O(n^2)`` per draw. Parameters are those of
    :func:`sample`, without ``chol_k``.

    Returns
    -------
    draws : jax.Array, shape (num, n)
    log_q : jax.Array, shape (num,)
    """
    chol_k = cholesky(jnp.asarray(K))
    draws = sample(approx, K, key, num, chol_k=chol_k)
    return draws, log_density(approx, K, draws, chol_k=chol_k)


def predict_latent(approx: GaussianApproximation, K_star, k_star_diag,
                   full: bool = False) -> tuple[jax.Array, jax.Array]:
    """Mean and variance (or covariance) of the latent values ``f_*`` at new inputs under ``q``.

    ``m_* = K_star^T alpha`` and ``s_*^2 = k_** - ||L^-1 sqrt(s) K_star||^2`` (R&W Alg. 3.2 and 3.6,
    the paper's expressions below eq. 7). Cost: a triangular solve with ``m`` right-hand sides.

    Parameters
    ----------
    approx : GaussianApproximation
        The approximation.
    K_star : array_like, shape (n, m)
        Covariances between the training and the new inputs.
    k_star_diag : array_like, shape (m,)
        Prior variances at the new inputs; with ``full``, their prior covariance (m, m).
    full : bool
        Return the predictive covariance ``K_** - V^T V`` (m, m) instead of the variances.

    Returns
    -------
    mean : jax.Array, shape (m,)
    var : jax.Array, shape (m,), or (m, m) with ``full``
    """
    K_star = jnp.asarray(K_star)
    v = solve_triangular(approx.chol_b, jnp.sqrt(approx.site_precision)[:, None] * K_star, lower=True)
    if full:
        return K_star.T @ approx.alpha, jnp.asarray(k_star_diag) - v.T @ v
    return K_star.T @ approx.alpha, jnp.asarray(k_star_diag) - jnp.sum(v**2, axis=0)


def predict(approx: GaussianApproximation, K_star, k_star_diag, likelihood: str = "bernoulli_probit") -> jax.Array:
    """Predictive class probabilities ``p(y_* = 1 | y, theta)`` (eq. 7 of the paper).

    By :func:`class_probability`. Probit: exactly ``Phi(m_* / sqrt(1 + s_*^2))`` (eq. 8). Logit: the
    integral of the logistic function against ``N(m_*, s_*^2)`` by 64-point Gauss-Hermite quadrature (not
    the probit approximation), accurate to about 1e-10 for the variances met in practice.

    Parameters
    ----------
    approx, K_star, k_star_diag
        As in :func:`predict_latent`.
    likelihood : str
        The likelihood ``p(y | f)``, one of :mod:`gpdsl.likelihoods` with a ``class_probability``.

    Returns
    -------
    jax.Array, shape (m,)

    Raises
    ------
    MethodError
        For a likelihood without ``class_probability``.
    """
    mean, var = predict_latent(approx, K_star, k_star_diag)
    return class_probability(mean, var, likelihood)


def class_probability(mean, var, likelihood: str = "bernoulli_probit") -> jax.Array:
    """``p(y = 1)`` when ``f ~ N(mean, var)``: the likelihood integrated against a Gaussian.

    The likelihood object's ``class_probability``: for probit exactly ``Phi(mean / sqrt(1 + var))``,
    for logit 64-point Gauss-Hermite quadrature.

    Raises
    ------
    MethodError
        For a likelihood without ``class_probability``.
    """
    probability = capability(likelihood, "class_probability")
    if probability is None:
        raise MethodError(f"class probabilities need a Bernoulli likelihood "
                          f"({', '.join(supporting('class_probability'))}), not {likelihood}")
    return probability(jnp.asarray(mean), jnp.asarray(var))
