"""The Student-t process's predictive at new inputs (Shah, Wilson & Ghahramani 2014, the conditional MVT).

With ``C = K + s^2 I`` over the ``n`` training points, ``beta = y' C^-1 y`` and the GP regression moments
``mean = K*' C^-1 y``, ``A = K** - K*' C^-1 K*`` (noise excluded), the predictive of ``f*`` given ``y`` is
``MVT(nu + n, mean, (nu + beta - 2) / (nu + n - 2) A)`` with that covariance, and of ``y*`` the same with
``A + s^2 I`` (the noise lies inside the process's kernel, so it is scaled too).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from gpdsl.inference.families.student_t_process import StudentTProcessRegression
from gpdsl.inference.predict.gp_regression import exact_moments, exact_posterior


def student_t_process_moments(problem: StudentTProcessRegression, theta, X_new, full: bool = False):
    """The predictive at ``X_new`` at hyperparameters ``theta`` (traceable).

    Returns
    -------
    mean : jax.Array (m,)
    f_covariance : jax.Array
        Covariance of ``f*`` (noise excluded): ``(m,)`` variances, or ``(m, m)`` with ``full``.
    noise_variance : jax.Array
        The noise's share of the covariance of ``y*``: ``s^2`` times the Student-t factor.
    dof : jax.Array
        Degrees of freedom ``nu + n``.
    """
    y = jnp.asarray(problem.y)
    kernel, X = problem.kernel(theta), problem.inputs(theta)
    posterior = exact_posterior(kernel, X, y, problem.noise_variance(theta))
    mean, f_covariance = exact_moments(posterior, kernel, X, X_new, include_noise=False, full=full)
    nu, n = problem.dof(theta), y.shape[0]
    factor = (nu + y @ posterior.alpha - 2) / (nu + n - 2)
    return mean, factor * f_covariance, factor * posterior.noise_variance, nu + n


def student_t_draw(key, dof, shape) -> jax.Array:
    """Draws of the mixing scale ``w = dof / chi2_dof`` (``z sqrt(w (dof - 2) / dof)``, ``z ~ N(0, V)``, is Student-t
    with covariance ``V``)."""
    return dof / (2.0 * jax.random.gamma(key, dof / 2, shape))
