"""Predictive class probabilities at new inputs from any engine's draws (eqs. 7-8 and 20).

* Samplers that keep ``f`` (Gibbs, PM with latent sampling): ``p(y* = 1 | y)`` is the average over
  draws ``(theta_i, f_i)`` of ``int p(y* | f*) p(f* | f_i, theta_i) df*`` (eq. 20), where
  ``p(f* | f, theta)`` is the GP conditional.
* Samplers of ``theta`` only (PM, MCMC-EP) and point estimates (EP-ML): the average over draws of the
  approximation's predictive ``p(y* | y, theta_i)`` (eqs. 7-8).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from gpdsl.data.new_inputs import input_matrix
from gpdsl.errors import MethodError
from gpdsl.inference.approximations.ep import ep
from gpdsl.inference.approximations.gaussian import class_probability, predict_latent
from gpdsl.inference.approximations.laplace import laplace
from gpdsl.inference.draw_map import over_draws
from gpdsl.inference.families.latent_gp import LatentGP
from gpdsl.ir.structure import input_prediction_refusal
from gpdsl.numerics.linalg import cholesky, solve_triangular


def new_input_covariances(problem: LatentGP, theta, X_new, full: bool = False):
    """``K(X, X_new)`` (n, m) and the prior variances at ``X_new`` (m,), or with ``full`` their prior covariance
    (m, m), at hyperparameters ``theta``."""
    statement = problem.node.statement
    refusal = input_prediction_refusal(problem.node)
    if refusal:
        raise MethodError(refusal)
    env = problem.environment(theta)
    kernel = problem.jax_model.gp_kernel(statement, env)
    X = problem.jax_model.gp_inputs(statement, env)
    X_new = jnp.asarray(X_new, dtype=float).reshape(-1, X.shape[1])
    return kernel(X, X_new), kernel(X_new) if full else kernel.diag(X_new)


def check_new_inputs(problem: LatentGP, X_new) -> np.ndarray:
    """``X_new`` as a float matrix with the training inputs' number of columns (of tuple inputs over one index, the
    components' columns side by side, as ``(t, g)`` gives one row ``[t_i, g_i]`` per point), or a DataError."""
    inputs = problem.node.statement.inputs
    one_row_per_point = len(inputs.components) == 1 or len(inputs.index_shape) == 1
    width = problem.jax_model.gp_inputs(problem.node.statement, problem.jax_model.data).shape[1] \
        if one_row_per_point else None
    names = [name or "..." for name in inputs.names]
    subject = names[0] if len(names) == 1 else "(" + ", ".join(names) + ")"
    return input_matrix(X_new, width, f"new inputs like {subject if any(inputs.names) else 'the inputs'}")


def mean_at_new_inputs(problem: LatentGP, theta, X_new):
    """The GP's mean (``gp(X, k, mean = m)``) at ``X_new``, its input variable set to them; 0 without a mean.

    Raises
    ------
    MethodError
        The mean reads data other than the GP's input variable (:func:`gpdsl.ir.structure.mean_prediction_refusal`).
    """
    return problem.mean_in(problem.environment(theta), X_new)


def conditional_moments(problem: LatentGP, theta, f, X_new, full: bool = False):
    """Mean and variance of ``f*`` at ``X_new`` given one draw ``(theta, f)`` (``f`` centred, the engines'):
    the GP conditional plus the GP's mean (traceable). With ``full``, the covariance (m, m) instead of the
    variances."""
    L = cholesky(problem.covariance(theta))
    K_star, k_prior = new_input_covariances(problem, theta, X_new, full)
    A = solve_triangular(L, K_star, lower=True)
    mean = A.T @ solve_triangular(L, f, lower=True) + mean_at_new_inputs(problem, theta, X_new)
    if full:
        return mean, k_prior - A.T @ A
    return mean, jnp.maximum(k_prior - jnp.sum(A ** 2, axis=0), 0.0)


def approximate_moments(problem: LatentGP, theta, X_new, approximation: str = "ep", tol=None, full: bool = False):
    """Mean and variance of ``f*`` at ``X_new`` under the Gaussian approximation at ``theta`` (traceable); with
    ``full``, the covariance (m, m) instead of the variances."""
    K = problem.covariance(theta)
    y = jnp.asarray(problem.y)
    offset = problem.location_offset(theta)
    if approximation == "ep":
        approx = ep(K, y, tol=tol, offset=offset, likelihood=problem.likelihood,
                    args=problem.likelihood_arguments(theta))
    else:
        approx = laplace(K, y, problem.likelihood, tol=tol, args=problem.likelihood_arguments(theta), offset=offset)
    K_star, k_prior = new_input_covariances(problem, theta, X_new, full)
    mean, var = predict_latent(approx, K_star, k_prior, full)
    return mean + mean_at_new_inputs(problem, theta, X_new), var if full else jnp.maximum(var, 0.0)


def predict_from_latent_draws(problem: LatentGP, theta_draws, f_draws, X_new) -> np.ndarray:
    """Eq. 20: class probabilities averaged over ``(theta, f)`` draws, shape ``(chain, draw, m)``."""
    X_new = check_new_inputs(problem, X_new)

    def one(theta, f):
        return class_probability(*conditional_moments(problem, theta, f, X_new), problem.likelihood)

    return over_draws(one, theta_draws, f_draws)


def predict_from_theta_draws(problem: LatentGP, theta_draws, X_new, approximation: str = "ep",
                             tol=None) -> np.ndarray:
    """Eqs. 7-8 inside: the approximation's class probabilities averaged over ``theta`` draws."""
    X_new = check_new_inputs(problem, X_new)

    def one(theta):
        return class_probability(*approximate_moments(problem, theta, X_new, approximation, tol), problem.likelihood)

    return over_draws(one, theta_draws)
