"""Pseudo-marginal Metropolis-Hastings for GP hyperparameters (Filippone & Girolami 2014, Alg. 1).

The marginal likelihood ``p(y | theta)`` is replaced by the unbiased importance-sampling estimate

    p_hat(y | theta) = 1/N_imp sum_i w_i,   w_i = p(y | f_i) N(f_i | 0, K) / q(f_i),   f_i ~ q(f | y, theta),   (eq. 25)

with ``q`` the Laplace or EP Gaussian, computed in the log domain. The chain's state keeps the current
estimate and never re-estimates it (that is what makes the chain exact). The random-walk proposal on
the unconstrained ``theta`` has a scale adapted during warmup towards a target acceptance (about 25%)
and, by default, a shape (Cholesky factor of the covariance) estimated from the warmup draws; both are
frozen afterwards, so the sampling phase is a plain MH chain. A covariance adapted in one run can be
given to another (``proposal_covariance``), which then adapts nothing.

**Exact draws of f.** Every estimate also selects one of its importance draws, ``f_k`` with
probability ``w_k / sum_i w_i``, and the state keeps ``(theta, p_hat, f_k)``: a proposal's three are
accepted or rejected together. This is the standard pseudo-marginal construction (Andrieu & Roberts
2009; Andrieu, Doucet & Holenstein 2010, particle marginal MH): the chain is an MH chain on ``(theta,
u, k)``, ``u`` the estimate's random numbers, with invariant density proportional to
``p(theta) q(u) w_k(theta, u) / N_imp``, whose marginal in ``(theta, f_k)`` is ``p(theta) p(y | f)
N(f | 0, K)``, the joint posterior. So the state's ``(theta, f_k)`` is an exact posterior draw, and
``theta`` alone is the same chain as without the selection.

With ``sample_latent`` each iteration also records a *refreshed* copy of ``f``: ``refresh_steps``
elliptical slice steps under ``p(f | theta, y)`` from the state's selected ``f``, reusing the Cholesky
factor of ``K(theta)`` kept with the estimate (``O(n^2)`` per step). The copy is only recorded, never fed
back: every iteration starts again from the state's selected ``f``. A kernel that leaves ``p(f | theta,
y)`` invariant, applied to an exact draw of ``(theta, f)``, gives an exact draw, so every recorded
``(theta, f)`` is exact, and the refresh decorrelates the recorded ``f`` over the ~75% of iterations
that reject. Feeding the refreshed ``f`` back into the state would change the joint law of the state's
``(theta, u, k)`` (the selected ``f`` is tied to the estimate whose value decides the next acceptance)
and break that argument; moving ``f`` alone after ``theta`` moved ignoring it (what an earlier version
did) leaves ``f`` distributed under the old ``theta``.

With ``use_approximate_marginal`` (MCMC-EP) there are no importance draws: the recorded ``f`` starts
from one draw of the Gaussian approximation ``q(f | y, theta)`` made with the accepted estimate, then
gets the same refresh. Like ``theta`` there, ``f`` is approximate: a draw of ``q`` moved
``refresh_steps`` slice steps towards ``p(f | theta, y)``.

**Warm-started and frozen EP.** EP's sites are computed at *reference* hyperparameters: during warmup
each proposal's EP starts from the sites of the last accepted proposal whose EP converged (the initial
state's at first); at the end of warmup these reference sites are frozen. With ``ep_start="frozen"``
(the default for EP) each sampling-phase proposal uses them as they are, with no sweep: ``q =
N(Sigma nu_ref, Sigma)``, ``Sigma = (K(theta')^-1 + diag(tau_ref))^-1``, one factorisation of ``B``.
With ``ep_start="reference"`` each proposal's EP starts from them and sweeps to convergence. Either way
the sites are a constant of the sampling phase, not a function of the chain's current state, so ``q``
is a deterministic function of the proposed ``theta`` alone and the estimate is unbiased for ``p(y |
theta)`` whatever EP's tolerance: the chain stays exact (only its efficiency depends on how good ``q``
is). On the Filippone & Girolami n = 200 data the frozen sites give as good an importance density over
the posterior as a fresh EP fit (standard deviation of ``log p_hat`` with ``N_imp = 64`` about 0.008 both),
with 2 ``O(n^3)`` operations per proposal instead of 8 (4.2 warm-started: 1.1 sweeps on average, against
4.0 from zero sites); min ESS per second, measured side by side: frozen 2.1x and warm-started 1.5x
that of zero sites. ``ep_start="zero"`` restarts from zero sites at every proposal (the paper's
setting). Warm-starting from the *current* state's sites would make ``q`` of a proposal depend on the
current state, which the pseudo-marginal argument does not allow. The Laplace approximation of an HSGP's weights
starts its Newton steps from a reference mode kept the same way (moved in warmup, then fixed), so ``q`` stays a
function of ``theta'`` alone and fewer steps reach the mode.

Cost of one estimate (``O(n^3)`` operations): the approximation (Laplace: one factorisation per
Newton iteration; EP: two per parallel sweep but one for the last, plus two for a warm start, see
:mod:`gpdsl.inference.approximations.ep`) and one Cholesky factorisation of ``K`` to draw from ``q``.
The importance weights need no further ``O(n^3)`` or triangular-solve work: with
``q = N(m, (K^-1 + S)^-1)``, ``alpha = K^-1 m`` and ``B = I + S^1/2 K S^1/2``,

    log N(f | 0, K) - log q(f) = -alpha^T f + alpha^T m / 2 + (f - m)^T S (f - m) / 2 - log|B| / 2,

an exact identity (``f^T K^-1 f - (f - m)^T K^-1 (f - m) = 2 alpha^T f - alpha^T m``), so each
importance sample costs ``O(n^2)`` (drawing it) plus ``O(n)``.

**A latent state-space GP** is sampled through its innovations and its importance density is the Laplace
approximation or EP of ``f`` by Kalman smoothing, ``O(N)`` per estimate (:mod:`gpdsl.inference.mcmc.state_space_pm`).

**A sampled vector read through a linear map.** A Hilbert-space approximate GP samples its basis weights
``z ~ N(0, I_M)`` and the likelihood reads ``f = A z + offset`` (:meth:`LatentGP.likelihood_map`). The estimate is the
same with ``z`` for ``f``: ``q(z)`` is the Laplace approximation or (parallel) EP of the weights
(:mod:`gpdsl.inference.approximations.weight_space`, ``O(N M^2)`` per Newton step or sweep, never an ``N x N``
matrix), the draws come from the ``M x M`` factor of ``q``'s precision and ``log N(z | 0, I) - log q(z)`` is computed
from it; EP's sites, warm starts and frozen sites live on ``f`` as for the exact GP.

**A latent GP on a grid.** With a separable kernel over a full grid of inputs the sampled vector is the whitened ``v``
of ``f = (L_1 ⊗ ... ⊗ L_D) v`` (:mod:`gpdsl.inference.families.latent_grid`) and ``q(v) = N(v_hat, (I + A^T W_sep
A)^-1)``: the Laplace mode (Newton by conjugate gradients with Kronecker matvecs) with the curvature ``W`` replaced by
a separable summary ``w_1 ⊗ ... ⊗ w_D``, whose precision has per-axis eigendecompositions
(:mod:`gpdsl.inference.approximations.kronecker_laplace`). Any ``q`` with an exact density gives an unbiased estimate,
so this one does too; it costs ``O(sum n_d^3 + N sum n_d)`` per draw and no ``N x N`` matrix. Laplace only.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp

from gpdsl.errors import MethodError
from gpdsl.inference.approximations.ep import ep, gaussian_from_sites
from gpdsl.inference.approximations.gaussian import sample
from gpdsl.likelihoods.approximation_needs import check_likelihood
from gpdsl.inference.approximations.laplace import laplace
from gpdsl.inference.approximations import kronecker_laplace, weight_space
from gpdsl.inference.approximations.weight_space import ep_weights, laplace_weights, weights_from_sites
from gpdsl.inference.families.latent_gp import LatentGP
from gpdsl.inference.families.latent_grid import GridLatent
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
from gpdsl.inference.mcmc.estimates import Estimate, LatentSelection
from gpdsl.inference.mcmc.mh import MHState, accept_reject, random_walk
from gpdsl.numerics.linalg import cholesky

APPROXIMATIONS = ("laplace", "ep")
EP_STARTS = ("reference", "frozen", "zero")
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
    selection : LatentSelection
        The ``f`` the current estimate selected (accepted and rejected with it).
    reference_sites : jax.Array, shape (2, n)
        EP's warm-start sites (see the module docstring), frozen after warmup.
    f : jax.Array, shape (n,)
        The recorded latent values: the selected ``f`` after the refresh (without it when latent
        sampling is off; zeros for MCMC-EP then).
    loglik_f : jax.Array, shape ()
        ``log p(y | f, theta)`` at the recorded ``f``.
    """

    mh: MHState
    scale: ScaleAdaptation
    moments: RunningMoments
    proposal_chol: jax.Array
    selection: LatentSelection
    reference_sites: jax.Array
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
    """Diagnostics of one pseudo-marginal step (``approximation_iterations``: Newton iterations or EP sweeps)."""

    accepted: jax.Array
    acceptance_rate: jax.Array
    proposed_log_marginal: jax.Array
    approximation_converged: jax.Array
    approximation_iterations: jax.Array
    cubic_ops: jax.Array
    num_shrinks: jax.Array


def _approximate(problem: LatentGP, approximation: str, tol, max_iter, ep_schedule: str = "parallel"):
    y = jnp.asarray(problem.y)
    if approximation == "ep" and problem.mapped:
        return lambda K, sites, theta: ep_weights(problem.likelihood_operator(theta), y, tol=tol,
                                                  max_sweeps=max_iter,
                                                  initial_sites=None if sites is None else (sites[0], sites[1]),
                                                  offset=problem.location_offset(theta),
                                                  likelihood=problem.likelihood,
                                                  args=problem.likelihood_arguments(theta))
    if approximation == "ep":
        return lambda K, sites, theta: ep(K, y, tol=tol, max_sweeps=max_iter, schedule=ep_schedule,
                                          initial_sites=None if sites is None else (sites[0], sites[1]),
                                          offset=problem.location_offset(theta), likelihood=problem.likelihood,
                                          args=problem.likelihood_arguments(theta))
    if problem.mapped:
        return lambda K, sites, theta: laplace_weights(problem.likelihood_operator(theta), y,
                                                       likelihood=problem.likelihood,
                                                       tol=tol, max_iter=max_iter,
                                                       args=problem.likelihood_arguments(theta),
                                                       offset=problem.location_offset(theta),
                                                       start=None if sites is None else sites[0])
    return lambda K, sites, theta: laplace(K, y, likelihood=problem.likelihood, tol=tol, max_iter=max_iter,
                                           args=problem.likelihood_arguments(theta),
                                           offset=problem.location_offset(theta))


def _sites_of(approx, approximation: str, mapped: bool, n: int) -> jax.Array:
    """What a warm start keeps of an approximation, shape ``(2, .)``: EP's sites; the Laplace mode of a mapped vector
    (row 0, where the weights' Newton steps start); else zeros."""
    if approximation == "ep":
        return jnp.stack([approx.site_precision, approx.site_location])
    if mapped:
        return jnp.stack([approx.mean, jnp.zeros_like(approx.mean)])
    return jnp.zeros((2, n))


def _draws_and_weights(problem: LatentGP, approx, K, chol_k, theta, key, num: int):
    """``num`` draws of the sampled vector from ``q`` and their ``log N(. | 0, K) - log q(.)``: over ``f`` by
    Matheron's rule and the identity of the module docstring, or, for a vector read through a linear map
    (:meth:`~gpdsl.inference.families.latent_gp.LatentGP.likelihood_map`, an HSGP's weights), from ``q``'s factor
    (:mod:`~gpdsl.inference.approximations.weight_space`)."""
    if problem.mapped:
        draws = weight_space.sample(approx, key, num)
        return draws, weight_space.log_prior_minus_log_q(approx, draws)
    draws = sample(approx, K, key, num, chol_k=chol_k)
    deviations = draws - approx.mean
    return draws, (-draws @ approx.alpha + 0.5 * approx.alpha @ approx.mean
                   + 0.5 * jnp.sum(approx.site_precision * deviations ** 2, axis=-1)
                   - jnp.sum(jnp.log(jnp.diag(approx.chol_b))))


def make_latent_estimator(problem: LatentGP, approximation: str = "ep", num_importance: int = 1,
                          tol=None, max_iter: int = 100, use_approximate_marginal: bool = False,
                          ep_schedule: str = "parallel", select_latent: bool = True):
    """The importance-sampling estimate of ``log p(y | theta)`` (eq. 25) with a selected draw of ``f``.

    Parameters
    ----------
    problem, approximation, num_importance, tol, max_iter, use_approximate_marginal, ep_schedule
        As in :func:`make_importance_estimator`.
    select_latent : bool
        Keep the Cholesky factor of ``K`` with the selection (for the refresh) and, for MCMC-EP, draw
        the one ``f`` from ``q`` (one more factorisation). Without it the selection's ``chol_k`` is
        empty and MCMC-EP's ``f`` is zero.

    Returns
    -------
    callable
        ``estimate(key, theta, start_sites=None, frozen=False) -> Estimate``: the importance draw ``f_k``
        is selected with probability proportional to its weight (see the module docstring);
        ``start_sites``, shape ``(2, n)``, warm-starts EP (ignored by Laplace); where ``frozen`` (a
        boolean, traced or not) is true, ``q`` is the Gaussian those sites give under ``K`` with no
        sweep (:func:`~gpdsl.inference.approximations.ep.gaussian_from_sites`; not with
        ``use_approximate_marginal``).
    """
    from gpdsl.inference.families.state_space_latent import StateSpaceLatent

    if isinstance(problem, StateSpaceLatent):  # its importance density by Kalman smoothing, O(N)
        from gpdsl.inference.mcmc.state_space_pm import state_space_estimator

        return state_space_estimator(problem, approximation, num_importance, tol, max_iter, use_approximate_marginal,
                                     select_latent)

    if problem.columns > 1:
        return _multiclass_estimator(problem, num_importance, tol, max_iter, select_latent)
    if isinstance(problem, GridLatent):
        if approximation != "laplace" or use_approximate_marginal:
            raise MethodError("a latent GP on a grid has the Kronecker Laplace importance density alone",
                              problem.node.statement.span, "use --method pm --approximation laplace")
        return _grid_estimator(problem, num_importance, tol, max_iter)
    approximate = _approximate(problem, approximation, tol, max_iter, ep_schedule)
    n = problem.n

    def fit(K, start_sites, frozen, theta):
        if start_sites is None or approximation != "ep" or frozen is False:
            return approximate(K, start_sites, theta)

        def sweeps():
            return approximate(K, start_sites, theta)._replace(log_marginal=jnp.asarray(jnp.nan, K.dtype))

        def as_they_are():
            frozen_q = weights_from_sites(problem.likelihood_operator(theta), start_sites[0], start_sites[1]) \
                if problem.mapped else gaussian_from_sites(K, start_sites[0], start_sites[1])
            return jax.tree.map(lambda value, like: jnp.asarray(value, like.dtype), frozen_q,
                                jax.eval_shape(sweeps))

        return jax.lax.cond(frozen, as_they_are, sweeps)

    def estimate(key, theta, start_sites=None, frozen=False) -> Estimate:
        key_draws, key_select = jax.random.split(key)
        K = problem.covariance(theta)
        approx = fit(K, start_sites, frozen, theta)
        sites = _sites_of(approx, approximation, problem.mapped, n)
        like = lambda f: problem.log_likelihood(f, theta)  # noqa: E731
        if use_approximate_marginal:
            if not select_latent:
                selection = LatentSelection(jnp.zeros(n), like(jnp.zeros(n)), jnp.zeros((0, 0)))
                return Estimate(approx.log_marginal, selection, sites, approx.converged, approx.iterations,
                                approx.cubic_ops + approx.log_marginal_ops)
            chol_k = cholesky(K)
            f = _draws_and_weights(problem, approx, K, chol_k, theta, key_draws, 1)[0][0]
            return Estimate(approx.log_marginal, LatentSelection(f, like(f), chol_k), sites, approx.converged,
                            approx.iterations, approx.cubic_ops + approx.log_marginal_ops + 1)
        chol_k = cholesky(K)
        draws, log_prior_minus_log_q = _draws_and_weights(problem, approx, K, chol_k, theta, key_draws, num_importance)
        log_lik = jax.vmap(like)(draws)
        log_weights = log_lik + log_prior_minus_log_q
        log_p_hat = logsumexp(log_weights) - jnp.log(num_importance)
        log_p_hat = jnp.where(jnp.isfinite(log_p_hat), log_p_hat, -jnp.inf)
        chosen = jax.random.categorical(key_select, jnp.where(jnp.isnan(log_weights), -jnp.inf, log_weights))
        selection = LatentSelection(draws[chosen], log_lik[chosen], chol_k if select_latent else jnp.zeros((0, 0)))
        return Estimate(log_p_hat, selection, sites, approx.converged, approx.iterations, approx.cubic_ops + 1)

    return estimate


def _grid_estimator(problem: GridLatent, num_importance: int, tol, max_iter: int):
    """:func:`make_latent_estimator` for a latent GP on a grid (:mod:`~gpdsl.inference.families.latent_grid`): the
    sampled vector is the whitened ``v`` and ``q(v)`` the Kronecker Laplace density
    (:mod:`~gpdsl.inference.approximations.kronecker_laplace`), exact with a closed-form density, so the estimate is
    unbiased; no ``N x N`` matrix is formed (the selection keeps the identity's diagonal as ``v``'s prior factor)."""

    def estimate(key, theta, start_sites=None, frozen=False) -> Estimate:
        key_draws, key_select = jax.random.split(key)
        y, offset, args = problem.grid_likelihood_inputs(theta)
        approx = kronecker_laplace.grid_laplace(problem.roots(theta), y, problem.likelihood, tol=tol,
                                                max_iter=max_iter, args=args, offset=offset)
        draws, log_prior_minus_log_q = kronecker_laplace.sample(approx, key_draws, num_importance)
        log_lik = jax.vmap(lambda v: problem.log_likelihood(v, theta))(draws)
        log_weights = log_lik + log_prior_minus_log_q
        log_p_hat = logsumexp(log_weights) - jnp.log(num_importance)
        log_p_hat = jnp.where(jnp.isfinite(log_p_hat), log_p_hat, -jnp.inf)
        chosen = jax.random.categorical(key_select, jnp.where(jnp.isnan(log_weights), -jnp.inf, log_weights))
        selection = LatentSelection(draws[chosen], log_lik[chosen], problem.prior_factor(theta))
        return Estimate(log_p_hat, selection, jnp.zeros((2, problem.n)), approx.converged, approx.iterations,
                        jnp.zeros((), jnp.int32))

    return estimate


def _multiclass_estimator(problem: LatentGP, num_importance: int, tol, max_iter: int, select_latent: bool):
    """:func:`make_latent_estimator` for a likelihood on rows of ``problem.columns`` latent values
    (``categorical_logit``), with the multiclass Laplace approximation as importance density
    (:mod:`~gpdsl.inference.approximations.multiclass_laplace`): the same estimate and selection, with ``q``'s
    covariance factorised for the draws (one more ``O(n^3)`` operation)."""
    from gpdsl.inference.approximations import multiclass_laplace as multiclass

    y = jnp.asarray(problem.y)

    def estimate(key, theta, start_sites=None, frozen=False) -> Estimate:
        key_draws, key_select = jax.random.split(key)
        K = problem.covariance(theta)
        approx = multiclass.multiclass_laplace(K, y, problem.columns, tol=tol, max_iter=max_iter,
                                               offset=problem.location_offset(theta))
        draws = multiclass.sample(approx, K, key_draws, num_importance)
        log_lik = jax.vmap(lambda f: problem.log_likelihood(f, theta))(draws)
        log_weights = log_lik + multiclass.log_prior_minus_log_q(approx, draws)
        log_p_hat = logsumexp(log_weights) - jnp.log(num_importance)
        log_p_hat = jnp.where(jnp.isfinite(log_p_hat), log_p_hat, -jnp.inf)
        chosen = jax.random.categorical(key_select, jnp.where(jnp.isnan(log_weights), -jnp.inf, log_weights))
        chol_k = cholesky(K) if select_latent else jnp.zeros((0, 0))
        selection = LatentSelection(draws[chosen], log_lik[chosen], chol_k)
        return Estimate(log_p_hat, selection, jnp.zeros((2, problem.n)), approx.converged, approx.iterations,
                        approx.cubic_ops + 1 + int(select_latent))

    return estimate


def make_importance_estimator(problem: LatentGP, approximation: str = "ep", num_importance: int = 1,
                              tol=None, max_iter: int = 100, use_approximate_marginal: bool = False,
                              ep_schedule: str = "parallel"):
    """The log of the importance-sampling estimate of ``p(y | theta)`` (eq. 25).

    With ``use_approximate_marginal`` the approximation's own (deterministic, biased) log marginal is
    returned instead: MH on it is the paper's MCMC-EP / MCMC-LA comparison method.

    Without ``start_sites`` the approximation starts from zero sites (a cold start); with fixed
    ``start_sites`` (EP) it starts from them. Either way ``q`` is a deterministic function of ``theta``
    and the estimate is unbiased for any convergence tolerance.

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
        ``estimate(key, theta, start_sites=None, frozen=False) -> (log_p_hat, converged, cubic_ops)``;
        ``start_sites``, shape ``(2, n)``: EP's site precisions and locations to start from (or, where
        ``frozen``, to use as they are; see :func:`make_latent_estimator`).
    """
    latent_estimate = make_latent_estimator(problem, approximation, num_importance, tol, max_iter,
                                            use_approximate_marginal, ep_schedule, select_latent=False)

    def estimate(key, theta, start_sites=None, frozen=False):
        result = latent_estimate(key, theta, start_sites, frozen)
        return result.log_marginal, result.converged, result.cubic_ops

    return estimate


def make_pseudo_marginal(problem: LatentGP, approximation: str = "ep", num_importance: int = 1,
                         target_acceptance: float = 0.25, initial_scale: float | None = None,
                         proposal_scales=None, sample_latent: bool = False, tol=None, max_iter: int = 100,
                         use_approximate_marginal: bool = False, adapt_covariance: bool = True,
                         ep_schedule: str = "parallel", proposal_covariance=None, ep_start: str = "frozen",
                         refresh_steps: int = 1):
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
        Record ``f`` too: the draw the state's estimate selected, refreshed by ``refresh_steps``
        elliptical slice steps given ``theta`` (exact draws of ``(theta, f)``; see the module docstring).
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
    ep_start : {"frozen", "reference", "zero"}
        EP in the sampling phase (see the module docstring): the reference sites frozen at the end of
        warmup used as they are (no sweep), EP started from them, or EP started from zero sites (the
        paper's setting). All three are exact. During warmup ``"frozen"`` runs as ``"reference"``.
        Laplace on a mapped vector (an HSGP's weights) starts its Newton steps from the reference mode unless
        ``"zero"``; other Laplace approximations ignore it. With ``use_approximate_marginal``, which needs EP's
        ``log Z_EP``, ``"frozen"`` means ``"reference"``.
    refresh_steps : int
        Elliptical slice steps of the recorded ``f`` per iteration (``sample_latent``); 0 records the
        selected draw itself.

    Returns
    -------
    init : callable
        ``init(rng_key, theta) -> PMState``; the key draws the first likelihood estimate, from zero sites.
    step : callable
        ``step(rng_key, state, adapting=False) -> (PMState, PMInfo)``; ``adapting`` (warmup) tunes the
        proposal and moves EP's reference sites.
    """
    if approximation not in APPROXIMATIONS:
        raise MethodError(f"unknown approximation '{approximation}'; use one of {', '.join(APPROXIMATIONS)}")
    check_likelihood(approximation, problem.likelihood)
    if num_importance < 1:
        raise MethodError(f"the number of importance samples must be at least 1, got {num_importance}")
    if ep_start not in EP_STARTS:
        raise MethodError(f"unknown EP start '{ep_start}'; use one of {', '.join(EP_STARTS)}")
    if ep_start == "frozen" and use_approximate_marginal:
        ep_start = "reference"  # MCMC-EP needs log Z_EP, hence an EP fit
    if refresh_steps < 0:
        raise MethodError(f"the number of refresh steps must be at least 0, got {refresh_steps}")
    estimate = make_latent_estimator(problem, approximation, num_importance, tol, max_iter,
                                     use_approximate_marginal, ep_schedule, select_latent=sample_latent)
    warm_start = ep_start in ("reference", "frozen") and (approximation == "ep" or problem.mapped)
    p = problem.theta_dim
    scales = jnp.ones(p) if proposal_scales is None else jnp.asarray(proposal_scales, dtype=float)
    start_scale = 0.5 * 2.38 / jnp.sqrt(p) if initial_scale is None else initial_scale
    start_chol = jnp.diag(scales)
    adaptive = proposal_covariance is None
    if not adaptive:
        start_chol, start_scale = jnp.asarray(_proposal_factor(proposal_covariance, p)), 1.0
    loglik = lambda theta: (lambda f: problem.log_likelihood(f, theta))  # noqa: E731

    def record(key, theta, selection: LatentSelection):
        """The recorded ``f``: the selected one after ``refresh_steps`` slice steps (not fed back)."""
        f, value, shrinks = selection.f, selection.loglik, jnp.zeros((), jnp.int32)
        if not sample_latent or refresh_steps == 0:
            return f, value, shrinks
        like = loglik(theta)
        for step_key in jax.random.split(key, refresh_steps):
            f, value, info = ess_step(step_key, f, value, selection.chol_k, like)
            shrinks = shrinks + info.num_shrinks
        return f, value, shrinks

    def init(rng_key, theta) -> PMState:
        theta = jnp.asarray(theta, dtype=float)
        key_estimate, key_record = jax.random.split(rng_key)
        first = estimate(key_estimate, theta)
        f, loglik_f, _ = record(key_record, theta, first.selection)
        return PMState(MHState(theta, (first.log_marginal, problem.log_prior(theta))), scale_init(start_scale),
                       moments_init(p), start_chol, first.selection, first.sites, f, loglik_f)

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
        warmup = jnp.asarray(adapting)
        adapting = jnp.logical_and(adapting, adaptive)
        key_move, key_estimate, key_accept, key_latent = jax.random.split(rng_key, 4)
        proposal = random_walk(state.theta, jax.random.normal(key_move, (p,)), jnp.exp(state.log_scale),
                               state.proposal_chol)
        proposed = estimate(key_estimate, proposal, state.reference_sites if warm_start else None,
                            jnp.logical_not(warmup) if ep_start == "frozen" else False)
        mh, mh_info = accept_reject(jnp.log(jax.random.uniform(key_accept)), state.mh,
                                    MHState(proposal, (proposed.log_marginal, problem.log_prior(proposal))))
        accepted = mh_info.accepted
        selection = jax.tree.map(lambda new, old: jnp.where(accepted, new, old), proposed.selection, state.selection)
        move_reference = warmup & accepted & proposed.converged
        reference = jnp.where(move_reference, proposed.sites, state.reference_sites)
        scale = scale_update(state.scale, mh_info.acceptance_rate, target_acceptance, adapting, t0=2.0)
        chol, moments, scale = adapt_shape(state, mh.position, scale, adapting)
        f, loglik_f, shrinks = record(key_latent, mh.position, selection)
        new = PMState(mh, scale, moments, chol, selection, reference, f, loglik_f)
        info = PMInfo(accepted, mh_info.acceptance_rate, proposed.log_marginal, proposed.converged,
                      proposed.iterations, proposed.cubic_ops, shrinks)
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
