"""Predictions of a fitted Bayesian GPLVM (Damianou, Titsias & Lawrence 2016, Sec. 4.1).

* :func:`project_new` finds ``q(X*)`` for new, possibly partially observed, outputs with ``q(X)``,
  the inducing inputs and the hyperparameters held fixed, by maximising the bound of the augmented
  data ``(Y, Y*)`` (eq. 52), and returns the density approximation
  ``log p(Y*^o | Y) ~ F(q(X), q(X*)) - F(q(X))`` (eq. 36).
* :func:`reconstruct` gives the mean and covariance of unobserved output columns at ``q(X*)``
  (eqs. 37-41), through :mod:`gpdsl.inference.predict.uncertain_inputs`.
* :func:`predict_latent_function` is the projected-process prediction at fixed latent points
  (eq. 39), used for the predictive-variance background of latent-space plots.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import jax
import jax.numpy as jnp
import numpy as np
import scipy.optimize
from jax.flatten_util import ravel_pytree

from gpdsl.errors import DataError, MethodError
from gpdsl.inference.families.gplvm import GPLVMProblem
from gpdsl.inference.predict.uncertain_inputs import (cross_moments, gaussian_input_moments, inducing_posterior,
                                                       point_moments, predictive_moments)
from gpdsl.inference.variational.latent_q import FactorisedGaussian, GaussianQParams
from gpdsl.inference.variational.vem import (
    VariationalParams,
    VEMFit,
    make_objective,
)
from gpdsl.kernels.psi import psi_statistics
from gpdsl.kernels.psi.hsgp import inducing_feature_cross, inducing_feature_statistics
from gpdsl.numerics import GP_JITTER


@dataclass
class Projection:
    """``q(X*)`` of new outputs.

    Attributes
    ----------
    mean, variance : numpy.ndarray
        ``(n*, Q)`` means and variances of ``q(X*)``.
    log_density : float
        ``F(q(X), q(X*)) - F(q(X))``, the approximation of ``log p(Y*^o | Y)`` (eq. 36).
    report : dict
        The optimiser's ``iterations``, ``converged`` and ``message``.
    """

    mean: np.ndarray
    variance: np.ndarray
    log_density: float
    report: dict


def _check_new_outputs(problem: GPLVMProblem, Y_new) -> np.ndarray:
    Y_new = np.asarray(Y_new, dtype=float)
    if Y_new.ndim == 1:
        Y_new = Y_new[None, :]
    if Y_new.ndim != 2 or Y_new.shape[1] != problem.output_dim:
        raise DataError(f"new outputs for '{problem.output}' must have shape (n, {problem.output_dim}); "
                        f"got {Y_new.shape}")
    if np.isinf(Y_new).any():
        raise DataError(f"new outputs for '{problem.output}' contain infinite values")
    if np.isnan(Y_new).all(axis=1).any():
        raise DataError(f"a row of the new outputs for '{problem.output}' is entirely missing; "
                        "q(X*) of such a row is the prior")
    return Y_new


def _augmented(fit: VEMFit, Y_new: np.ndarray) -> GPLVMProblem:
    return replace(fit.problem, Y=np.vstack([fit.problem.Y, Y_new]))


def _nearest_neighbour_init(fit: VEMFit, Y_new: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    Y = fit.problem.Y
    observed = ~np.isnan(Y_new)
    means, variances = fit.mean, fit.variance
    rows = []
    for y, mask in zip(Y_new, observed):
        diff = np.where(np.isnan(Y[:, mask]), 0.0, Y[:, mask] - y[mask])
        rows.append(int(np.argmin(np.sum(diff ** 2, axis=1))))
    return means[rows], variances[rows]


def project_new(fit: VEMFit, Y_new, *, max_iterations: int = 500) -> Projection:
    """Fit ``q(X*)`` to new outputs with everything else fixed (see the module docstring).

    Parameters
    ----------
    fit : VEMFit
        The trained model.
    Y_new : array_like, shape (n*, D)
        New outputs; NaN marks unobserved entries (each row needs one observed entry).
    max_iterations : int
        L-BFGS-B iterations.

    Returns
    -------
    Projection

    Raises
    ------
    MethodError
        The fit's ``q(X)`` is not a factorised Gaussian (its points are not independent).
    """
    if not isinstance(fit.latent_q, FactorisedGaussian):
        raise MethodError(f"projecting new outputs needs a factorised Gaussian q(X); this fit's q(X) is "
                          f"{type(fit.latent_q).__name__}")
    Y_new = _check_new_outputs(fit.problem, Y_new)
    augmented = _augmented(fit, Y_new)
    objective = make_objective(augmented, fit.settings, fit.latent_q)
    train_objective = make_objective(fit.problem, fit.settings, fit.latent_q)
    params = fit.params
    mean0, variance0 = _nearest_neighbour_init(fit, Y_new)
    start = (jnp.asarray(mean0), jnp.log(jnp.asarray(variance0)))
    flat0, unravel = ravel_pytree(start)

    def full(new):
        mean_new, log_var_new = new
        latent = GaussianQParams(jnp.vstack([params.latent.mean, mean_new]),
                                 jnp.vstack([params.latent.log_variance, log_var_new]))
        return VariationalParams(latent, params.inducing, params.theta)

    @jax.jit
    def negative_and_gradient(flat):
        return jax.value_and_grad(lambda v: -objective(full(unravel(v))))(flat)

    def fun(x):
        value, grad = negative_and_gradient(jnp.asarray(x))
        return (float(value), np.asarray(grad)) if np.isfinite(float(value)) else (np.inf, np.zeros_like(x))

    result = scipy.optimize.minimize(fun, np.asarray(flat0), jac=True, method="L-BFGS-B",
                                     options={"maxiter": max_iterations, "ftol": 1e-12, "gtol": 1e-8})
    mean_new, log_var_new = unravel(jnp.asarray(result.x))
    log_density = -float(result.fun) - float(train_objective(params))
    message = result.message if isinstance(result.message, str) else result.message.decode()
    return Projection(np.asarray(mean_new), np.exp(np.asarray(log_var_new)), log_density,
                      {"iterations": int(result.nit), "converged": bool(result.success), "message": message})


def _inducing_posterior(fit: VEMFit, columns: np.ndarray):
    """The kernel and ``q(u)`` of the requested columns, each from the training rows observed in it (eq. 39)."""
    problem, params = fit.problem, fit.params
    kernel = problem.kernel(params.theta)
    observed = problem.observed[:, columns]
    weights = jnp.asarray(observed, dtype=float)
    q = fit.latent_q.moments(params.latent, params.theta)
    stats, Kuu = _statistics(fit, kernel, q.mean, q.variance, weights)
    Y = jnp.where(jnp.asarray(observed), jnp.asarray(np.nan_to_num(problem.Y[:, columns])), 0.0)
    # the basis weights of an HSGP kernel have Kuu = I exactly: no jitter
    posterior = inducing_posterior(Kuu, stats.psi1, stats.psi2, Y, problem.noise_variance(params.theta),
                                   jitter=0.0 if problem.inducing_features else GP_JITTER)
    return kernel, posterior


def _statistics(fit: VEMFit, kernel, mean, variance, weights):
    """The Psi statistics and ``Kuu`` (no jitter) of the fit's inducing inputs, or of the basis weights of an HSGP
    kernel (:func:`~gpdsl.kernels.psi.hsgp.inducing_feature_statistics`)."""
    if fit.problem.inducing_features:
        return inducing_feature_statistics(kernel, mean, variance, fit.settings.psi_method(), key=_key(fit),
                                           row_weights=weights)
    Z = fit.params.inducing
    return psi_statistics(kernel, Z, mean, variance, fit.settings.psi_method(), key=_key(fit),
                          row_weights=weights), kernel(Z)


def _key(fit: VEMFit):
    return jax.random.PRNGKey(fit.settings.seed) if fit.settings.psi == "monte_carlo" else None


def reconstruct(fit: VEMFit, projection: Projection, columns) -> tuple[np.ndarray, np.ndarray]:
    """Mean and covariance of output columns at ``q(X*)`` (eqs. 40-41, noise included).

    Parameters
    ----------
    fit : VEMFit
        The trained model.
    projection : Projection
        ``q(X*)`` from :func:`project_new` (or any object with ``mean`` and ``variance`` of shape (n*, Q)).
    columns : sequence of int
        The output columns to reconstruct (0-based), typically the unobserved ones.

    Returns
    -------
    mean : numpy.ndarray, shape (n*, J)
    covariance : numpy.ndarray, shape (n*, J, J)
        Covariance between the reconstructed columns at each test point.
    """
    columns = np.asarray(columns, dtype=int)
    kernel, posterior = _inducing_posterior(fit, columns)
    if fit.problem.inducing_features:
        mean = jnp.asarray(projection.mean, dtype=float)
        stats, _ = _statistics(fit, kernel, mean, jnp.asarray(projection.variance, dtype=float),
                               jnp.eye(mean.shape[0]))
        mean, cov = gaussian_input_moments(posterior, stats.psi0, stats.psi1, stats.psi2)
    else:
        mean, cov = predictive_moments(posterior, kernel, fit.params.inducing, jnp.asarray(projection.mean),
                                       jnp.asarray(projection.variance), fit.settings.psi_method(), key=_key(fit))
    return np.asarray(mean), np.asarray(cov)


def predict_latent_function(fit: VEMFit, X_new, columns=None) -> tuple[np.ndarray, np.ndarray]:
    """Projected-process mean and variance of ``F`` at fixed latent points (eq. 39, no noise).

    Parameters
    ----------
    fit : VEMFit
        The trained model.
    X_new : array_like, shape (n*, Q)
        Latent points.
    columns : sequence of int, optional
        Output columns (all by default).

    Returns
    -------
    mean : numpy.ndarray, shape (n*, J)
    variance : numpy.ndarray, shape (n*, J)
    """
    columns = np.arange(fit.problem.output_dim) if columns is None else np.asarray(columns, dtype=int)
    kernel, posterior = _inducing_posterior(fit, columns)
    X_new = jnp.asarray(X_new, dtype=float)
    if fit.problem.inducing_features:
        mean, variance = cross_moments(posterior, inducing_feature_cross(kernel, X_new), kernel.diag(X_new))
    else:
        mean, variance = point_moments(posterior, kernel, fit.params.inducing, X_new)
    return np.asarray(mean), np.asarray(variance)


def latent_relevance(fit: VEMFit) -> np.ndarray:
    """Relevance of each latent dimension, shape ``(Q,)``.

    The ARD weights of the kernel when one kernel argument over the latent inputs is a per-dimension
    parameter (``inv_ls2`` as it is, ``lengthscale`` as ``1 / lengthscale^2``); otherwise the variance
    of the variational means along each dimension.
    """
    from gpdsl.ir import nodes as ir

    Q = fit.problem.latent_dim
    values = fit.hyperparameters()
    for leaf in fit.problem.node.statement.kernel.leaves():
        for arg, expr in leaf.params:
            if isinstance(expr, ir.Ref) and expr.name in values and np.shape(values[expr.name]) == (Q,):
                if arg == "inv_ls2":
                    return np.asarray(values[expr.name], dtype=float)
                if arg == "lengthscale":
                    return 1.0 / np.asarray(values[expr.name], dtype=float) ** 2
    return np.var(fit.mean, axis=0)


def most_relevant_dims(fit: VEMFit, count: int = 2) -> list[int]:
    """The ``count`` latent dimensions of largest :func:`latent_relevance`, most relevant first."""
    return [int(i) for i in np.argsort(-latent_relevance(fit))[:count]]


def latent_variance_grid(fit: VEMFit, dims, resolution: int = 60, margin: float = 0.1):
    """Predictive variance of ``F`` over a grid spanning two latent dimensions (others at 0).

    Returns
    -------
    grid_x, grid_y : numpy.ndarray, shape (resolution,)
    variance : numpy.ndarray, shape (resolution, resolution)
        Mean over output columns of the variance of eq. 39; rows follow ``grid_y``.
    """
    mean = fit.mean
    axes = []
    for d in dims:
        low, high = mean[:, d].min(), mean[:, d].max()
        pad = margin * (high - low if high > low else 1.0)
        axes.append(np.linspace(low - pad, high + pad, resolution))
    gx, gy = np.meshgrid(*axes)
    points = np.zeros((gx.size, fit.problem.latent_dim))
    points[:, dims[0]] = gx.ravel()
    points[:, dims[1]] = gy.ravel()
    _, variance = predict_latent_function(fit, points)
    return axes[0], axes[1], variance.mean(axis=1).reshape(gx.shape)
