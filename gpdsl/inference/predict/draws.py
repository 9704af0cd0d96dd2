"""Pointwise log-likelihood, replicates and draws at new inputs, draw by draw, from any sampler's draws.

What ArviZ's ``log_likelihood``, ``posterior_predictive`` and ``predictions`` groups hold for the latent-GP
and GP-regression families (:mod:`gpdsl.ir.families`), from hyperparameter draws ``theta`` (unconstrained,
``(chain, draw, p)``) and, where a sampler records them, draws of the latent values ``f``:

* latent-GP models: ``log p(y_i | f_i, theta)`` and ``y_rep ~ p(y | f, theta)`` through the likelihood
  object; at new inputs ``f*`` from the GP conditional given ``(theta, f)``, or from the Gaussian
  approximation at ``theta`` for samplers of ``theta`` alone, then ``y*`` through the likelihood's sampler;
  ``f*`` jointly over the new points or each point from its own marginal (:mod:`gpdsl.inference.predict.joint`).
* GP regression, ``f`` integrated out: the exact leave-one-out predictive log densities
  ``log p(y_i | y_-i, theta)`` (Sundararajan & Keerthi 2001), which make PSIS-LOO over the ``theta`` draws
  valid for this non-factorised model (Bürkner, Gabry & Vehtari 2021); replicates and draws at new inputs
  from the exact conditional given ``theta``.
* GP regression with a state-space GP (``approx = state_space``): the same groups by Kalman smoothing, ``O(N + M)``
  per draw (:mod:`gpdsl.inference.predict.state_space`).
* Student-t process regression (``f`` integrated out): draws at new inputs from the conditional MVT given ``theta``
  (:mod:`gpdsl.inference.predict.student_t_process`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.inference.draw_map import over_draws
from gpdsl.inference.families.gp_regression import GPRegression, StateSpaceRegression
from gpdsl.inference.families.latent_gp import LatentGP
from gpdsl.inference.predict.gp_regression import (exact_moments, exact_posterior, loo_log_densities,
                                                   posterior_replicate)
from gpdsl.inference.families.student_t_process import StudentTProcessRegression
from gpdsl.inference.predict import state_space
from gpdsl.inference.predict.joint import check_draws, draw_batch, joint_normal
from gpdsl.inference.predict.student_t_process import student_t_draw, student_t_process_moments
from gpdsl.inference.predict.latent_gp import approximate_moments, check_new_inputs, conditional_moments
from gpdsl.likelihoods import LIKELIHOODS, capability


def unconstrained_draws(view, posterior: dict) -> np.ndarray:
    """The flat unconstrained ``theta`` of a view, ``(chain, draw, p)``, from named constrained draws."""
    names = view.theta_names
    if not names:  # a model without parameters
        chains, num = np.shape(next(iter(posterior.values())))[:2]
        return np.zeros((chains, num, 0))
    return over_draws(lambda *values: view.unconstrain_theta(dict(zip(names, values))),
                      *[np.asarray(posterior[name]) for name in names])


def draw_keys(key, theta_draws) -> np.ndarray:
    """One PRNG key per draw, ``(chain, draw, 2)``."""
    chains, num = np.shape(theta_draws)[:2]
    return np.asarray(jax.random.split(key, chains * num)).reshape(chains, num, -1)


def likelihood_arguments(problem: LatentGP, env: dict) -> list:
    """The arguments of the latent GP's likelihood evaluated in ``env``, in the likelihood's order."""
    distribution = problem.node.likelihood.distribution
    given = dict(distribution.args)
    return [problem.jax_model.evaluate(given[name], env) for name in LIKELIHOODS[problem.likelihood].params]


def latent_log_likelihood(problem: LatentGP, theta_draws, f_draws) -> np.ndarray:
    """``log p(y_i | f_i, theta)`` for every draw and observed output, ``(chain, draw, n_observed)`` (missing
    outputs left out)."""
    likelihood = LIKELIHOODS[problem.likelihood]
    observed = problem.observed
    y = jnp.asarray(np.where(observed, problem.y, likelihood.placeholder), dtype=float)

    def one(theta, f):
        return likelihood.log_density(y, *likelihood_arguments(problem, problem.environment(theta, f)))[..., observed]

    return over_draws(one, theta_draws, f_draws)


def latent_replicates(problem: LatentGP, theta_draws, f_draws, key) -> np.ndarray:
    """A replicate ``y_rep ~ p(y | f, theta)`` for every draw, ``(chain, draw, n)``."""
    sample = LIKELIHOODS[problem.likelihood].sample
    shape = np.shape(problem.y)

    def one(theta, f, draw_key):
        return sample(draw_key, shape, *likelihood_arguments(problem, problem.environment(theta, f)))

    return over_draws(one, theta_draws, f_draws, draw_keys(key, theta_draws))


def latent_new_draws(problem: LatentGP, theta_draws, f_draws, X_new, key, approximation: str = "ep",
                     tol=None, joint: bool = False, moments=None) -> dict[str, np.ndarray]:
    """Draws at new inputs: ``<f>_new`` and ``<y>_new``, and ``<y>_prob`` where the likelihood has class
    probabilities, each ``(chain, draw, m)``. ``<y>_new`` and ``<y>_prob`` are left out when another argument
    of the likelihood, or an offset in its latent argument (``log_exposure + f``), has one value per training
    observation (binomial ``trials``): it has none at new inputs.

    ``f*`` comes from the GP conditional given each ``(theta, f)`` draw, or, with ``f_draws`` None, from the
    Gaussian approximation (``approximation``: ``"ep"`` or ``"laplace"``) at each ``theta`` draw, or from
    ``moments(theta, X_new, full) -> (mean, var)`` where given (a variational posterior's ``q(f*)``, the GP's mean
    included): with ``joint`` from the full covariance over the new points, else from each point's marginal.
    """
    X_new = check_new_inputs(problem, X_new)
    likelihood = LIKELIHOODS[problem.likelihood]
    probability = capability(problem.likelihood, "class_probability")
    target = problem.node.likelihood.target.name

    def from_moments(theta, mean, var, draw_key):
        latent_key, observation_key = jax.random.split(draw_key)
        if joint:
            f_star = joint_normal(latent_key, mean, var)
            var = jnp.maximum(jnp.diag(var), 0.0)
        else:
            f_star = mean + jnp.sqrt(var) * jax.random.normal(latent_key, mean.shape)
        values = {f"{problem.name}_new": f_star}
        offset = problem.latent_argument_at_zero(theta)
        if jnp.ndim(offset):
            return values
        env = {**problem.environment(theta), problem.name: f_star}
        args = likelihood_arguments(problem, env)
        per_observation = [name for name, value in zip(likelihood.params, args) if jnp.ndim(value)
                           and name not in (likelihood.latent_param, *likelihood.own_shape)]
        if not per_observation:  # e.g. binomial trials given per training observation: none at new inputs
            values[f"{target}_new"] = likelihood.sample(observation_key, mean.shape, *args)
        if probability is not None and problem.node.shifted:
            values[f"{target}_prob"] = probability(mean + offset, var)
        return values

    keys = draw_keys(key, theta_draws)
    batch = draw_batch(len(X_new)) if joint else 256
    if f_draws is None:
        if moments is None:
            moments = lambda t, X, full: approximate_moments(problem, t, X, approximation, tol, full=full)  # noqa: E731
        values = over_draws(lambda t, k: from_moments(t, *moments(t, X_new, joint), k), theta_draws, keys, batch=batch)
    else:
        values = over_draws(lambda t, f, k: from_moments(t, *conditional_moments(problem, t, f, X_new, full=joint), k),
                            theta_draws, f_draws, keys, batch=batch)
    if joint:
        check_draws(values[f"{problem.name}_new"], f"{problem.name}_new")
    return values


def _posterior_at(problem: GPRegression, theta):
    return exact_posterior(problem.kernel(theta), problem.inputs(theta), problem.centred_y(theta),
                           problem.noise_variance(theta))


def gp_regression_log_likelihood(problem: GPRegression, theta_draws) -> np.ndarray:
    """``log p(y_i | y_-i, theta)`` for every draw and observed output, ``(chain, draw, n)`` (missing outputs left
    out: ``i`` and ``-i`` run over the observed ones)."""
    if isinstance(problem, StateSpaceRegression):
        return over_draws(lambda theta: state_space.loo_log_densities(problem, theta), theta_draws)
    return over_draws(lambda theta: loo_log_densities(_posterior_at(problem, theta)), theta_draws)


def gp_regression_replicates(problem: GPRegression, theta_draws, key) -> np.ndarray:
    """A replicate ``y_rep ~ p(y_rep | y, theta)`` for every draw, ``(chain, draw, N)``.

    With missing outputs, ``y_rep`` runs over every row: ``f`` drawn jointly at all of them from ``p(f | y_obs,
    theta)`` plus noise, so its entries at the missing rows are imputations."""
    if isinstance(problem, StateSpaceRegression):
        def replicate(theta, draw_key):
            latent_key, noise_key = jax.random.split(draw_key)
            f = state_space.posterior_draw(problem, theta, jnp.zeros(0), latent_key)
            noise = jnp.sqrt(problem.site_noise(theta)) * jax.random.normal(noise_key, f.shape)
            return problem.location(theta) + f + noise

        return over_draws(replicate, theta_draws, draw_keys(key, theta_draws))
    if problem.complete:
        return over_draws(lambda theta, k: problem.location(theta) + posterior_replicate(
            _posterior_at(problem, theta), problem.centred_y(theta), k), theta_draws, draw_keys(key, theta_draws))

    def one(theta, draw_key):
        kernel, X = problem.kernel(theta), problem.inputs(theta)
        posterior = _posterior_at(problem, theta)
        mean, covariance = exact_moments(posterior, kernel, X, problem.all_inputs(theta), include_noise=False,
                                         full=True)
        latent_key, noise_key = jax.random.split(draw_key)
        f = joint_normal(latent_key, mean, covariance)
        return problem.location(theta) + f + jnp.sqrt(posterior.noise_variance) * jax.random.normal(noise_key,
                                                                                                 mean.shape)

    return over_draws(one, theta_draws, draw_keys(key, theta_draws), batch=draw_batch(int(problem.observed.size)))


def gp_regression_imputation_moments(problem: GPRegression, theta) -> tuple[jax.Array, jax.Array]:
    """Mean and variance (noise included) of ``y_i | y_obs, theta`` at every row, shape ``(N,)`` each: the exact
    predictive, which at a missing row imputes its output (traceable)."""
    if isinstance(problem, StateSpaceRegression):
        marginals = state_space.posterior_marginals(problem, theta)
        return problem.location(theta) + marginals.mean, marginals.variance + problem.site_noise(theta)
    kernel, X = problem.kernel(theta), problem.inputs(theta)
    mean, variance = exact_moments(_posterior_at(problem, theta), kernel, X, problem.all_inputs(theta))
    return problem.location(theta) + mean, variance


def gp_regression_new_draws(problem: GPRegression, theta_draws, X_new, key,
                            joint: bool = False) -> dict[str, np.ndarray]:
    """The exact predictive at new inputs for every draw, each ``(chain, draw, m)``: ``<y>_mean``,
    ``<y>_variance`` (noise included), ``<f>_variance``, and one draw each of ``<f>_new`` and ``<y>_new``.

    With ``joint``, ``<f>_new`` is drawn from the full predictive covariance over the new points and
    ``<y>_new = <f>_new`` plus independent noise; else each point from its own marginal.
    """
    X_new = jnp.asarray(check_new_inputs(problem, X_new))
    problem.require_location_at_new_inputs()
    target, latent = problem.target, problem.name
    if isinstance(problem, StateSpaceRegression):
        return _state_space_new_draws(problem, theta_draws, X_new, key, joint)

    def one(theta, draw_key):
        f_shift, y_shift = _location_at(problem, theta, X_new)
        kernel, X = problem.kernel(theta), problem.inputs(theta)
        posterior = _posterior_at(problem, theta)
        mean, f_covariance = exact_moments(posterior, kernel, X, X_new, include_noise=False, full=joint)
        f_variance = jnp.maximum(jnp.diag(f_covariance) if joint else f_covariance, 0.0)
        y_variance = f_variance + posterior.noise_variance
        latent_key, observation_key = jax.random.split(draw_key)
        noise = jax.random.normal(observation_key, mean.shape)
        if joint:
            f_new = joint_normal(latent_key, mean, f_covariance)
            y_new = f_new + jnp.sqrt(posterior.noise_variance) * noise
        else:
            f_new = mean + jnp.sqrt(f_variance) * jax.random.normal(latent_key, mean.shape)
            y_new = mean + jnp.sqrt(y_variance) * noise
        return {f"{target}_mean": mean + y_shift, f"{target}_variance": y_variance, f"{latent}_variance": f_variance,
                f"{latent}_new": f_new + f_shift, f"{target}_new": y_new + y_shift}

    values = over_draws(one, theta_draws, draw_keys(key, theta_draws), batch=draw_batch(len(X_new)) if joint else 256)
    if joint:
        check_draws(values[f"{latent}_new"], f"{latent}_new")
    return values


def _location_at(problem: GPRegression, theta, X_new):
    """The GP's mean and ``y``'s location at the new inputs (zeros without either)."""
    if not problem.has_location:
        return jnp.zeros(()), jnp.zeros(())
    return problem.location_at(theta, X_new)


def _state_space_new_draws(problem: StateSpaceRegression, theta_draws, X_new, key,
                           joint: bool) -> dict[str, np.ndarray]:
    """:func:`gp_regression_new_draws` by the smoother: moments from its marginals, a joint ``<f>_new`` by pathwise
    conditioning (:func:`gpdsl.inference.predict.state_space.posterior_draw`)."""
    target, latent, n = problem.target, problem.name, problem.observed.size
    new_times = problem.series(X_new)

    def one(theta, draw_key):
        f_shift, y_shift = _location_at(problem, theta, X_new)
        mean, f_variance = state_space.predictive_moments(problem, theta, new_times)
        noise = problem.site_noise(theta)
        y_variance = f_variance + noise
        latent_key, observation_key = jax.random.split(draw_key)
        if joint:
            f_new = state_space.posterior_draw(problem, theta, new_times, latent_key)[n:]
        else:
            f_new = mean + jnp.sqrt(f_variance) * jax.random.normal(latent_key, mean.shape)
        y_new = f_new + jnp.sqrt(noise) * jax.random.normal(observation_key, mean.shape)
        return {f"{target}_mean": mean + y_shift, f"{target}_variance": y_variance, f"{latent}_variance": f_variance,
                f"{latent}_new": f_new + f_shift, f"{target}_new": y_new + y_shift}

    return over_draws(one, theta_draws, draw_keys(key, theta_draws))


def student_t_process_new_draws(problem: StudentTProcessRegression, theta_draws, X_new, key,
                                joint: bool = False) -> dict[str, np.ndarray]:
    """The Student-t process's predictive at new inputs for every draw, each ``(chain, draw, m)``: ``<y>_mean``,
    ``<y>_variance`` (noise included), ``<f>_variance``, ``<y>_dof`` (``nu + n``), and one draw each of ``<f>_new``
    and ``<y>_new``.

    With ``joint``, ``<f>_new`` is drawn from the joint MVT over the new points and ``<y>_new`` adds noise with the
    same mixing scale (one MVT over ``(f*, y*)``); else each point from its own marginal Student-t.
    """
    X_new = jnp.asarray(check_new_inputs(problem, X_new))
    target, latent = problem.target, problem.name

    def one(theta, draw_key):
        mean, f_covariance, noise, dof = student_t_process_moments(problem, theta, X_new, full=joint)
        f_variance = jnp.maximum(jnp.diag(f_covariance) if joint else f_covariance, 0.0)
        y_variance = f_variance + noise
        latent_key, observation_key, mixing_key, second_key = jax.random.split(draw_key, 4)
        shrink = (dof - 2) / dof
        noise_draw = jax.random.normal(observation_key, mean.shape)
        if joint:
            scale = jnp.sqrt(student_t_draw(mixing_key, dof, ()) * shrink)
            f_new = mean + scale * joint_normal(latent_key, jnp.zeros_like(mean), f_covariance)
            y_new = f_new + scale * jnp.sqrt(noise) * noise_draw
        else:
            f_scale = jnp.sqrt(student_t_draw(mixing_key, dof, mean.shape) * shrink * f_variance)
            y_scale = jnp.sqrt(student_t_draw(second_key, dof, mean.shape) * shrink * y_variance)
            f_new = mean + f_scale * jax.random.normal(latent_key, mean.shape)
            y_new = mean + y_scale * noise_draw
        return {f"{target}_mean": mean, f"{target}_variance": y_variance, f"{latent}_variance": f_variance,
                f"{target}_dof": jnp.broadcast_to(dof, mean.shape), f"{latent}_new": f_new, f"{target}_new": y_new}

    values = over_draws(one, theta_draws, draw_keys(key, theta_draws), batch=draw_batch(len(X_new)) if joint else 256)
    if joint:
        check_draws(values[f"{latent}_new"], f"{latent}_new")
    return values


def regression_new_draws(problem: GPRegression, theta_draws, X_new, key, joint: bool = False) -> dict[str, np.ndarray]:
    """The exact predictive at new inputs of GP regression (:func:`gp_regression_new_draws`) or of Student-t process
    regression (:func:`student_t_process_new_draws`), as ``problem`` is."""
    new_draws = (student_t_process_new_draws if isinstance(problem, StudentTProcessRegression)
                 else gp_regression_new_draws)
    return new_draws(problem, theta_draws, X_new, key, joint=joint)
