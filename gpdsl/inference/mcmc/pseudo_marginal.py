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
from gpdsl.inference.approximations.ep import ep
from gpdsl.inference.approximations.gaussian import check_likelihood, sample
from gpdsl.inference.approximations.laplace import laplace
from gpdsl.inference.families.latent_gp import LatentGP
from gpdsl.inference.mcmc.adaptation import (
    RunningMoments,
    ScaleAdaptation,
    moments_init,
    moments_update,
    sample_covariance,
    scale_init,
    scale_update,
)
from gpdsl.inference.mcmc.ess import ess_step
from gpdsl.inference.mcmc.mh import MHState, accept_reject, random_walk
from gpdsl.linalg import cholesky

APPROXIMATIONS = ("laplace", "ep")
COVARIANCE_START = 100  # warmup iteration from which draws enter the proposal covariance
COVARIANCE_MIN_DRAWS = 100  # draws needed before the proposal follows the covariance
COVARIANCE_REGULARISATION = 1e-6  # added to the diagonal of the estimated covariance


class PMState(NamedTuple):
    """State of a pseudo-marginal chain.

    Attributes
    ----------
    mh : MHState
        ``theta`` (unconstrained) and the log target as the terms ``(log_marginal, log_prior)``: the
        current estimate of ``log p(y | theta)``, kept until a proposal is accepted, and ``log p(theta)``.
    scale : ScaleAdaptation
        Log of the random-walk scale and the number of adaptation steps (adapted during warmup).
    moments : RunningMoments
        Running mean and scatter of the warmup draws used for ``proposal_chol``.
    proposal_chol : jax.Array, shape (p, p)
        Shape of the random walk: the proposal is ``theta + exp(log_scale) * proposal_chol @ z``.
    f : jax.Array, shape (n,)
        Latent values (updated only when latent sampling is on).
    loglik_f : jax.Array, shape ()
        ``log p(y | f, theta)`` at the current ``f``.
    """

    mh: MHState
    scale: ScaleAdaptation
    moments: RunningMoments
    proposal_chol: jax.Array
    f: jax.Array
    loglik_f: jax.Array

    @property
    def theta(self) -> jax.Array:
        """Hyperparameters on the unconstrained scale."""
        return self.mh.position

    @property
    def log_marginal(self) -> jax.Array:
        """The current estimate of ``log p(y | theta)``."""
        return self.mh.log_density[0]

    @property
    def log_scale(self) -> jax.Array:
        """Log of the random-walk scale."""
        return self.scale.log_scale


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
        Acceptance rate the proposal scale is adapted towards during warmup (Robbins-Monro on the log
        scale with gain ``(t + 2) ** -0.6`` at adaptation step ``t``).
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
        ``init(rng_key, theta) -> PMState``; the key draws the first likelihood estimate.
    step : callable
        ``step(rng_key, state, adapting=False) -> (PMState, PMInfo)``; ``adapting`` tunes the proposal
        (warmup).
    """
    if approximation not in APPROXIMATIONS:
        raise MethodError(f"unknown approximation '{approximation}'; use one of {', '.join(APPROXIMATIONS)}")
    check_likelihood(approximation, problem.likelihood)
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
    loglik = lambda theta: (lambda f: problem.log_likelihood(f, theta))

    def init(rng_key, theta) -> PMState:
        theta = jnp.asarray(theta, dtype=float)
        log_marginal, _, _ = estimate(rng_key, theta)
        f = jnp.zeros(problem.n)
        return PMState(MHState(theta, (log_marginal, problem.log_prior(theta))), scale_init(start_scale),
                       moments_init(p), start_chol, f, loglik(theta)(f))

    def adapt_shape(state: PMState, theta, scale: ScaleAdaptation, adapting):
        """The warmup covariance and, once enough draws are in, the proposal shape (Haario et al. 2001)."""
        collect = adapting & (state.scale.count >= COVARIANCE_START) & adapt_covariance
        moments = moments_update(state.moments, theta, collect)
        use = collect & (moments.count >= COVARIANCE_MIN_DRAWS)
        chol = jnp.where(use, cholesky(sample_covariance(moments, COVARIANCE_REGULARISATION)), state.proposal_chol)
        reset = use & (moments.count == COVARIANCE_MIN_DRAWS)
        scale = scale._replace(log_scale=jnp.where(reset, jnp.log(2.38 / jnp.sqrt(p)), scale.log_scale))
        return chol, moments, scale

    def step(rng_key, state: PMState, adapting=False):
        adapting = jnp.logical_and(adapting, adaptive)
        key_move, key_estimate, key_accept, key_latent = jax.random.split(rng_key, 4)
        proposal = random_walk(state.theta, jax.random.normal(key_move, (p,)), jnp.exp(state.log_scale),
                               state.proposal_chol)
        log_marginal, converged, ops = estimate(key_estimate, proposal)
        mh, mh_info = accept_reject(jnp.log(jax.random.uniform(key_accept)), state.mh,
                                    MHState(proposal, (log_marginal, problem.log_prior(proposal))))
        scale = scale_update(state.scale, mh_info.acceptance_rate, target_acceptance, adapting, t0=2.0)
        chol, moments, scale = adapt_shape(state, mh.position, scale, adapting)
        new = PMState(mh, scale, moments, chol, state.f, state.loglik_f)
        shrinks = jnp.zeros((), jnp.int32)
        if sample_latent:
            theta = mh.position
            current_chol = cholesky(problem.covariance(theta))
            like = loglik(theta)
            loglik_f = like(state.f)
            f, loglik_f, ess_info = ess_step(key_latent, state.f, loglik_f, current_chol, like)
            new = new._replace(f=f, loglik_f=loglik_f)
            shrinks = ess_info.num_shrinks
            ops = ops + 1
        info = PMInfo(mh_info.accepted, mh_info.acceptance_rate, log_marginal, converged, ops, shrinks)
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
