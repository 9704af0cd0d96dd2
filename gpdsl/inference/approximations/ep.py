"""Expectation propagation for GP classification (Rasmussen & Williams 2006, Alg. 3.5).

Sequential sweeps over the sites: cavity, moment matching against ``p(y_i | f_i)`` (the likelihood's
``tilted_moments``; for probit ``Phi(y_i f_i)``), site update, rank-one update of ``Sigma``; after each
sweep ``Sigma`` and ``mu = Sigma nu_tilde`` are recomputed from the Cholesky factor of
``B = I + S^1/2 K S^1/2`` for stability. ``cubic_ops`` counts five
``O(n^3)`` operations per sweep, as in Sec. 2.1.2 of Filippone & Girolami (2014): the ``n`` rank-one
updates, the ``n`` products ``Sigma nu_tilde``, the factorisation of ``B``, the solve
``L^-1 S^1/2 K`` and the product ``V^T V``; the implementation needs only ``mu_i = Sigma[i] nu_tilde``
at site ``i``, so the second of these costs ``O(n^2)`` per sweep here.

``schedule="parallel"`` updates all sites at once from the current marginals and then recomputes
the marginals from the Cholesky factor of ``B``: the factorisation gives ``mu`` (with ``O(n^2)`` solves)
and the solve ``L^-1 S^1/2 K`` gives the diagonal of ``Sigma`` (``Sigma`` itself is never formed). The
solve is only needed for the cavities of a next sweep and for ``log Z_EP``, so a run of ``s`` sweeps
costs ``2 s - 1`` ``O(n^3)`` operations for ``q``, one more for ``log Z_EP`` (under ``jit`` the solve is
dropped when ``log_marginal`` is not used), and no ``O(n^2)`` work per site, at the price of damping
and a few more sweeps. It converges to the same fixed point. Pseudo-marginal MCMC uses it: any ``q``
that is a deterministic function of the hyperparameters keeps the estimate unbiased.

``initial_sites`` starts the sweeps from given site parameters instead of zero (a warm start): the
marginals they imply under ``K`` cost one factorisation of ``B`` and, for the parallel schedule, one
triangular solve (two more ``O(n^3)`` operations), and a fit that starts near its fixed point stops
after one or two sweeps. The result is still a deterministic function of ``K`` when the starting sites
are fixed, which is what :mod:`gpdsl.inference.mcmc.pseudo_marginal` uses.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
from jax import lax

from gpdsl.errors import MethodError
from gpdsl.inference.approximations.gaussian import (
    GaussianApproximation,
    check_likelihood,
    for_latent_gp,
    iteration_setup,
)
from gpdsl.likelihoods import LIKELIHOODS
from gpdsl.numerics.linalg import cho_solve, cholesky, solve_triangular

CUBIC_OPS_PER_SWEEP = 5
CUBIC_OPS_PER_PARALLEL_SWEEP = 2
EP_SCHEDULES = ("sequential", "parallel")
SMALLEST_SITE_PRECISION = float(jnp.finfo(jnp.float64).eps)


def check_ep_likelihood(likelihood: str, what: str = "likelihood") -> None:
    """Raise :class:`MethodError` unless ``likelihood`` has the ``tilted_moments`` EP matches."""
    check_likelihood("ep", likelihood, what)



def ep_inputs(n: int, likelihood: str, max_sweeps: int, initial_sites, offset, args):
    """EP's inputs checked and as float64 arrays for ``n`` sites: warm-start sites (precisions kept above
    :data:`SMALLEST_SITE_PRECISION`), the offset (zeros when None) and the likelihood's arguments.

    Raises
    ------
    MethodError
        For fewer than one sweep, or a likelihood without ``tilted_moments``.
    """
    check_ep_likelihood(likelihood)
    if max_sweeps < 1:
        raise MethodError(f"EP needs at least one sweep, got max_sweeps={max_sweeps}")
    if initial_sites is not None:
        tau, nu = (jnp.asarray(site, dtype=jnp.float64) for site in initial_sites)
        initial_sites = (jnp.maximum(tau, SMALLEST_SITE_PRECISION), nu)
    offset = jnp.zeros(n) if offset is None else jnp.broadcast_to(jnp.asarray(offset, dtype=jnp.float64), (n,))
    args = tuple(jnp.asarray(a, dtype=jnp.float64) for a in args)
    return initial_sites, offset, args


def ep(K, y, tol=None, max_sweeps: int = 100, schedule: str = "sequential",
       damping: float = 0.7, likelihood: str = "bernoulli_probit", initial_sites=None,
       offset=None, args=()) -> GaussianApproximation:
    """EP approximation ``q(f | y) = N(mu, (K^-1 + diag(tau_tilde))^-1)`` and its ``log Z_EP``.

    Sweeps from ``tau_tilde = nu_tilde = 0`` (or from ``initial_sites``) until the squared norm of the change in the
    posterior mean ``mu`` over a sweep is below ``tol`` (the paper's criterion, Sec. 4) or
    ``max_sweeps`` sweeps. ``log Z_EP`` (R&W eq. 3.65) is evaluated in the stable form of GPML's
    ``infEP`` (the same expression as GPy's ``EP._ep_marginal``), with the cavities taken from the
    final recomputed ``Sigma``, so it is a function of the sites alone. Site precisions are kept at
    least machine epsilon, as in GPy. Works under ``jit`` and ``vmap``.

    Parameters
    ----------
    K : array_like, shape (n, n)
        Prior covariance of ``f`` (``K`` itself is never factorised).
    y : array_like, shape (n,)
        Labels in {0, 1}.
    tol : float, optional
        Convergence threshold on ``||mu_new - mu_old||^2``; ``n / 1e4`` by default.
    max_sweeps : int
        Sweep limit; reaching it sets ``converged=False`` instead of raising. Static under ``jit``.
    schedule : {"sequential", "parallel"}
        Update the sites one at a time (R&W Alg. 3.5, the paper's EP) or all at once (see the module
        docstring). Static under ``jit``.
    damping : float
        Parallel schedule only: the new site parameters are ``damping * new + (1 - damping) * old``.
    likelihood : str
        A likelihood of :mod:`gpdsl.likelihoods`: ``"bernoulli_probit"`` (``p(y_i = 1 | f_i) = Phi(f_i)``) and
        ``"normal"`` match closed-form tilted moments, every other one moments by adaptive Gauss-Hermite
        quadrature (:mod:`gpdsl.likelihoods.quadrature`). Static under ``jit``.
    initial_sites : tuple of array_like, optional
        ``(tau_tilde, nu_tilde)``, each of shape ``(n,)``, to start from (a warm start, for example the
        sites of a fit at other hyperparameters, see the module docstring); site precisions are
        raised to machine epsilon. The first sweep's change in ``mu`` is measured from the mean these
        sites give under ``K``.
    offset : array_like, shape (n,), optional
        The likelihood acts on ``f + offset``; ``f`` keeps its zero-mean prior and the approximation is of ``f``.
    args : tuple of array_like
        Values of the likelihood's other parameters (``phi``, ``trials``, ...) in positional order
        (:attr:`~gpdsl.likelihoods.base.Likelihood.other_params`): scalars, one per site, or (``own_shape``, the
        cutpoints) one vector for all sites.

    Returns
    -------
    GaussianApproximation
        ``iterations`` counts sweeps; ``cubic_ops`` is ``5 * iterations`` (sequential) or
        ``2 * iterations - 1`` (parallel; ``log_marginal`` costs one more, see the module docstring),
        plus 2 with ``initial_sites`` (3 for the sequential schedule).

    Raises
    ------
    MethodError
        For an unknown schedule, fewer than one sweep, or a likelihood without ``tilted_moments``.
    """
    if schedule not in EP_SCHEDULES:
        raise MethodError(f"unknown EP schedule '{schedule}'; use one of {', '.join(EP_SCHEDULES)}")
    K, y = jnp.asarray(K, dtype=jnp.float64), jnp.asarray(y)
    initial_sites, offset, args = ep_inputs(K.shape[0], likelihood, max_sweeps, initial_sites, offset, args)
    if schedule == "parallel":
        return _ep_parallel(K, y, tol, max_sweeps, damping, likelihood, initial_sites, offset, args)
    return _ep(K, y, tol, max_sweeps, likelihood, initial_sites, offset, args)


ep_for = for_latent_gp(ep, "ep", "``tol``, ``max_sweeps``, ``schedule`` and ``damping``")


@partial(jax.jit, static_argnames=("max_sweeps", "likelihood"))
def _ep(K, y, tol, max_sweeps, likelihood, initial_sites, offset, args):
    n, tol, y, moments = iteration_setup(K, y, tol, likelihood, "ep")
    tilted_moments = shifted_moments(moments, args)
    site_moments = shifted_moments(moments, args, _per_site(likelihood, args, n))

    def update_site(i, state):
        tau, nu, Sigma = state
        column = Sigma[:, i]  # Sigma is symmetric: the column is the row, and mu_i = Sigma[i] @ nu
        cavity_precision = 1.0 / column[i] - tau[i]
        cavity_location = (column @ nu) / column[i] - nu[i]
        _, mean_hat, var_hat = site_moments(y[i], cavity_location / cavity_precision,
                                            1.0 / cavity_precision, offset[i], i)
        tau_i = jnp.maximum(1.0 / var_hat - cavity_precision, SMALLEST_SITE_PRECISION)
        delta_tau = tau_i - tau[i]
        tau, nu = tau.at[i].set(tau_i), nu.at[i].set(mean_hat / var_hat - cavity_location)
        Sigma = Sigma - (delta_tau / (1.0 + delta_tau * column[i])) * jnp.outer(column, column)
        return tau, nu, Sigma

    def sweep(state):
        tau, nu, Sigma, mu_old, _, _, sweeps = state
        tau, nu, _ = lax.fori_loop(0, n, update_site, (tau, nu, Sigma))
        Sigma, mu, L = _recompute(K, tau, nu)
        return tau, nu, Sigma, mu, L, jnp.sum((mu - mu_old) ** 2), sweeps + 1

    def not_done(state):
        return (state[5] >= tol) & (state[6] < max_sweeps)

    zeros = jnp.zeros(n, dtype=K.dtype)
    if initial_sites is None:
        tau, nu, Sigma, mu, start_ops = zeros, zeros, K, zeros, 0
    else:
        (tau, nu), start_ops = initial_sites, 3
        Sigma, mu, _ = _recompute(K, tau, nu)
    start = (tau, nu, Sigma, mu, jnp.eye(n, dtype=K.dtype), jnp.asarray(jnp.inf, K.dtype), jnp.asarray(0))
    tau, nu, Sigma, mu, L, change, sweeps = lax.while_loop(not_done, sweep, start)
    alpha = _alpha(K, tau, nu, L)
    return GaussianApproximation(
        mean=mu, alpha=alpha, site_precision=tau, site_location=nu, chol_b=L,
        log_marginal=_log_marginal(tilted_moments, y, tau, nu, jnp.diag(Sigma), mu, _cholesky_half_log_det(L),
                                   offset),
        converged=change < tol, iterations=sweeps, cubic_ops=CUBIC_OPS_PER_SWEEP * sweeps + start_ops,
        log_marginal_ops=jnp.asarray(0))


@partial(jax.jit, static_argnames=("max_sweeps", "likelihood"))
def _ep_parallel(K, y, tol, max_sweeps, damping, likelihood, initial_sites, offset, args):
    n, tol, y, tilted_moments = iteration_setup(K, y, tol, likelihood, "ep")

    def factor(tau, nu):
        L, alpha = _factor(K, tau, nu)
        return L, alpha, K @ alpha

    return parallel_sweeps(factor, lambda tau, L: _marginal_variances(K, tau, L), jnp.diag(K), y, tol, max_sweeps,
                           damping, shifted_moments(tilted_moments, args), initial_sites, offset)


def parallel_sweeps(factor, marginal_variances, prior_variances, y, tol, max_sweeps, damping, tilted_moments,
                    initial_sites, offset, half_log_det=None) -> GaussianApproximation:
    """Parallel EP (see the module docstring) for any Gaussian prior of the sampled vector read linearly by the sites.

    Parameters
    ----------
    factor : callable
        ``factor(tau, nu) -> (L, alpha, mu)``: the factor whose log determinant is ``log|B|^1/2``, the sampled
        vector's posterior mean (or what the caller maps it from) and the sites' posterior means ``mu``, shape ``(n,)``.
    marginal_variances : callable
        ``marginal_variances(tau, L)``: the sites' posterior variances, shape ``(n,)``.
    prior_variances : jax.Array, shape (n,)
        The sites' prior variances (the marginals at zero sites).
    y, tol, max_sweeps, damping, initial_sites, offset
        As in :func:`ep` (``tol`` resolved, ``y`` in the working dtype).
    tilted_moments : callable
        ``tilted_moments(y, mean, variance, offset)`` (:func:`shifted_moments`).
    half_log_det : callable, optional
        ``half_log_det(L) = log|B|^1/2`` for what ``factor`` returns as ``L``; by default ``L`` is a Cholesky
        factor and this is the sum of the logs of its diagonal.

    Returns
    -------
    GaussianApproximation
        ``mean`` the sites' posterior means ``mu`` (the posterior mean of ``f``), ``alpha`` that of ``factor``.
    """
    n = prior_variances.shape[0]
    dtype = prior_variances.dtype

    def sweep(tau, nu, sigma_diag, mu):
        cavity_precision = 1.0 / sigma_diag - tau
        cavity_location = mu / sigma_diag - nu
        _, mean_hat, var_hat = tilted_moments(y, cavity_location / cavity_precision, 1.0 / cavity_precision, offset)
        tau_new = jnp.maximum(1.0 / var_hat - cavity_precision, SMALLEST_SITE_PRECISION)
        nu_new = mean_hat / var_hat - cavity_location
        tau = jnp.maximum(damping * tau_new + (1.0 - damping) * tau, SMALLEST_SITE_PRECISION)
        nu = damping * nu_new + (1.0 - damping) * nu
        return (tau, nu, *factor(tau, nu))

    def next_sweep(state):
        tau, nu, L, _, mu_old, _, sweeps = state
        tau, nu, L, alpha, mu = sweep(tau, nu, marginal_variances(tau, L), mu_old)
        return tau, nu, L, alpha, mu, jnp.sum((mu - mu_old) ** 2), sweeps + 1

    def not_done(state):
        return (state[5] >= tol) & (state[6] < max_sweeps)

    if initial_sites is None:
        zeros = jnp.zeros(n, dtype=dtype)
        tau, nu, sigma_diag, mu_start, start_ops = zeros, zeros, prior_variances, zeros, 0  # Sigma = K at zero sites
    else:
        (tau, nu), start_ops = initial_sites, 2
        L, _, mu_start = factor(tau, nu)
        sigma_diag = marginal_variances(tau, L)
    tau, nu, L, alpha, mu = sweep(tau, nu, sigma_diag, mu_start)
    start = (tau, nu, L, alpha, mu, jnp.sum((mu - mu_start) ** 2), jnp.asarray(1))
    tau, nu, L, alpha, mu, change, sweeps = lax.while_loop(not_done, next_sweep, start)
    return GaussianApproximation(
        mean=mu, alpha=alpha, site_precision=tau, site_location=nu, chol_b=L,
        log_marginal=_log_marginal(tilted_moments, y, tau, nu, marginal_variances(tau, L), mu,
                                   (_cholesky_half_log_det if half_log_det is None else half_log_det)(L), offset),
        converged=change < tol, iterations=sweeps,
        cubic_ops=CUBIC_OPS_PER_PARALLEL_SWEEP * sweeps - 1 + start_ops, log_marginal_ops=jnp.asarray(1))


def shifted_moments(tilted_moments, args, per_site=None):
    """Tilted moments of ``f`` when the likelihood acts on ``f + offset``: those of ``f + offset``, shifted back,
    with the likelihood's other parameters ``args``; with ``per_site`` (which of them have one value per site),
    of one site ``i``."""

    def moments(y, mean, variance, offset, i=None):
        values = args if per_site is None else tuple(a[i] if site else a for a, site in zip(args, per_site))
        log_z, mean_hat, var_hat = tilted_moments(y, mean + offset, variance, *values)
        return log_z, mean_hat - offset, var_hat

    return moments


def _per_site(likelihood: str, args, n: int) -> tuple[bool, ...]:
    """Which of ``args`` hold one value per site (the others are scalars or vectors shared by every site)."""
    shared = LIKELIHOODS[likelihood].own_shape
    names = LIKELIHOODS[likelihood].other_params
    return tuple(a.ndim == 1 and a.shape[0] == n and name not in shared for a, name in zip(args, names))


def gaussian_from_sites(K, site_precision, site_location) -> GaussianApproximation:
    """The Gaussian that fixed sites give under ``K``: ``N(Sigma nu_tilde, Sigma)``, ``Sigma = (K^-1 + diag(tau_tilde))^-1``.

    No sweep: one factorisation of ``B`` (``cubic_ops`` 1). ``log_marginal`` is not evaluated (NaN),
    ``converged`` is True and ``iterations`` 0. Used as a fixed importance density (for example the
    sites of an EP fit at other hyperparameters).

    Parameters
    ----------
    K : array_like, shape (n, n)
        Prior covariance.
    site_precision, site_location : array_like, shape (n,)
        ``tau_tilde`` (raised to machine epsilon) and ``nu_tilde``.

    Returns
    -------
    GaussianApproximation
    """
    K = jnp.asarray(K, dtype=jnp.float64)
    tau = jnp.maximum(jnp.asarray(site_precision, dtype=K.dtype), SMALLEST_SITE_PRECISION)
    nu = jnp.asarray(site_location, dtype=K.dtype)
    L, alpha = _factor(K, tau, nu)
    return GaussianApproximation(
        mean=K @ alpha, alpha=alpha, site_precision=tau, site_location=nu, chol_b=L,
        log_marginal=jnp.asarray(jnp.nan, K.dtype), converged=jnp.asarray(True), iterations=jnp.asarray(0),
        cubic_ops=jnp.asarray(1), log_marginal_ops=jnp.asarray(0))


def _factor(K, tau, nu):
    """The Cholesky factor ``L`` of ``B`` and ``alpha = K^-1 mu = nu - S^1/2 B^-1 S^1/2 K nu``.

    One ``O(n^3)`` operation (the factorisation); ``mu = K alpha``.
    """
    root_tau = jnp.sqrt(tau)
    L = cholesky(jnp.eye(K.shape[-1], dtype=K.dtype) + root_tau[:, None] * K * root_tau[None, :])
    return L, _alpha(K, tau, nu, L)


def _alpha(K, tau, nu, L):
    """``alpha = (I + K S)^-1 nu = nu - S^1/2 B^-1 S^1/2 K nu`` given the factor ``L`` of ``B`` (``O(n^2)``)."""
    root_tau = jnp.sqrt(tau)
    return nu - root_tau * cho_solve((L, True), root_tau * (K @ nu))


def _marginal_variances(K, tau, L):
    """``diag(Sigma) = diag(K - V^T V)`` with ``V = L^-1 S^1/2 K`` (one ``O(n^3)`` operation)."""
    V = solve_triangular(L, jnp.sqrt(tau)[:, None] * K, lower=True)
    return jnp.diag(K) - jnp.sum(V**2, axis=0)


def _recompute(K, tau, nu):
    root_tau = jnp.sqrt(tau)
    L = cholesky(jnp.eye(K.shape[-1], dtype=K.dtype) + root_tau[:, None] * K * root_tau[None, :])
    V = solve_triangular(L, root_tau[:, None] * K, lower=True)
    Sigma = K - V.T @ V
    return Sigma, Sigma @ nu, L


def _cholesky_half_log_det(L):
    """``log|B|^1/2`` from the Cholesky factor ``L`` of ``B``."""
    return jnp.sum(jnp.log(jnp.diag(L)))


def _log_marginal(tilted_moments, y, tau, nu, sigma_diag, mu, half_log_det, offset):
    cavity_precision = 1.0 / sigma_diag - tau
    cavity_location = mu / sigma_diag - nu
    log_z, _, _ = tilted_moments(y, cavity_location / cavity_precision, 1.0 / cavity_precision, offset)
    total_precision = cavity_precision + tau
    return (jnp.sum(log_z) - half_log_det + 0.5 * nu @ mu
            + 0.5 * cavity_location @ ((tau / cavity_precision * cavity_location - 2.0 * nu) / total_precision)
            - 0.5 * jnp.sum(nu**2 / total_precision) + 0.5 * jnp.sum(jnp.log1p(tau / cavity_precision)))
