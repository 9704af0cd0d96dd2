"""Pseudo-marginal Metropolis-Hastings for GP hyperparameters (Filippone & Girolami 2014, Alg. 1).

The marginal likelihood ``p(y | theta)`` is replaced by the unbiased importance-sampling estimate

    p_hat(y | theta) = 1/N_imp sum_i p(y | f_i) N(f_i | 0, K) / q(f_i),   f_i ~ q(f | y, theta),   (eq. 25)

with ``q`` the Laplace or EP Gaussian, computed in the log domain. The chain's state keeps the current
estimate and never re-estimates it (that is what makes the chain exact). The random-walk proposal on
the unconstrained ``theta`` has a scale adapted during warmup towards a target acceptance (about 25%)
and frozen afterwards. Optionally the latent ``f`` is updated by elliptical slice sampling given
``theta`` after each step, for predictions (eq. 20).
"""

from __future__ import annotations

from typing import NamedTuple

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
from jax.scipy.linalg import solve_triangular  # noqa: E402
from jax.scipy.special import logsumexp  # noqa: E402

from gpdsl.errors import MethodError  # noqa: E402
from gpdsl.inference.ep import check_ep_likelihood, ep  # noqa: E402
from gpdsl.inference.ess import ess_step  # noqa: E402
from gpdsl.inference.gaussian_approx import log_density, sample  # noqa: E402
from gpdsl.inference.laplace import check_laplace_likelihood, laplace  # noqa: E402
from gpdsl.inference.latent_gp import LatentGP  # noqa: E402

APPROXIMATIONS = ("laplace", "ep")


class PMState(NamedTuple):
    """State of a pseudo-marginal chain.

    Attributes
    ----------
    theta : jax.Array, shape (p,)
        Hyperparameters on the unconstrained scale.
    log_marginal : jax.Array, shape ()
        The current estimate of ``log p(y | theta)`` (kept until a proposal is accepted).
    log_prior : jax.Array, shape ()
        ``log p(theta)`` on the unconstrained scale.
    log_scale : jax.Array, shape ()
        Log of the random-walk scale (adapted during warmup).
    adapt_step : jax.Array, shape ()
        Number of adaptation steps so far.
    f : jax.Array, shape (n,)
        Latent values (updated only when latent sampling is on).
    loglik_f : jax.Array, shape ()
        ``log p(y | f, theta)`` at the current ``f``.
    """

    theta: jax.Array
    log_marginal: jax.Array
    log_prior: jax.Array
    log_scale: jax.Array
    adapt_step: jax.Array
    f: jax.Array
    loglik_f: jax.Array


class PMInfo(NamedTuple):
    """Diagnostics of one pseudo-marginal step."""

    accepted: jax.Array
    acceptance_rate: jax.Array
    proposed_log_marginal: jax.Array
    approximation_converged: jax.Array
    cubic_ops: jax.Array
    num_shrinks: jax.Array


def _approximate(problem: LatentGP, approximation: str, tol, max_iter):
    y = jnp.asarray(problem.y)
    if approximation == "ep":
        return lambda K: ep(K, y, tol=tol, max_sweeps=max_iter)
    return lambda K: laplace(K, y, likelihood=problem.likelihood, tol=tol, max_iter=max_iter)


def make_importance_estimator(problem: LatentGP, approximation: str = "ep", num_importance: int = 1,
                              tol=None, max_iter: int = 100, use_approximate_marginal: bool = False):
    """The log of the importance-sampling estimate of ``p(y | theta)`` (eq. 25).

    With ``use_approximate_marginal`` the approximation's own (deterministic, biased) log marginal is
    returned instead: MH on it is the paper's MCMC-EP / MCMC-LA comparison method.

    Returns
    -------
    callable
        ``estimate(key, theta) -> (log_p_hat, chol_K, converged, cubic_ops)``.
    """
    approximate = _approximate(problem, approximation, tol, max_iter)

    def estimate(key, theta):
        K = problem.covariance(theta)
        chol_k = jnp.linalg.cholesky(K)
        approx = approximate(K)
        if use_approximate_marginal:
            return approx.log_marginal, chol_k, approx.converged, approx.cubic_ops + 1
        draws = sample(approx, K, key, num_importance, chol_k=chol_k)
        log_q = log_density(approx, K, draws, chol_k=chol_k)
        whitened = solve_triangular(chol_k, draws.T, lower=True)
        log_prior_f = (-0.5 * jnp.sum(whitened ** 2, axis=0) - jnp.sum(jnp.log(jnp.diag(chol_k)))
                       - 0.5 * K.shape[0] * jnp.log(2 * jnp.pi))
        log_lik = jax.vmap(lambda f: problem.log_likelihood(f, theta))(draws)
        log_weights = log_lik + log_prior_f - log_q
        log_p_hat = logsumexp(log_weights) - jnp.log(num_importance)
        log_p_hat = jnp.where(jnp.isfinite(log_p_hat), log_p_hat, -jnp.inf)
        return log_p_hat, chol_k, approx.converged, approx.cubic_ops + 1

    return estimate


def make_pseudo_marginal(problem: LatentGP, approximation: str = "ep", num_importance: int = 1,
                         target_acceptance: float = 0.25, initial_scale: float | None = None,
                         proposal_scales=None, sample_latent: bool = False, tol=None, max_iter: int = 100,
                         use_approximate_marginal: bool = False):
    """Build the pseudo-marginal MH engine for a latent GP model.

    Parameters
    ----------
    problem : LatentGP
        The model's latent-GP view.
    approximation : {"ep", "laplace"}
        The Gaussian approximation used as importance distribution.
    num_importance : int
        ``N_imp``, importance samples per estimate.
    target_acceptance : float
        Acceptance rate the proposal scale is adapted towards during warmup.
    initial_scale : float, optional
        Initial random-walk scale; default ``2.38 / sqrt(p)`` times 0.5.
    proposal_scales : array_like, optional
        Per-coordinate relative scales of the random walk (default all ones).
    sample_latent : bool
        After each step, update ``f`` by one elliptical slice sampling step given ``theta``.
    tol, max_iter
        Convergence settings of the approximation (default tolerance ``n / 1e4``).
    use_approximate_marginal : bool
        Use the approximation's log marginal instead of the unbiased estimate (MCMC-EP; not exact).

    Returns
    -------
    init : callable
        ``init(key, theta) -> PMState``.
    step : callable
        ``step(key, state, adapting) -> (PMState, PMInfo)``.
    """
    if approximation not in APPROXIMATIONS:
        raise MethodError(f"unknown approximation '{approximation}'; use one of {', '.join(APPROXIMATIONS)}")
    (check_ep_likelihood if approximation == "ep" else check_laplace_likelihood)(problem.likelihood)
    if num_importance < 1:
        raise MethodError(f"the number of importance samples must be at least 1, got {num_importance}")
    estimate = make_importance_estimator(problem, approximation, num_importance, tol, max_iter,
                                         use_approximate_marginal)
    p = problem.theta_dim
    scales = jnp.ones(p) if proposal_scales is None else jnp.asarray(proposal_scales, dtype=float)
    start_scale = 0.5 * 2.38 / jnp.sqrt(p) if initial_scale is None else initial_scale
    loglik = lambda theta: (lambda f: problem.log_likelihood(f, theta))  # noqa: E731

    def init(key, theta):
        theta = jnp.asarray(theta, dtype=float)
        log_marginal, _, _, _ = estimate(key, theta)
        f = jnp.zeros(problem.n)
        return PMState(theta, log_marginal, problem.log_prior(theta), jnp.log(jnp.asarray(start_scale, float)),
                       jnp.zeros((), jnp.int32), f, loglik(theta)(f))

    def step(key, state: PMState, adapting):
        key_move, key_estimate, key_accept, key_latent = jax.random.split(key, 4)
        proposal = state.theta + jnp.exp(state.log_scale) * scales * jax.random.normal(key_move, (p,))
        log_marginal, chol_k, converged, ops = estimate(key_estimate, proposal)
        log_prior = problem.log_prior(proposal)
        log_ratio = log_marginal + log_prior - state.log_marginal - state.log_prior
        log_ratio = jnp.where(jnp.isnan(log_ratio), -jnp.inf, log_ratio)
        accept_prob = jnp.exp(jnp.minimum(0.0, log_ratio))
        accepted = jnp.log(jax.random.uniform(key_accept)) < log_ratio
        pick = lambda new, old: jnp.where(accepted, new, old)  # noqa: E731
        theta = pick(proposal, state.theta)
        adapt_step = state.adapt_step + jnp.where(adapting, 1, 0)
        rate = (adapt_step.astype(float) + 1.0) ** -0.6
        log_scale = jnp.where(adapting, state.log_scale + rate * (accept_prob - target_acceptance), state.log_scale)
        new = PMState(theta, pick(log_marginal, state.log_marginal), pick(log_prior, state.log_prior),
                      log_scale, adapt_step, state.f, state.loglik_f)
        shrinks = jnp.zeros((), jnp.int32)
        if sample_latent:
            current_chol = jnp.linalg.cholesky(problem.covariance(theta))
            like = loglik(theta)
            loglik_f = like(state.f)
            f, loglik_f, ess_info = ess_step(key_latent, state.f, loglik_f, current_chol, like)
            new = new._replace(f=f, loglik_f=loglik_f)
            shrinks = ess_info.num_shrinks
            ops = ops + 1
        info = PMInfo(accepted, accept_prob, log_marginal, converged, ops, shrinks)
        return new, info

    return init, step
