"""The pseudo-marginal estimate for a latent state-space GP sampled through its innovations, ``O(N)`` per draw.

The view (:class:`~gpdsl.inference.families.state_space_latent.StateSpaceLatent`) samples the innovations ``z ~
N(0, I_{N d})`` from which the state recursion gives ``f`` (:mod:`gpdsl.backends.jax.state_space`). The importance
density is the Laplace approximation or parallel EP of ``f`` by Kalman smoothing
(:mod:`gpdsl.inference.approximations.state_space`, ``O(N)`` per Newton step or sweep), carried to the innovations:
each importance draw is a path of states and innovations drawn together under ``q``'s sites
(:func:`~gpdsl.inference.approximations.state_space.sample_path`, with the lowering's own transitions and noise
roots), so the innovations give back the states through the model's recursion and keep their prior where a root
is singular (a repeated time, a periodic term). Their law is ``q(z) = N(z | 0, I) q(f(z)) / N(f(z) | 0, K)``, so a
draw's log weight is ``log p(y | f) + log N(f | 0, K) - log q(f)``, the second part from the sites in ``O(N)``
(:func:`~gpdsl.inference.approximations.state_space.log_prior_minus_log_q`): the estimate of ``p(y | theta)`` is that
of the exact GP of the same kernel with the same ``q``, and no ``N x N`` (or ``N d x N d``) matrix is formed.

What the chain keeps is the selected draw of the innovations (the view's sampled vector): by the argument of
:mod:`gpdsl.inference.mcmc.pseudo_marginal` over the extended space of ``z``, ``(theta, z)`` is an exact draw of the
joint posterior, ``f`` is computed from it as in every other engine on the view, and ``--sample-latent`` refreshes
it by elliptical slice steps under ``z``'s identity prior. EP's sites (warm starts, frozen reference sites) live on
``f``, one per time, as for the exact GP.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp

from gpdsl.backends.jax.state_space import innovation_factors
from gpdsl.inference.approximations import state_space
from gpdsl.inference.families.state_space_latent import StateSpaceLatent
from gpdsl.inference.mcmc.estimates import Estimate, LatentSelection


def state_space_estimator(problem: StateSpaceLatent, approximation: str, num_importance: int, tol, max_iter: int,
                          use_approximate_marginal: bool, select_latent: bool):
    """:func:`~gpdsl.inference.mcmc.pseudo_marginal.make_latent_estimator` for a latent state-space GP (module
    docstring): the same ``estimate(key, theta, start_sites=None, frozen=False) -> Estimate``, its selection a draw of
    the innovations with the diagonal of their identity prior's factor (the view's ``prior_factor``)."""
    order = problem.order
    grid = problem.grid
    times = problem.times
    y = jnp.asarray(problem.y)
    points = grid.size

    def fit(kernel, start_sites, frozen, theta):
        options = {"offset": problem.location_offset(theta), "args": problem.likelihood_arguments(theta),
                   "periodic_order": order}
        if approximation == "laplace":
            return state_space.laplace(kernel, times, y, problem.likelihood, tol=tol, max_iter=max_iter, **options)

        def sweeps():
            return state_space.ep(kernel, times, y, problem.likelihood, tol=tol, max_sweeps=max_iter,
                                  initial_sites=None if start_sites is None else (start_sites[0], start_sites[1]),
                                  **options)

        if start_sites is None or frozen is False:
            return sweeps()

        def as_they_are():
            frozen_q = state_space.from_sites(kernel, times, start_sites[0], start_sites[1], order)
            return jax.tree.map(lambda value, like: jnp.asarray(value, like.dtype), frozen_q, jax.eval_shape(sweeps))

        return jax.lax.cond(frozen, as_they_are, lambda: sweeps()._replace(log_marginal=jnp.asarray(jnp.nan)))

    def draws_and_ratios(kernel, approx, key, num):
        """Draws of the innovations, shape ``(num, N d)``, and their ``log N(f | 0, K) - log q(f)``."""
        A, R, h = innovation_factors(kernel, grid, order)
        states, innovations = state_space.sample_path(A, R, h, approx.site_precision[grid.order],
                                                      approx.site_location[grid.order], key, num)
        f = (states @ h)[:, grid.unsort]
        return jnp.reshape(innovations, (num, -1)), state_space.log_prior_minus_log_q(approx, f)

    def estimate(key, theta, start_sites=None, frozen=False) -> Estimate:
        key_draws, key_select = jax.random.split(key)
        kernel = problem.kernel(theta)
        approx = fit(kernel, start_sites, frozen, theta)
        sites = jnp.stack([approx.site_precision, approx.site_location]) if approximation == "ep" \
            else jnp.zeros((2, points))
        like = lambda z: problem.log_likelihood(z, theta)  # noqa: E731
        factor = problem.prior_factor(theta) if select_latent else jnp.zeros((0,))
        if use_approximate_marginal:
            if select_latent:
                z = draws_and_ratios(kernel, approx, key_draws, 1)[0][0]
            else:
                z = jnp.zeros(problem.n)
            return Estimate(approx.log_marginal, LatentSelection(z, like(z), factor), sites, approx.converged,
                            approx.iterations, approx.cubic_ops + int(select_latent))
        draws, log_ratios = draws_and_ratios(kernel, approx, key_draws, num_importance)
        log_lik = jax.vmap(like)(draws)
        log_weights = log_lik + log_ratios
        log_p_hat = logsumexp(log_weights) - jnp.log(num_importance)
        log_p_hat = jnp.where(jnp.isfinite(log_p_hat), log_p_hat, -jnp.inf)
        chosen = jax.random.categorical(key_select, jnp.where(jnp.isnan(log_weights), -jnp.inf, log_weights))
        selection = LatentSelection(draws[chosen], log_lik[chosen], factor)
        return Estimate(log_p_hat, selection, sites, approx.converged, approx.iterations, approx.cubic_ops + 1)

    return estimate


def approximate_innovation_draws(problem: StateSpaceLatent, posterior: dict, key, approximation: str = "laplace",
                                 tol=None) -> dict[str, np.ndarray]:
    """The posterior with one draw of the innovations per hyperparameter draw from ``q`` at it (the Laplace
    approximation or EP by Kalman smoothing, drawn with the states as in the estimate): what predictions use where the
    sampler recorded the hyperparameters alone (``pm`` without ``--sample-latent``). The innovations are then
    approximate: a draw of ``q(z | y, theta)``, not of ``p(z | y, theta)``."""
    from gpdsl.inference.draw_map import over_draws
    from gpdsl.inference.predict.draws import draw_keys, unconstrained_draws

    theta_draws = unconstrained_draws(problem, posterior)
    estimate = state_space_estimator(problem, approximation, 1, tol, 100, use_approximate_marginal=True,
                                     select_latent=True)
    one = lambda theta, draw_key: estimate(draw_key, theta).selection.f  # noqa: E731
    return {**posterior, problem.weights: over_draws(one, theta_draws, draw_keys(key, theta_draws))}
