"""Draws at new inputs of a ``matrix[N, C]`` latent of independent GP columns (``y ~ categorical_logit(f)``).

The latent-GP view holds such an ``f`` row by row with covariance ``K(theta)`` kron ``I_C``
(:attr:`~gpdsl.inference.families.latent_gp.LatentGP.columns`), so at new inputs:

* given a draw ``(theta, f)`` (gibbs, pm with ``--sample-latent``, NUTS) each column of ``f*`` follows the GP
  conditional given its own column of ``f``: one Cholesky factor of the base ``K(theta)`` serves every column,
  and the columns share the conditional covariance;
* given ``theta`` alone (pm) ``f*`` follows the multiclass Laplace approximation (Rasmussen & Williams 2006,
  Alg. 3.4): mean ``K*^T alpha`` per class (``alpha = K^-1 f_hat``, ``y - pi_hat`` at the mode) and covariance
  ``K** - K*^T S B^-1 S K*`` over the classes together, which the likelihood's curvature couples.

Each draw of ``f*`` gives labels ``y* ~ categorical_logit(f*)`` and the class probabilities ``softmax(f*)`` of
each new point, whose average over draws is the predictive probability of each class.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from gpdsl.inference.approximations.multiclass_laplace import multiclass_laplace
from gpdsl.inference.draw_map import over_draws
from gpdsl.inference.families.latent_gp import LatentGP
from gpdsl.inference.predict.draws import draw_keys
from gpdsl.inference.predict.joint import check_draws, draw_batch, joint_normal
from gpdsl.inference.predict.latent_gp import check_new_inputs, mean_at_new_inputs, new_input_covariances
from gpdsl.likelihoods import LIKELIHOODS
from gpdsl.numerics.linalg import cholesky, solve_triangular


def _mean_columns(problem: LatentGP, theta, X_new) -> jax.Array:
    """The GP's mean at ``X_new`` as a column, ``(m, 1)`` (or ``(1, 1)`` without a mean), shared by every class."""
    return jnp.reshape(mean_at_new_inputs(problem, theta, X_new), (-1, 1))


def column_conditional_moments(problem: LatentGP, theta, f, X_new, full: bool = False):
    """The GP conditional of ``f*`` at ``X_new`` given one draw ``(theta, f)`` (``f`` centred, row by row), column
    by column (traceable).

    Returns
    -------
    mean : jax.Array, shape (m, C)
    covariance : jax.Array, shape (m, m) with ``full``, else the variances (m,)
        Shared by every column.
    """
    env = problem.environment(theta)
    L = cholesky(problem.jax_model.gp_covariance(problem.node.statement, env))
    K_star, k_prior = new_input_covariances(problem, theta, X_new, full)
    A = solve_triangular(L, K_star, lower=True)
    columns = jnp.reshape(f, (-1, problem.columns))
    mean = A.T @ solve_triangular(L, columns, lower=True) + _mean_columns(problem, theta, X_new)
    if full:
        return mean, k_prior - A.T @ A
    return mean, jnp.maximum(k_prior - jnp.sum(A ** 2, axis=0), 0.0)


def column_laplace_moments(problem: LatentGP, theta, X_new, tol=None, full: bool = False):
    """``f*`` at ``X_new`` under the multiclass Laplace approximation at ``theta`` (traceable).

    Returns
    -------
    mean : jax.Array, shape (m, C)
    covariance : jax.Array, shape (m C, m C) with ``full`` (``f*`` row by row), else (m, C, C): each new point's
        covariance over the classes.
    """
    classes = problem.columns
    K = problem.covariance(theta)
    approx = multiclass_laplace(K, jnp.asarray(problem.y), classes, tol=tol, offset=problem.location_offset(theta))
    K_star, k_prior = new_input_covariances(problem, theta, X_new, full)
    eye = jnp.eye(classes)
    K_star_rows = jnp.kron(K_star, eye)
    mean = jnp.reshape(K_star_rows.T @ approx.alpha, (-1, classes)) + _mean_columns(problem, theta, X_new)
    V = solve_triangular(approx.chol_b, approx.root_w @ K_star_rows, lower=True)
    if full:
        return mean, jnp.kron(k_prior, eye) - V.T @ V
    per_point = jnp.reshape(V, (V.shape[0], -1, classes))
    return mean, k_prior[:, None, None] * eye - jnp.einsum("ami,amj->mij", per_point, per_point)


def _draw_columns(key, mean, covariance, joint: bool):
    """One draw of ``f*`` (m, C) from :func:`column_conditional_moments`."""
    if joint:
        return joint_normal(key, mean, covariance)
    return mean + jnp.sqrt(covariance)[:, None] * jax.random.normal(key, mean.shape)


def _draw_classes(key, mean, covariance, joint: bool):
    """One draw of ``f*`` (m, C) from :func:`column_laplace_moments`."""
    if joint:
        return jnp.reshape(joint_normal(key, jnp.ravel(mean), covariance), mean.shape)
    keys = jax.random.split(key, mean.shape[0])
    return jax.vmap(joint_normal)(keys, mean, covariance)


def multiclass_new_draws(problem: LatentGP, theta_draws, f_draws, X_new, key, tol=None,
                         joint: bool = False) -> dict[str, jax.Array]:
    """Draws at new inputs of a matrix latent: ``<f>_new`` and ``<y>_prob`` ``(chain, draw, m, C)``, ``<y>_new``
    ``(chain, draw, m)``; the last two are left out when the logits add an offset with one row per training
    observation (it has none at new inputs).

    ``f*`` comes from the GP conditional given each ``(theta, f)`` draw, or, with ``f_draws`` None, from the
    multiclass Laplace approximation at each ``theta`` draw: with ``joint`` jointly over the new points (and
    classes), else point by point.
    """
    X_new = check_new_inputs(problem, X_new)
    likelihood = LIKELIHOODS[problem.likelihood]
    target = problem.node.likelihood.target.name

    def from_latent(theta, f_star, draw_key):
        values = {f"{problem.name}_new": f_star}
        offset = problem.latent_argument_at_zero(theta)
        if jnp.ndim(offset) > 1:
            return values
        logits = f_star + offset
        values[f"{target}_new"] = likelihood.sample(draw_key, f_star.shape[:1], logits)
        values[f"{target}_prob"] = jax.nn.softmax(logits, axis=-1)
        return values

    def from_moments(theta, moments, draw_key, draw):
        latent_key, label_key = jax.random.split(draw_key)
        return from_latent(theta, draw(latent_key, *moments, joint), label_key)

    keys = draw_keys(key, theta_draws)
    if f_draws is None:
        batch = draw_batch(len(X_new) * problem.columns) if joint else 256
        values = over_draws(lambda t, k: from_moments(
            t, column_laplace_moments(problem, t, X_new, tol, full=joint), k, _draw_classes),
            theta_draws, keys, batch=batch)
    else:
        batch = draw_batch(len(X_new)) if joint else 256
        values = over_draws(lambda t, f, k: from_moments(
            t, column_conditional_moments(problem, t, f, X_new, full=joint), k, _draw_columns),
            theta_draws, f_draws, keys, batch=batch)
    if joint:
        check_draws(values[f"{problem.name}_new"], f"{problem.name}_new")
    return values
