"""The unbiased importance-sampling estimate of a GPLVM's marginal likelihood (Gadd, Wade & Shah 2021, eq. 4).

For the supervised GPLVM ``Z ~ gp(X, k_z); F ~ gp(Z, k_f); Y ~ normal(F, s)`` (and any GPLVM of
:mod:`gpdsl.inference.families.gplvm`, the Bayesian GPLVM's ``N(0, I)`` prior included)::

    p_hat(Y | X, xi) = 1/S sum_s p(Y | Z_s, xi) p(Z_s | X, xi) / q(Z_s | xi),   Z_s ~ q(Z | xi),

with ``q`` the variational posterior the E-step finds at ``xi`` alone
(:func:`~gpdsl.inference.variational.e_step.make_e_step`, from a start that does not depend on the
chain), each latent dimension a full Gaussian ``N(mu_j, S_j)``; ``p(Y | Z)`` the exact collapsed
likelihood (one ``N x N`` Cholesky factorisation per draw, ``prod_d N(y_d | 0, K_f(Z) + s^2 I)``); all in
the log domain. Its expectation over the draws is ``p(Y | X, xi)`` whatever ``q`` is, so the chain that
keeps it (:mod:`gpdsl.inference.mcmc.blocked_metropolis`) is exact; how close ``q`` is to ``p(Z | Y, xi)``
sets only the estimate's variance (Doucet et al. 2015 recommend ``Var[log p_hat]`` below about 2).
"""

from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import logsumexp, ndtr

from gpdsl.errors import MethodError
from gpdsl.inference.families.gplvm import GPLVMProblem
from gpdsl.inference.mcmc.ess import standard_normal_ess_step
from gpdsl.numerics.linalg import cholesky, logdet_chol, solve_triangular
from gpdsl.numerics import GP_JITTER
from gpdsl.numerics.devices import run_platform

LOG_2PI = math.log(2.0 * math.pi)
LIKELIHOOD_BATCH = 250  # draws whose N x N factorisations are done together (larger batches leave the CPU's caches)
GPU_BATCH_ENTRIES = 2**27  # on a GPU, as many draws together as fit in this many N x N entries (1 GiB of float64)


class Estimate(NamedTuple):
    """One estimate of ``log p(Y | X, xi)`` and what it came from.

    Attributes
    ----------
    log_marginal : jax.Array
        ``log p_hat(Y | X, xi)``.
    surrogate : jax.Array
        The deterministic approximation of ``log p(Y | X, xi)`` the proposal came with: the E-step's lower bound
        (no hyperprior), or the Laplace approximation (:mod:`gpdsl.inference.mcmc.gplvm_laplace`).
    iterations : jax.Array
        Iterations the E-step, or the Laplace mode search, used.
    effective_draws : jax.Array
        Kish's effective sample size of the importance weights, ``(sum w)^2 / sum w^2``.
    q : tuple, optional
        ``(latent, inducing)`` of the E-step's optimum (kept by the warm-started, approximate chain).
    noise : ImportanceNoise, optional
        The variates of the draws (kept by the correlated chain, and by a chain that refreshes them).
    fitted : optional
        The proposal at ``xi`` the draws came from (kept by a chain that refreshes the variates,
        :func:`make_noise_refresh`).
    """

    log_marginal: jax.Array
    surrogate: jax.Array
    iterations: jax.Array
    effective_draws: jax.Array
    q: Any = None
    noise: Any = None
    fitted: Any = None


def require_observed(problem: GPLVMProblem, purpose: str) -> None:
    """Raise a MethodError naming ``purpose`` unless every output is observed (the collapsed likelihood needs it)."""
    if not problem.observed.all():
        raise MethodError(f"{purpose} needs every entry of '{problem.output}' observed; "
                          f"{int((~problem.observed).sum())} are missing (NaN)")


def output_covariance(problem: GPLVMProblem, theta, Z) -> jax.Array:
    """``C = K_f(Z) + (s^2 + jitter) I``, the covariance of each output column once ``F`` is integrated out."""
    return problem.kernel(theta).gram(Z) + (problem.noise_variance(theta) + GP_JITTER) * jnp.eye(Z.shape[0])


def collapsed_log_likelihood(problem: GPLVMProblem, theta, Z) -> jax.Array:
    """``log p(Y | Z, xi) = sum_d log N(y_d | 0, K_f(Z) + s^2 I)``, the GP over ``Z`` integrated out exactly.

    Parameters
    ----------
    problem : GPLVMProblem
        The model view (outputs fully observed).
    theta : jax.Array, shape (P,)
        Unconstrained hyperparameters.
    Z : jax.Array, shape (N, Q)
        Latent inputs.

    Returns
    -------
    jax.Array
    """
    Y = jnp.asarray(problem.Y)
    N, D = Y.shape
    L = cholesky(output_covariance(problem, theta, Z))
    alpha = solve_triangular(L, Y, lower=True)
    return -0.5 * jnp.sum(alpha * alpha) - 0.5 * D * logdet_chol(L) - 0.5 * N * D * LOG_2PI


class ImportanceNoise(NamedTuple):
    """The standard normal variates behind one estimate's draws (moved together by a correlated chain).

    Attributes
    ----------
    normals : jax.Array, shape (S, Q, N)
        Whitened draws: of ``q``, or of the prior for a draw that comes from it (the defensive component).
    flips : jax.Array, shape (S, Q)
        The sign of each latent dimension of each draw is the sign of these.
    picks : jax.Array, shape (S,)
        A draw comes from the prior when ``Phi(pick) < defensive``.
    """

    normals: jax.Array
    flips: jax.Array
    picks: jax.Array


def draw_noise(rng_key, num_draws: int, latent_dim: int, num_points: int) -> ImportanceNoise:
    """Fresh :class:`ImportanceNoise` for ``num_draws`` draws."""
    keys = jax.random.split(rng_key, 3)
    shape = (num_draws, latent_dim, num_points)
    return ImportanceNoise(jax.random.normal(keys[0], shape), jax.random.normal(keys[1], shape[:2]),
                           jax.random.normal(keys[2], shape[:1]))


def correlated_noise(noise: ImportanceNoise, rng_key, correlation: float) -> ImportanceNoise:
    """The Crank-Nicolson move ``rho u + sqrt(1 - rho^2) e`` of every variate, which leaves ``N(0, I)`` invariant."""
    fresh = draw_noise(rng_key, *noise.normals.shape)
    return jax.tree.map(lambda u, e: correlation * u + math.sqrt(1.0 - correlation**2) * e, noise, fresh)


def importance_log_weights(problem: GPLVMProblem, theta, mean, covariance, noise: ImportanceNoise, *,
                           symmetrise: bool = True, defensive: float = 0.0) -> jax.Array:
    """``log p(Y | Z_s) + log p(Z_s | X) - log r(Z_s)`` at the draws ``Z_s`` of the proposal ``r`` made from ``noise``.

    ``r`` is ``q = prod_j N(mean_j, S_j)``; with ``symmetrise``, ``q`` symmetrised through zero in each latent
    dimension, ``prod_j [q_j(z_j) + q_j(-z_j)] / 2`` (a draw of ``q`` with each dimension flipped with probability
    1/2); with ``defensive = a > 0``, the mixture ``(1 - a) r + a p(Z | X)`` (Hesterberg 1995), whose weights are
    bounded by ``p(Y | Z) / a``.

    Parameters
    ----------
    problem : GPLVMProblem
    theta : jax.Array, shape (P,)
    mean : jax.Array, shape (N, Q)
        Means of ``q(Z)``.
    covariance : jax.Array, shape (Q, N, N)
        Covariance of each latent dimension under ``q(Z)``.
    noise : ImportanceNoise
        The variates of the ``S`` draws (:func:`draw_noise`).
    symmetrise : bool
    defensive : float
        Weight of the prior in the mixture, in ``[0, 1)``.

    Returns
    -------
    jax.Array, shape (S,)
    """
    N, Q = mean.shape
    latent_q = problem.latent_q()
    L_q = jax.vmap(cholesky)(covariance + GP_JITTER * jnp.eye(N))
    L_p = cholesky(latent_q.dense_prior_covariance(theta, N))
    Z = mean.T[None] + jnp.einsum("qij,sqj->sqi", L_q, noise.normals)  # (S, Q, N)
    if symmetrise:
        Z = jnp.where(noise.flips >= 0.0, 1.0, -1.0)[:, :, None] * Z
    if defensive > 0.0:
        from_prior = ndtr(noise.picks) < defensive
        Z = jnp.where(from_prior[:, None, None], jnp.einsum("ij,sqj->sqi", L_p, noise.normals), Z)

    def gaussian(L, points):  # log N(points | 0, L L^T) of (S, N) points, one solve for all
        whitened = solve_triangular(L, points.T, lower=True)
        return -0.5 * jnp.sum(whitened**2, axis=0) - 0.5 * logdet_chol(L) - 0.5 * N * LOG_2PI

    per_dimension = jax.vmap(gaussian, in_axes=(0, 1), out_axes=1)  # over latent dimensions: (S, Q)
    centred = Z - mean.T[None]
    log_q = per_dimension(L_q, centred)
    if symmetrise:
        log_q = jnp.logaddexp(log_q, per_dimension(L_q, -Z - mean.T[None])) - math.log(2.0)
    log_q = jnp.sum(log_q, axis=1)
    log_prior = jnp.sum(jax.vmap(gaussian, in_axes=(None, 1), out_axes=1)(L_p, Z), axis=1)
    log_q = mixture_with_prior(log_q, log_prior, defensive)
    return collapsed_log_likelihoods(problem, theta, Z) + log_prior - log_q


def mixture_with_prior(log_proposal, log_prior, defensive: float):
    """``log((1 - a) r + a p)`` of the defensive mixture (``log_proposal`` itself when ``a = 0``)."""
    if defensive <= 0.0:
        return log_proposal
    return jnp.logaddexp(math.log1p(-defensive) + log_proposal, math.log(defensive) + log_prior)


def collapsed_log_likelihoods(problem: GPLVMProblem, theta, Z) -> jax.Array:
    """:func:`collapsed_log_likelihood` of ``S`` draws ``Z`` of shape (S, Q, N), a batch of factorisations at a time
    (:data:`LIKELIHOOD_BATCH` on a CPU; on a GPU as many as :data:`GPU_BATCH_ENTRIES` allows, all of them at
    moderate ``N``)."""
    num_draws, num_points = Z.shape[0], Z.shape[-1]
    batch = LIKELIHOOD_BATCH if run_platform() == "cpu" else max(1, GPU_BATCH_ENTRIES // num_points**2)
    return jax.lax.map(lambda z: collapsed_log_likelihood(problem, theta, z.T), Z, batch_size=min(num_draws, batch))


def log_mean_weight(log_weights, num_draws: int) -> tuple[jax.Array, jax.Array]:
    """``log(1/S sum w)`` and Kish's effective sample size ``(sum w)^2 / sum w^2``; NaN weights count as 0."""
    log_weights = jnp.where(jnp.isnan(log_weights), -jnp.inf, log_weights)
    log_marginal = logsumexp(log_weights) - math.log(num_draws)
    return log_marginal, jnp.exp(2.0 * logsumexp(log_weights) - logsumexp(2.0 * log_weights))


class ImportanceProposal(NamedTuple):
    """Where the importance draws at ``xi`` come from, and how they are weighted.

    Attributes
    ----------
    fit : callable
        ``(theta, start=None) -> fitted``: the proposal at ``theta``, deterministic in ``theta`` (the estimate is
        unbiased only if it does not depend on the chain's state; ``start`` is the approximate chain's warm start).
    log_weights : callable
        ``(theta, fitted, noise) -> (S,)``: the log importance weights of the draws made from ``noise``.
    surrogate : callable
        ``fitted -> jax.Array``: the deterministic approximation of ``log p(Y | X, xi)`` that came with it.
    iterations : callable
        ``fitted -> jax.Array``: the iterations it took.
    keep : callable
        ``fitted -> (latent, inducing)``: what a warm-started chain keeps (the variational proposal only).
    """

    fit: Callable
    log_weights: Callable
    surrogate: Callable
    iterations: Callable
    keep: Callable | None = None


def variational_proposal(problem: GPLVMProblem, e_step, *, symmetrise: bool = True,
                         defensive: float = 0.0) -> ImportanceProposal:
    """The paper's proposal: ``q(Z)`` of the E-step at ``xi`` (:func:`importance_log_weights`).

    Parameters
    ----------
    problem : GPLVMProblem
    e_step : callable
        ``theta -> EStepResult`` (:func:`~gpdsl.inference.variational.e_step.make_e_step`), deterministic
        in ``theta``; ``e_step(theta, start)`` from a given start.
    symmetrise : bool
        Draw from ``q`` symmetrised through zero in each latent dimension (:func:`importance_log_weights`).
        The likelihood and a zero-mean GP prior are unchanged when a latent dimension changes sign (for
        stationary, linear and dot-product ``k_f``), so ``p(Z | Y)`` has a mirror image of every mode, which
        ``q`` misses: the plain estimate then recovers only part of ``p(Y | X, xi)`` in practice (its heavy
        upper tail is never reached), a part that changes with ``xi`` as the modes move apart. Unbiased either way.
    defensive : float
        Weight of the prior ``p(Z | X)`` mixed into the proposal: bounds the weights (a variational ``q`` is
        narrower than the posterior, which gives the plain weights a heavy upper tail).
    """
    latent_q = problem.latent_q()

    def fit(theta, start=None):
        return e_step(theta) if start is None else e_step(theta, start)

    def log_weights(theta, fitted, noise):
        mean = latent_q.moments(fitted.latent, theta).mean
        covariance = latent_q.covariance(fitted.latent, theta)
        return importance_log_weights(problem, theta, mean, covariance, noise, symmetrise=symmetrise,
                                      defensive=defensive)

    return ImportanceProposal(fit, log_weights, lambda fitted: fitted.bound, lambda fitted: fitted.iterations,
                              lambda fitted: (fitted.latent, fitted.inducing))


def make_estimate(problem: GPLVMProblem, proposal: ImportanceProposal, num_importance: int, *,
                  keep_q: bool = False, keep_fitted: bool = False):
    """``(rng_key, theta, start=None, noise=None, fitted=None) -> Estimate``: the proposal at ``theta`` (or
    ``fitted``, when the caller made it), then eq. (4) with ``num_importance`` draws (made from ``noise`` when
    given, else from ``rng_key``).

    Parameters
    ----------
    problem : GPLVMProblem
        The model view; its outputs must be fully observed.
    proposal : ImportanceProposal
        :func:`variational_proposal`, or the Laplace proposal
        (:func:`~gpdsl.inference.mcmc.gplvm_laplace.laplace_proposal`).
    num_importance : int
        Importance draws ``S`` (the paper's ``Q = 1000``).
    keep_q : bool
        Return what the proposal keeps in :attr:`Estimate.q`. A ``start`` given to the estimate is passed to the
        proposal's fit: the warm start of the approximate chain.
    keep_fitted : bool
        Return the proposal at ``xi`` in :attr:`Estimate.fitted` (for :func:`make_noise_refresh`).

    Returns
    -------
    callable
        Traceable and vmap-able.

    Raises
    ------
    MethodError
        Missing outputs, a non-positive ``num_importance``, or ``keep_q`` with a proposal that keeps nothing.
    """
    require_observed(problem, "the pseudo-marginal estimate")
    if int(num_importance) < 1:
        raise MethodError(f"num_importance must be a positive integer; got {num_importance}")
    if keep_q and proposal.keep is None:
        raise MethodError("a warm start needs the variational proposal")

    def estimate(rng_key, theta, start=None, noise=None, fitted=None) -> Estimate:
        if fitted is None:
            fitted = proposal.fit(theta, start)
        kept = noise
        if noise is None:
            noise = draw_noise(rng_key, num_importance, problem.latent_dim, problem.num_points)
        log_marginal, effective = log_mean_weight(proposal.log_weights(theta, fitted, noise), num_importance)
        return Estimate(log_marginal, proposal.surrogate(fitted), proposal.iterations(fitted), effective,
                        proposal.keep(fitted) if keep_q else None, kept, fitted if keep_fitted else None)

    return estimate


def make_noise_refresh(proposal: ImportanceProposal, num_importance: int, steps: int):
    """``(rng_key, theta, estimate) -> Estimate``: ``steps`` elliptical slice updates of the variates of
    the current estimate at fixed ``xi`` (:func:`~gpdsl.inference.mcmc.ess.standard_normal_ess_step`).

    The pseudo-marginal chain is exact on ``(xi, u)`` with target ``p(xi) p_hat(Y | xi, u) N(u; 0, I)``; a chain
    that accepted a lucky estimate (one draw far in the upper tail of the weights) keeps it until a proposal
    matches it, and a correlated chain's proposals inherit most of its variates. Moving ``u`` alone under that
    target, with ``xi`` and so the proposal fixed, costs only the draws' weights (the proposal at ``xi`` is kept
    in :attr:`Estimate.fitted`), leaves the chain exact, and lets the estimate fall back into the bulk of its
    distribution (Murray & Graham 2016, pseudo-marginal slice sampling).

    Parameters
    ----------
    proposal : ImportanceProposal
    num_importance : int
        Draws per estimate.
    steps : int
        Slice updates per call.

    Returns
    -------
    callable
        The estimate returned carries the new variates and ``log p_hat``; its ``effective_draws`` is NaN (not
        recomputed).
    """

    def refresh(rng_key, theta, estimate: Estimate):
        def log_marginal(noise):
            return log_mean_weight(proposal.log_weights(theta, estimate.fitted, noise), num_importance)[0]

        def one(carry, key):
            noise, value, _ = standard_normal_ess_step(key, *carry, log_marginal)
            return (noise, value), None

        (noise, value), _ = jax.lax.scan(one, (estimate.noise, estimate.log_marginal),
                                         jax.random.split(rng_key, steps))
        return estimate._replace(log_marginal=value, noise=noise,
                                 effective_draws=jnp.full_like(estimate.effective_draws, jnp.nan))

    return refresh
