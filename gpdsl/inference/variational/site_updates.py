"""Natural-gradient updates of the sites of ``q(X)`` under a GP prior, at fixed hyperparameters and inducing inputs.

In the Opper-Archambeau form ``q(x_q) ∝ N(x_q | 0, K) N(sites)`` the sites have precisions ``lambda_q`` and
precision-weighted means ``eta_q = mu_bar_q + lambda_q * mu_q``. The data term ``F_hat`` of the bound
depends on ``q`` only through the marginal means ``mu`` and variances ``s``, so a natural-gradient step of
size ``rho`` on the bound moves the sites towards the stationary point of eqs. (33)-(34) (Khan & Lin 2017,
conjugate-computation variational inference)::

    lambda <- (1 - rho) lambda + rho (-2 dF_hat/ds)
    eta    <- (1 - rho) eta    + rho (dF_hat/dmu - 2 (dF_hat/ds) mu).

With ``rho = 1`` this is the fixed point of eq. (34) itself; for a Gaussian likelihood acting on each point
it reaches the exact posterior in one step. Unlike gradient steps on ``mu_bar`` it is unaffected by how
badly conditioned ``K`` is, which is what makes plain gradient ascent crawl on smooth priors over dense
times. A step that lowers the bound is retried with half the size; an accepted one lets the size grow
back towards 1.

Full steps still converge only linearly, and slowly where one direction of the sites contracts little at each
step (ratios of 0.97-0.98 per step on the supervised GPLVM of Gadd et al.). With ``accelerate``, after every
two full steps in a row the sites jump along the squared extrapolation of those three iterates (SQUAREM,
Varadhan & Roland 2008), ``x0 - 2 a r + a^2 v`` with ``r = x1 - x0``, ``v = x2 - 2 x1 + x0`` and
``a = -max(1, |r| / |v|)``, kept only where it raises the bound. The updates stay deterministic.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from gpdsl.inference.variational.gp_prior_q import LAMBDA_RANGE, GPPriorGaussian, GPPriorQParams, site_factor
from gpdsl.inference.variational.latent_q import LatentMoments
from gpdsl.numerics.linalg import cho_solve


class SiteUpdateResult(NamedTuple):
    """The sites after the updates, the bound there (no hyperprior), iterations used and convergence."""

    latent: GPPriorQParams
    bound: jax.Array
    iterations: jax.Array
    converged: jax.Array


def make_site_updates(problem, settings, latent_q: GPPriorGaussian | None = None, *, max_iterations: int = 500,
                      tol: float = 1e-9, accelerate: bool = False):
    """``(start, inducing, theta) -> SiteUpdateResult``: maximise the bound over ``q(X)`` by natural-gradient site updates.

    Parameters
    ----------
    problem : GPLVMProblem
        The model view (its latent inputs have a GP prior).
    settings : VEMSettings
        The Psi statistics (and the seed of their Monte Carlo draws, fixed across iterations).
    latent_q : GPPriorGaussian, optional
        The family, by default ``problem.latent_q()`` (another prior covariance, e.g. over training and new
        points, for predictions).
    max_iterations : int
        Updates at most (rejected steps count).
    tol : float
        Stop when an accepted step (not an extrapolation) raises the bound by less than ``tol * (1 + |bound|)``,
        or when no step down to a millionth of the full one raises it (both count as converged).
    accelerate : bool
        Try a squared extrapolation after every two full steps in a row (see the module docstring); the
        extrapolations count as iterations. On the supervised GPLVM of sinusoid case 1 it halves the iterations
        and ends higher; on the dynamical GPLVM of ``tests/inference/variational/test_site_updates.py``, whose slow directions are
        many, it does not help.

    Returns
    -------
    callable
        Traceable and vmap-able in all three arguments.
    """
    from gpdsl.inference.variational.vem import gplvm_bound

    latent_q = latent_q or problem.latent_q()
    data_term = gplvm_bound(problem, settings, lambda moments, theta: moments, lambda *_: 0.0, hyperprior=False)

    def evaluate(params, Z, theta):
        """The bound at ``params``, the marginal means, and the data term's gradient with respect to the marginals."""
        moments = latent_q.moments(params, theta)
        data, gradient = jax.value_and_grad(lambda m, s: data_term(LatentMoments(m, s), Z, theta), argnums=(0, 1))(
            moments.mean, moments.variance)
        return data - latent_q.kl(params, theta, moments), moments.mean, gradient

    def run(start: GPPriorQParams, Z, theta) -> SiteUpdateResult:
        blocks = latent_q.covariance_blocks(theta)

        def step_sites(params, mean, gradient, rho):
            g_mean, g_variance = gradient
            lam_target = jnp.clip(-2.0 * g_variance, *LAMBDA_RANGE)
            eta_target = g_mean + lam_target * mean
            return ((1 - rho) * (params.mu_bar + params.lam * mean) + rho * eta_target,
                    (1 - rho) * params.lam + rho * lam_target)

        def step(state):
            params, value, mean, gradient, rho, iteration, _, history, run_length = state
            extrapolate = accelerate & (run_length >= 3)
            sites = step_sites(params, mean, gradient, rho)
            current = (params.mu_bar + params.lam * mean, params.lam)
            sites = jax.tree_util.tree_map(lambda jump, plain: jnp.where(extrapolate, jump, plain),
                                           _squared_extrapolation(history, current), sites)
            eta, lam = sites[0], jnp.clip(sites[1], *LAMBDA_RANGE)
            candidate = GPPriorQParams(_mu_bar_from_sites(blocks, eta, lam), lam)
            new_value, new_mean, new_gradient = evaluate(candidate, Z, theta)
            accept = jnp.isfinite(new_value) & jnp.where(extrapolate, new_value > value, new_value >= value)
            done = accept & ~extrapolate & (new_value - value < tol * (1.0 + jnp.abs(value)))
            full_step = accept & ~extrapolate & (rho == 1.0)
            history = jax.tree_util.tree_map(lambda shifted, kept: jnp.where(full_step, shifted, kept),
                                             (history[1], current), history)
            run_length = jnp.where(full_step, jnp.minimum(run_length + 1, 3), 1)
            params, value, mean, gradient = jax.tree_util.tree_map(
                lambda a, b: jnp.where(accept, a, b), (candidate, new_value, new_mean, new_gradient),
                (params, value, mean, gradient))
            rho = jnp.where(accept | extrapolate, jnp.where(extrapolate, rho, jnp.minimum(1.0, 2.0 * rho)), 0.5 * rho)
            return params, value, mean, gradient, rho, iteration + 1, done, history, run_length

        def keep_going(state):
            _, _, _, _, rho, iteration, done, _, _ = state
            return (~done) & (iteration < max_iterations) & (rho > 1e-6)

        value, mean, gradient = evaluate(start, Z, theta)
        sites = (start.mu_bar + start.lam * mean, start.lam)
        history = (sites, sites)
        state = (start, value, mean, gradient, jnp.asarray(1.0), jnp.asarray(0), jnp.asarray(False), history,
                 jnp.asarray(1))
        params, value, _, _, rho, iterations, done, _, _ = jax.lax.while_loop(keep_going, step, state)
        return SiteUpdateResult(params, value, iterations, done | (rho <= 1e-6))

    return run


def _squared_extrapolation(history, current):
    """SQUAREM's jump from the iterates ``x0, x1`` (``history``) and ``x2`` (``current``), pytrees of sites."""
    x0, x1, x2 = (jnp.concatenate([leaf.ravel() for leaf in jax.tree_util.tree_leaves(x)]) for x in (*history, current))
    ratio = jnp.linalg.norm(x1 - x0) / jnp.linalg.norm(x2 - 2.0 * x1 + x0)
    alpha = -jnp.where(jnp.isfinite(ratio), jnp.maximum(ratio, 1.0), 1.0)
    return jax.tree_util.tree_map(lambda a, b, c: a - 2.0 * alpha * (b - a) + alpha**2 * (c - 2.0 * b + a),
                                  *history, current)


def _mu_bar_from_sites(blocks, eta, lam):
    """``mu_bar = eta - lambda * mu`` with ``mu = (K^-1 + diag(lambda))^-1 eta``, per latent dimension and block, without ``K^-1``."""

    def one(K, eta_q, lam_q):
        root, chol_b = site_factor(K, lam_q)
        K_eta = K @ eta_q
        mean = K_eta - K @ (root * cho_solve((chol_b, True), root * K_eta))
        return eta_q - lam_q * mean

    mu_bar = jnp.zeros_like(eta)
    per_dimension = jax.vmap(one, in_axes=(None, 1, 1), out_axes=1)
    for index, K_blocks in blocks:
        mu_bar = mu_bar.at[index].set(jax.vmap(per_dimension)(K_blocks, eta[index], lam[index]))
    return mu_bar
