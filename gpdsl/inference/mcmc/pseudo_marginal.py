"""Pseudo-marginal Metropolis-Hastings for GP hyperparameters (Filippone & Girolami 2014, Alg. 1).

The marginal likelihood ``p(y | theta)`` is replaced by the unbiased importance-sampling estimate

    p_hat(y | theta) = 1/N_imp sum_i p(y | f_i) N(f_i | 0, K) / q(f_i),   f_i ~ q(f | y, theta),   (eq. 25)

with ``q`` the Laplace or EP Gaussian, computed in the log domain. The chain's state keeps the current
estimate and never re-estimates it (that is what makes the chain exact). The random-walk proposal on
the unconstrained ``theta`` has a scale adapted during warmup towards a target acceptance (about 25%)
and, by default, a shape (Cholesky factor of the covariance) estimated from the warmup draws; both are
frozen afterwards, so the sampling phase is a plain MH chain. A covariance adapted in one run can be
given to another (``proposal_covariance``), which then adapts nothing. Optionally the latent ``f`` is updated
by elliptical slice sampling given ``theta`` after each step, for predictions (eq. 20).

Cost of one estimate (``O(n^3)`` operations): the approximation (Laplace: one factorisation per
Newton iteration; EP: two per parallel sweep but one for the last, see :mod:`gpdsl.inference.approximations.ep`)
and one Cholesky factorisation of ``K`` to draw from ``q``. The importance weights need no further
``O(n^3)`` or triangular-solve work: with ``q = N(m, (K^-1 + S)^-1)``, ``alpha = K^-1 m`` and
``B = I + S^1/2 K S^1/2``,

    log N(f | 0, K) - log q(f) = -alpha^T f + alpha^T m / 2 + (f - m)^T S (f - m) / 2 - log|B| / 2,

an exact identity (``f^T K^-1 f - (f - m)^T K^-1 (f - m) = 2 alpha^T f - alpha^T m``), so each
importance sample costs ``O(n^2)`` (drawing it) plus ``O(n)``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp

from gpdsl.errors import MethodError
from gpdsl.inference.approximations.ep import check_ep_likelihood, ep
from gpdsl.inference.approximations.gaussian import sample
from gpdsl.inference.approximations.laplace import check_laplace_likelihood, laplace
from gpdsl.inference.families.latent_gp import LatentGP
from gpdsl.inference.mcmc.ess import ess_step
from gpdsl.linalg import cholesky

APPROXIMATIONS = ("laplace", "ep")
COVARIANCE_START = 100  # warmup iteration from which draws enter the proposal covariance
COVARIANCE_MIN_DRAWS = 100  # draws needed before the proposal follows the covariance
COVARIANCE_REGULARISATION = 1e-6  # added to the diagonal of the estimated covariance


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
    proposal_chol : jax.Array, shape (p, p)
        Shape of the random walk: the proposal is ``theta + exp(log_scale) * proposal_chol @ z``.
    theta_mean, theta_scatter : jax.Array, shapes (p,) and (p, p)
        Running mean and sum of squared deviations of the warmup draws used for ``proposal_chol``.
    theta_count : jax.Array, shape ()
        Number of warmup draws in ``theta_mean`` and ``theta_scatter``.
    """

    theta: jax.Array
    log_marginal: jax.Array
    log_prior: jax.Array
    log_scale: jax.Array
    adapt_step: jax.Array
    f: jax.Array
    loglik_f: jax.Array
    proposal_chol: jax.Array
    theta_mean: jax.Array
    theta_scatter: jax.Array
    theta_count: jax.Array


class PMInfo(NamedTuple):
    """Diagnostics of one pseudo-marginal step."""

    accepted: jax.Array
    acceptance_rate: jax.Array
    proposed_log_marginal: jax.Array
    approximation_converged: jax.Array
    cubic_ops: jax.Array
    num_shrinks: jax.Array


def _approximate(problem: LatentGP, approximation: str, tol, max_iter, ep_schedule: str = "parallel"):
    y = jnp.asarray(problem.y)
    if approximation == "ep":
        return lambda K: ep(K, y, tol=tol, max_sweeps=max_iter, schedule=ep_schedule)
    return lambda K: laplace(K, y, likelihood=problem.likelihood, tol=tol, max_iter=max_iter)


def make_importance_estimator(problem: LatentGP, approximation: str = "ep", num_importance: int = 1,
                              tol=None, max_iter: int = 100, use_approximate_marginal: bool = False,
                              ep_schedule: str = "parallel"):
    """The log of the importance-sampling estimate of ``p(y | theta)`` (eq. 25).

    With ``use_approximate_marginal`` the approximation's own (deterministic, biased) log marginal is
    returned instead: MH on it is the paper's MCMC-EP / MCMC-LA comparison method.

    The approximation always starts from zero sites (a cold start), so ``q`` is a deterministic
    function of ``theta`` and the estimate is unbiased for any convergence tolerance.

    Parameters
    ----------
    problem : LatentGP
        The model's latent-GP view.
    approximation : {"ep", "laplace"}
        The importance distribution.
    num_importance : int
        ``N_imp``.
    tol, max_iter
        Convergence settings of the approximation.
    use_approximate_marginal : bool
        Return the approximation's log marginal instead (no sampling, no factorisation of ``K``).
    ep_schedule : {"parallel", "sequential"}
        EP's site schedule (see :func:`~gpdsl.inference.approximations.ep.ep`); parallel is several times cheaper.

    Returns
    -------
    callable
        ``estimate(key, theta) -> (log_p_hat, converged, cubic_ops)``.
    """
    approximate = _approximate(problem, approximation, tol, max_iter, ep_schedule)

    def estimate(key, theta):
        K = problem.covariance(theta)
        approx = approximate(K)
        if use_approximate_marginal:
            return approx.log_marginal, approx.converged, approx.cubic_ops + approx.log_marginal_ops
        draws = sample(approx, K, key, num_importance)  # one Cholesky factorisation of K
        deviations = draws - approx.mean
        log_prior_minus_log_q = (-draws @ approx.alpha + 0.5 * approx.alpha @ approx.mean
                                 + 0.5 * jnp.sum(approx.site_precision * deviations ** 2, axis=-1)
                                 - jnp.sum(jnp.log(jnp.diag(approx.chol_b))))
        log_lik = jax.vmap(lambda f: problem.log_likelihood(f, theta))(draws)
        log_p_hat = logsumexp(log_lik + log_prior_minus_log_q) - jnp.log(num_importance)
        log_p_hat = jnp.where(jnp.isfinite(log_p_hat), log_p_hat, -jnp.inf)
        return log_p_hat, approx.converged, approx.cubic_ops + 1

    return estimate


def make_pseudo_marginal(problem: LatentGP, approximation: str = "ep", num_importance: int = 1,
                         target_acceptance: float = 0.25, initial_scale: float | None = None,
                         proposal_scales=None, sample_latent: bool = False, tol=None, max_iter: int = 100,
                         use_approximate_marginal: bool = False, adapt_covariance: bool = True,
                         ep_schedule: str = "parallel", proposal_covariance=None):
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
    adapt_covariance : bool
        During warmup, also estimate the covariance of ``theta`` from the chain's draws (from warmup
        iteration ``COVARIANCE_START`` on) and, once ``COVARIANCE_MIN_DRAWS`` draws are in, propose
        along its Cholesky factor (adaptive Metropolis, Haario et al. 2001), resetting the scale to
        ``2.38 / sqrt(p)`` at the switch. Frozen with the scale after warmup.
    ep_schedule : {"parallel", "sequential"}
        EP's site schedule (see :func:`~gpdsl.inference.approximations.ep.ep`).
    proposal_covariance : array_like, shape (p, p), optional
        A fixed random-walk covariance on the unconstrained ``theta`` (for example one adapted in an
        earlier run, :func:`proposal_covariance_of`). Nothing is adapted then: warmup only burns in.
        This is how Filippone & Girolami compare importance densities: one proposal for all, so that
        a noisier estimator shows as a lower acceptance rate.

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
                                         use_approximate_marginal, ep_schedule)
    p = problem.theta_dim
    scales = jnp.ones(p) if proposal_scales is None else jnp.asarray(proposal_scales, dtype=float)
    start_scale = 0.5 * 2.38 / jnp.sqrt(p) if initial_scale is None else initial_scale
    start_chol = jnp.diag(scales)
    adaptive = proposal_covariance is None
    if not adaptive:
        start_chol, start_scale = jnp.asarray(_proposal_factor(proposal_covariance, p)), 1.0
    loglik = lambda theta: (lambda f: problem.log_likelihood(f, theta))  # noqa: E731

    def init(key, theta):
        theta = jnp.asarray(theta, dtype=float)
        log_marginal, _, _ = estimate(key, theta)
        f = jnp.zeros(problem.n)
        return PMState(theta, log_marginal, problem.log_prior(theta), jnp.log(jnp.asarray(start_scale, float)),
                       jnp.zeros((), jnp.int32), f, loglik(theta)(f), start_chol, jnp.zeros(p),
                       jnp.zeros((p, p)), jnp.zeros((), jnp.int32))

    def adapt_shape(state: PMState, theta, log_scale, adapting):
        """Welford update of the warmup covariance and, once enough draws are in, the proposal shape."""
        collect = adapting & (state.adapt_step >= COVARIANCE_START) & adapt_covariance
        count = state.theta_count + jnp.where(collect, 1, 0)
        delta = theta - state.theta_mean
        mean = jnp.where(collect, state.theta_mean + delta / jnp.maximum(count, 1), state.theta_mean)
        scatter = jnp.where(collect, state.theta_scatter + jnp.outer(delta, theta - mean), state.theta_scatter)
        use = collect & (count >= COVARIANCE_MIN_DRAWS)
        covariance = scatter / jnp.maximum(count - 1, 1) + COVARIANCE_REGULARISATION * jnp.eye(p)
        chol = jnp.where(use, cholesky(covariance), state.proposal_chol)
        log_scale = jnp.where(use & (count == COVARIANCE_MIN_DRAWS), jnp.log(2.38 / jnp.sqrt(p)), log_scale)
        return chol, mean, scatter, count, log_scale

    def step(key, state: PMState, adapting):
        adapting = jnp.logical_and(adapting, adaptive)
        key_move, key_estimate, key_accept, key_latent = jax.random.split(key, 4)
        proposal = state.theta + jnp.exp(state.log_scale) * state.proposal_chol @ jax.random.normal(key_move, (p,))
        log_marginal, converged, ops = estimate(key_estimate, proposal)
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
        chol, mean, scatter, count, log_scale = adapt_shape(state, theta, log_scale, adapting)
        new = PMState(theta, pick(log_marginal, state.log_marginal), pick(log_prior, state.log_prior),
                      log_scale, adapt_step, state.f, state.loglik_f, chol, mean, scatter, count)
        shrinks = jnp.zeros((), jnp.int32)
        if sample_latent:
            current_chol = cholesky(problem.covariance(theta))
            like = loglik(theta)
            loglik_f = like(state.f)
            f, loglik_f, ess_info = ess_step(key_latent, state.f, loglik_f, current_chol, like)
            new = new._replace(f=f, loglik_f=loglik_f)
            shrinks = ess_info.num_shrinks
            ops = ops + 1
        info = PMInfo(accepted, accept_prob, log_marginal, converged, ops, shrinks)
        return new, info

    return init, step


def proposal_covariance_of(states: PMState) -> np.ndarray:
    """The random-walk covariance ``exp(2 log_scale) C C^T`` of each chain's state, shape ``(chains, p, p)``."""
    chol = np.asarray(states.proposal_chol)
    scale = np.exp(2.0 * np.asarray(states.log_scale))
    return scale[..., None, None] * chol @ np.swapaxes(chol, -1, -2)


def _proposal_factor(covariance, p: int) -> np.ndarray:
    """The Cholesky factor of a user's proposal covariance, with a clear error if it is not one."""
    covariance = np.asarray(covariance, dtype=float)
    if covariance.shape != (p, p) or not np.all(np.isfinite(covariance)):
        raise MethodError(f"the proposal covariance must be a finite {p} x {p} matrix (one row per unconstrained "
                          f"hyperparameter), got shape {covariance.shape}")
    try:
        return np.linalg.cholesky(0.5 * (covariance + covariance.T))
    except np.linalg.LinAlgError:
        raise MethodError("the proposal covariance is not positive definite; pass a covariance adapted by an "
                          "earlier run (its engine_report) or a positive diagonal") from None
