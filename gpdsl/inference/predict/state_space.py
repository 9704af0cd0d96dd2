"""Predictions of GP regression with a state-space GP (``approx = state_space``), per draw of ``theta``, in ``O(N + M)``.

The smoother (:func:`gpdsl.kernels.kalman.smooth`) gives the posterior marginals of ``f`` under the observations'
sites (precision ``1 / (s^2 + GP_JITTER)``; none at a missing output or a new time):

* :func:`predictive_moments`: the moments of ``f*`` at new times, and of ``y*`` with ``s^2`` added;
* :func:`posterior_draw`: one joint draw of ``f`` at any times given ``y``, by pathwise conditioning (Matheron's
  rule): a prior draw ``f_0`` at the data's and the wanted times together (:func:`~gpdsl.kernels.kalman.prior_draws`)
  and noise ``e``, then ``f = f_0 + E[f | y - f_0(t) - e]``, the smoother's mean of that residual;
* :func:`loo_log_densities`: ``log p(y_i | y_-i, theta)`` from each point's posterior marginal with its own site
  removed (the cavity ``1 / v_-i = 1 / v_i - 1 / n``, ``m_-i = v_-i (m_i / v_i - y_i / n)``, ``n`` the site noise).

Each takes a :class:`~gpdsl.inference.families.gp_regression.StateSpaceRegression` and the flat ``theta`` and is
traceable, as the dense functions of :mod:`gpdsl.inference.predict.gp_regression` are.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.inference.families.gp_regression import StateSpaceRegression
from gpdsl.kernels import kalman


def _sites(problem: StateSpaceRegression, theta, extra: int = 0):
    """Site precisions and natural means at every row, then ``extra`` points without a site."""
    observed = problem.observed
    precision = jnp.where(observed, 1.0 / problem.site_noise(theta), 0.0)
    natural_mean = precision * jnp.where(observed, problem.centred_outputs(theta), 0.0)
    return jnp.concatenate([precision, jnp.zeros(extra)]), jnp.concatenate([natural_mean, jnp.zeros(extra)])


def posterior_marginals(problem: StateSpaceRegression, theta) -> kalman.SitePosterior:
    """The smoother's posterior marginals of ``f`` at every row (missing outputs included)."""
    precision, natural_mean = _sites(problem, theta)
    return kalman.smooth(problem.kernel(theta), problem.times, precision, natural_mean, periodic_order=problem.order)


def predictive_moments(problem: StateSpaceRegression, theta, new_times) -> tuple[jax.Array, jax.Array]:
    """Mean and variance of ``f*`` (the GP's zero-mean part) at ``new_times`` (shape ``(M,)``, or ``(M, 2)`` with
    group labels) given the observed outputs."""
    times = kalman.merged_times(problem.times, new_times)
    precision, natural_mean = _sites(problem, theta, new_times.shape[0])
    marginals = kalman.smooth(problem.kernel(theta), times, precision, natural_mean, periodic_order=problem.order)
    n = problem.times.shape[0]
    return marginals.mean[n:], jnp.maximum(marginals.variance[n:], 0.0)


def posterior_draw(problem: StateSpaceRegression, theta, new_times, key) -> jax.Array:
    """One joint draw of ``f`` at every row and then at ``new_times`` given the observed outputs, shape ``(N + M,)``
    (module docstring: a prior draw corrected by the smoother's mean)."""
    kernel, noise = problem.kernel(theta), problem.site_noise(theta)
    times = kalman.merged_times(problem.times, new_times)
    prior_key, noise_key = jax.random.split(key)
    prior = kalman.prior_draws(prior_key, kernel, times, 1, periodic_order=problem.order)[0]
    n = problem.times.shape[0]
    observed = problem.observed
    pseudo_outputs = prior[:n] + jnp.sqrt(noise) * jax.random.normal(noise_key, (n,))
    residual = jnp.where(observed, jnp.where(observed, problem.centred_outputs(theta), 0.0) - pseudo_outputs, 0.0)
    precision = jnp.concatenate([jnp.where(observed, 1.0 / noise, 0.0), jnp.zeros(new_times.shape[0])])
    natural_mean = jnp.concatenate([precision[:n] * residual, jnp.zeros(new_times.shape[0])])
    correction = kalman.smooth(kernel, times, precision, natural_mean, periodic_order=problem.order).mean
    return prior + correction


def loo_log_densities(problem: StateSpaceRegression, theta) -> jax.Array:
    """``log p(y_i | y_-i, theta)`` at every observed row, shape ``(n,)`` (module docstring)."""
    marginals = posterior_marginals(problem, theta)
    observed = np.flatnonzero(problem.observed)
    y, mean, variance = problem.centred_y(theta), marginals.mean[observed], marginals.variance[observed]
    noise = problem.site_noise(theta)
    cavity_variance = 1.0 / (1.0 / variance - 1.0 / noise)
    cavity_mean = cavity_variance * (mean / variance - y / noise)
    return jax.scipy.stats.norm.logpdf(y, cavity_mean, jnp.sqrt(cavity_variance + noise))
