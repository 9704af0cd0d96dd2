"""Predictions and pointwise groups of a latent state-space GP from any sampler's draws of its hyperparameters and
innovations (:mod:`gpdsl.inference.families.state_space_latent`).

Each draw ``(theta, z)`` fixes ``f`` at the training times; ``f*`` at new times is one draw of the state-space prior
conditioned on those values, by pathwise conditioning in ``O(N + M)``: a joint prior draw ``g`` at the training and
new times (:func:`gpdsl.kernels.kalman.prior_draws`), then ``f* = g* + E[f* | f_train = f - g_train]`` from the
Kalman smoother with sites of negligible noise at the training times (:func:`gpdsl.kernels.kalman.smooth`), the
mean ``K_*n K_nn^{-1} (f - g)``. The draw is joint over the new points (the same whether ``--predictive`` is joint or
marginal); ``y*`` comes from the likelihood at ``f*`` when its other arguments are free of per-observation data.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.errors import MethodError
from gpdsl.inference.draw_map import over_draws
from gpdsl.inference.families.state_space_latent import StateSpaceLatent
from gpdsl.ir.structure import expression_refs
from gpdsl.kernels import kalman
from gpdsl.likelihoods import LIKELIHOODS

CONDITIONING_NOISE = 1e-14
"""The variance of the sites that pin the smoother to ``f`` at the training times, relative to the prior variance."""


def conditional_draw(key, kernel, times, values, new_times, periodic_order: int) -> jax.Array:
    """One draw of ``f(new_times) | f(times) = values`` under the zero-mean state-space prior of ``kernel``, joint over
    the new times, in ``O(N + M)`` (the module docstring)."""
    n = jnp.shape(times)[0]
    every = kalman.merged_times(times, new_times)
    m = every.shape[0] - n
    prior = kalman.prior_draws(key, kernel, every, 1, periodic_order)[0]
    form = kernel.state_space(periodic_order)
    scale = CONDITIONING_NOISE * (form.H @ form.P_inf @ form.H.T).reshape(())
    precision = jnp.concatenate([jnp.full(n, 1.0 / scale), jnp.zeros(m)])
    natural_mean = jnp.concatenate([(values - prior[:n]) / scale, jnp.zeros(m)])
    smoothed = kalman.smooth(kernel, every, precision, natural_mean, periodic_order)
    return prior[n:] + smoothed.mean[n:]


def _require_draws(problem: StateSpaceLatent, posterior: dict, what: str) -> list[str]:
    names = problem.free_names
    missing = [name for name in names if name not in posterior]
    if missing:
        raise MethodError(f"{what} of the state-space GP '{problem.name}' need draws of {', '.join(missing)}")
    return names


def state_space_new_draws(problem: StateSpaceLatent, posterior: dict, X_new, key) -> dict[str, np.ndarray]:
    """``<f>_new`` and, when the likelihood's arguments have values at new times, ``<y>_new``: ``(chain, draw, m)``.

    Parameters
    ----------
    problem : StateSpaceLatent
    posterior : dict of str to numpy.ndarray
        Draws ``(chain, draw, ...)`` of every free variable of the lowered model (the parameters and ``<f>_z``).
    X_new : array_like, shape (m,) or (m, 1)
        The new times.
    key : jax.Array
        PRNG key.

    Raises
    ------
    MethodError
        The draws lack a free variable (the sampler did not record the innovations).
    DataError
        New times of the wrong shape.
    """
    X_new = jnp.asarray(problem.check_new_inputs(X_new))
    names = _require_draws(problem, posterior, "predictions")
    statement = problem.node.statement
    likelihood = LIKELIHOODS[problem.facts.likelihood]
    target = problem.facts.target
    model = problem.jax_model.model
    arguments = dict(problem.node.likelihood.distribution.args)
    observed = set(model.data) - set(model.sizes)
    predictable = likelihood.sample is not None and not any(expression_refs(arguments[name]) & observed
                                                            for name in likelihood.params)
    jax_model = problem.jax_model
    times = jnp.asarray(jax_model.series_points(statement, np.asarray(jax_model.gp_inputs(statement, jax_model.data))))
    new_times = jnp.asarray(jax_model.series_points(statement, np.asarray(X_new)))

    def one(*values):
        *draw, draw_key = values
        free = dict(zip(names, draw))
        env = problem.jax_model.environment(free)
        kernel = problem.jax_model.state_space_kernel(statement, env)
        latent_key, observation_key = jax.random.split(draw_key)
        centred = env[problem.name] - problem.jax_model.gp_mean(statement, env)
        f_star = conditional_draw(latent_key, kernel, times, centred, new_times, problem.order) + \
            problem.mean_at(free, X_new)
        out = {f"{problem.name}_new": f_star}
        if predictable:
            env = {**env, problem.name: f_star}
            args = [problem.jax_model.evaluate(arguments[name], env) for name in likelihood.params]
            out[f"{target}_new"] = likelihood.sample(observation_key, f_star.shape, *args)
        return out

    chains, draws = np.shape(posterior[names[0]])[:2]
    keys = np.asarray(jax.random.split(key, chains * draws)).reshape(chains, draws, -1)
    return over_draws(one, *[np.asarray(posterior[name], dtype=float) for name in names], keys)


def state_space_pointwise(problem: StateSpaceLatent, posterior: dict, key) -> tuple[np.ndarray, np.ndarray]:
    """``log p(y_i | f_i, theta)`` and a replicate of ``y`` for every draw, each ``(chain, draw, *y's shape)``, from
    the draws of the free variables (``f`` recomputed from the innovations).

    Raises
    ------
    MethodError
        The draws lack a free variable.
    """
    names = _require_draws(problem, posterior, "the pointwise groups")
    likelihood = LIKELIHOODS[problem.facts.likelihood]
    arguments = dict(problem.node.likelihood.distribution.args)
    y = np.asarray(problem.y)

    def one(*values):
        *draw, draw_key = values
        env = problem.jax_model.environment(dict(zip(names, draw)))
        args = [problem.jax_model.evaluate(arguments[name], env) for name in likelihood.params]
        return likelihood.log_density(y, *args), likelihood.sample(draw_key, y.shape, *args)

    chains, draws = np.shape(posterior[names[0]])[:2]
    keys = np.asarray(jax.random.split(key, chains * draws)).reshape(chains, draws, -1)
    return over_draws(one, *[np.asarray(posterior[name], dtype=float) for name in names], keys)
