"""Predictions and pointwise groups of a Hilbert-space approximate latent GP from any sampler's draws of its
hyperparameters and weights.

Each draw ``(theta, z)`` fixes ``f`` everywhere: ``f* = phi(X*) (sqrt(S_theta(omega)) .* z) + m(X*)``, one joint
draw over the new points (the same whether ``--predictive`` is joint or marginal, as nothing else is random), and
``y*`` from the likelihood at ``f*`` when its other arguments are free of per-observation data.
"""

from __future__ import annotations

import jax
import numpy as np

from gpdsl.errors import MethodError
from gpdsl.inference.draw_map import over_draws
from gpdsl.inference.families.hsgp import HSGPLatent
from gpdsl.ir.structure import expression_refs
from gpdsl.likelihoods import LIKELIHOODS


def hsgp_new_draws(problem: HSGPLatent, posterior: dict, X_new, key) -> dict[str, np.ndarray]:
    """``<f>_new`` and, when the likelihood's arguments have values at new inputs, ``<y>_new``: ``(chain, draw, m)``.

    Parameters
    ----------
    problem : HSGPLatent
    posterior : dict of str to numpy.ndarray
        Draws ``(chain, draw, ...)`` of every free variable of the lowered model (the parameters and ``<f>_z``).
    X_new : array_like, shape (m, D)
        The new inputs.
    key : jax.Array
        PRNG key of the replicate draws.

    Raises
    ------
    MethodError
        The draws lack a free variable (the sampler did not record the weights).
    DataError
        New inputs of the wrong shape.
    """
    X_new = problem.check_new_inputs(X_new)
    phi_new = problem.basis.at(X_new)
    names = problem.free_names
    missing = [name for name in names if name not in posterior]
    if missing:
        raise MethodError(f"predictions of the HSGP '{problem.name}' need draws of {', '.join(missing)}")
    likelihood_statement = problem.node.likelihood
    likelihood = LIKELIHOODS[problem.facts.likelihood]
    target = problem.facts.target
    model = problem.jax_model.model
    arguments = dict(likelihood_statement.distribution.args)
    observed = set(model.data) - set(model.sizes)
    predictable = likelihood.sample is not None and not any(expression_refs(arguments[name]) & observed
                                                            for name in likelihood.params)

    def one(*values):
        *draw, draw_key = values
        free = dict(zip(names, draw))
        f_star = problem.values_at(free, phi_new, X_new)
        out = {f"{problem.name}_new": f_star}
        if predictable:
            env = {**problem.jax_model.environment(free), problem.name: f_star}
            args = [problem.jax_model.evaluate(arguments[name], env) for name in likelihood.params]
            out[f"{target}_new"] = likelihood.sample(draw_key, f_star.shape, *args)
        return out

    chains, draws = np.shape(posterior[names[0]])[:2]
    keys = np.asarray(jax.random.split(key, chains * draws)).reshape(chains, draws, -1)
    return over_draws(one, *[np.asarray(posterior[name], dtype=float) for name in names], keys)


def hsgp_pointwise(problem: HSGPLatent, posterior: dict, key) -> tuple[np.ndarray, np.ndarray]:
    """``log p(y_i | f_i, theta)`` and a replicate of ``y`` for every draw, each ``(chain, draw, *y's shape)``, from
    the draws of the free variables (the latent ``f`` recomputed from the weights).

    Raises
    ------
    MethodError
        The draws lack a free variable.
    """
    names = problem.free_names
    missing = [name for name in names if name not in posterior]
    if missing:
        raise MethodError(f"the pointwise groups of the HSGP '{problem.name}' need draws of {', '.join(missing)}")
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


def approximate_weight_draws(problem: HSGPLatent, posterior: dict, key, approximation: str = "laplace",
                             tol=None) -> dict[str, np.ndarray]:
    """The posterior with one draw of the weights per hyperparameter draw from the Gaussian approximation of the
    weights at it (:mod:`~gpdsl.inference.approximations.weight_space`, Laplace or EP): what predictions use where the
    sampler recorded the hyperparameters alone (``pm`` without ``--sample-latent``). The weights are then
    approximate: a draw of ``q(z | y, theta)``, not of ``p(z | y, theta)``."""
    from gpdsl.inference.approximations import weight_space
    from gpdsl.inference.predict.draws import draw_keys, unconstrained_draws

    theta_draws = unconstrained_draws(problem, posterior)
    y = np.asarray(problem.y)
    fit = weight_space.ep_weights if approximation == "ep" else weight_space.laplace_weights

    def one(theta, draw_key):
        approx = fit(problem.likelihood_operator(theta), y, problem.likelihood, tol=tol,
                     args=problem.likelihood_arguments(theta), offset=problem.location_offset(theta))
        return weight_space.sample(approx, draw_key, 1)[0]

    return {**posterior, problem.weights: over_draws(one, theta_draws, draw_keys(key, theta_draws))}


def hsgp_regression_new_draws(problem, theta_draws, X_new, key, joint: bool = False) -> dict[str, np.ndarray]:
    """The predictive at new inputs of an HSGP under a normal likelihood, its weights integrated out
    (:class:`~gpdsl.inference.families.hsgp_regression.HSGPRegression`), for every draw, each ``(chain, draw, m)``:
    ``<y>_mean``, ``<y>_variance`` (noise included), ``<f>_variance``, and one draw each of ``<f>_new`` and
    ``<y>_new``, ``<f>_new`` jointly over the new points with ``joint``, else point by point.

    Raises
    ------
    DataError
        New inputs of the wrong shape.
    MethodError
        The noise or the location's offset has one value per training observation.
    """
    import jax.numpy as jnp

    from gpdsl.inference.predict.draws import draw_keys
    from gpdsl.inference.predict.joint import joint_normal

    X_new = jnp.asarray(problem.check_new_inputs(X_new))
    target, latent = problem.target, problem.name

    def one(theta, draw_key):
        mean, f_covariance, noise, offset = problem.predictive(theta, X_new, full=joint)
        f_variance = jnp.maximum(jnp.diag(f_covariance) if joint else f_covariance, 0.0)
        latent_key, observation_key = jax.random.split(draw_key)
        if joint:
            f_new = joint_normal(latent_key, mean, f_covariance)
        else:
            f_new = mean + jnp.sqrt(f_variance) * jax.random.normal(latent_key, mean.shape)
        y_new = f_new + offset + jnp.sqrt(noise) * jax.random.normal(observation_key, mean.shape)
        return {f"{target}_mean": mean + offset, f"{target}_variance": f_variance + noise,
                f"{latent}_variance": f_variance, f"{latent}_new": f_new, f"{target}_new": y_new}

    return over_draws(one, theta_draws, draw_keys(key, theta_draws))
