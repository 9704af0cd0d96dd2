"""Predictions of a GPLVM whose latent inputs have a GP prior (Damianou, Titsias & Lawrence 2016, Sec. 4.2, App. D.1).

* :func:`forecast` gives ``q(X*)`` at new prior inputs (new times, new observed inputs) with no
  optimisation: each latent dimension is the GP posterior given the sites of ``q(X)``,
  ``q(x*_q) = N(K*n mu_bar_q, K** - K*n (K + Lambda_q^-1)^-1 Kn*)``.
* :func:`project_with_prior` fits ``q(X, X*)`` jointly to new, partially observed outputs at new prior
  inputs (``q`` does not factorise over points, so all ``2 (N + N*) Q`` parameters move; the kernel,
  noise and inducing inputs stay fixed) and returns the density approximation
  ``log p(Y*^o | Y) ~ F(q(X, X*)) - F(q(X))`` (eq. 36).
* :func:`predict_outputs` adds the predictive mean and covariance of every output column at ``q(X*)``
  (eqs. 40-41), for either kind of GPLVM.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.data.new_inputs import input_matrix
from gpdsl.errors import DataError, MethodError
from gpdsl.inference.families.gplvm import GPLVMProblem
from gpdsl.inference.predict.gplvm import Projection, project_new, reconstruct
from gpdsl.inference.variational.gp_prior_q import (
    GPPriorGaussian,
    GPPriorQParams,
    site_factor,
)
from gpdsl.inference.variational.latent_q import FactorisedGaussian, GaussianQParams
from gpdsl.inference.variational.site_updates import make_site_updates
from gpdsl.inference.variational.vem import VariationalParams, VEMFit
from gpdsl.numerics.linalg import solve_triangular
from gpdsl.numerics import GP_JITTER

NEW_SITE_PRECISION = 1e-6


@dataclass
class OutputPrediction:
    """Predictions of a GPLVM at new points.

    Attributes
    ----------
    latent : Projection
        ``q(X*)``: means and variances ``(n*, Q)``; ``log_density`` is NaN for a forecast without outputs.
    mean : numpy.ndarray, shape (n*, D)
        Predictive means of the outputs.
    covariance : numpy.ndarray, shape (n*, D, D)
        Predictive covariance between the output columns at each new point, noise included.
    """

    latent: Projection
    mean: np.ndarray
    covariance: np.ndarray

    @property
    def variance(self) -> np.ndarray:
        """Predictive variances of the outputs, shape ``(n*, D)``."""
        return np.diagonal(self.covariance, axis1=1, axis2=2).copy()


@dataclass
class JointProjection(Projection):
    """``q(X*)`` fitted jointly with ``q(X)``, with the training points' new marginals.

    Attributes
    ----------
    training_mean, training_variance : numpy.ndarray
        ``(N, Q)`` marginals of the training points under ``q(X, X*)``: new outputs at nearby inputs move
        them too, and predictions must use them with ``q(X*)`` (one coordinate system).
    """

    training_mean: np.ndarray | None = None
    training_variance: np.ndarray | None = None


def prior_points(fit: VEMFit | GPLVMProblem, new_inputs) -> np.ndarray:
    """New inputs of the latent inputs' GP prior as points ``(n*, d)``, in the layout of the training inputs.

    Parameters
    ----------
    fit : VEMFit or GPLVMProblem
        A GPLVM with a GP prior on its latent inputs (or a fit of one).
    new_inputs : array_like or mapping
        The points, or their components by the names the model gives them (``{"t": ..., "sequence": ...}``
        for ``gp((t, sequence), ...)``).

    Raises
    ------
    MethodError
        The fit's latent inputs have no GP prior.
    DataError
        Missing components, or shapes that do not match the training inputs.
    """
    problem = fit if isinstance(fit, GPLVMProblem) else fit.problem
    if problem.latent_prior is None:
        raise MethodError(f"'{problem.latent}' has no GP prior, so there are no new inputs to predict at; "
                          "give new outputs instead (their q(X*) is fitted to them)")
    inputs = problem.latent_prior.statement.inputs
    width = problem.latent_prior_inputs().shape[1]
    if isinstance(new_inputs, Mapping):
        new_inputs = _points_from_components(inputs, new_inputs)
    return input_matrix(new_inputs, width,
                        f"new inputs of the GP prior of '{problem.latent}' (like {_describe(inputs)})")


def count_points(new_inputs) -> int:
    """The number of new points in ``new_inputs``: the rows of an array, or of the first value of a mapping
    (the components of the inputs, or new outputs)."""
    if isinstance(new_inputs, Mapping):
        new_inputs = next(iter(new_inputs.values()), ())
    return len(np.atleast_1d(np.asarray(new_inputs, dtype=object)))


def _points_from_components(inputs, values: Mapping) -> np.ndarray:
    names = [name for name in inputs.names]
    if None in names:
        raise DataError("this GP prior's inputs are expressions, not named variables: give the new points as a "
                        f"matrix with the columns of {_describe(inputs)}")
    missing = [name for name in names if name not in values]
    if missing:
        raise DataError(f"the new inputs lack {', '.join(missing)} (the GP prior is over {_describe(inputs)})")
    columns = [np.asarray(values[name], dtype=float) for name in names]
    columns = [c[:, None] if c.ndim == 1 else c for c in columns]
    lengths = {c.shape[0] for c in columns}
    if len(lengths) != 1 or any(c.ndim != 2 for c in columns):
        raise DataError(f"the new inputs {', '.join(names)} must have one row per new point; got shapes "
                        f"{', '.join(str(c.shape) for c in columns)}")
    return np.concatenate(columns, axis=1)


def _describe(inputs) -> str:
    names = [name or "?" for name in inputs.names]
    return names[0] if len(names) == 1 else "(" + ", ".join(names) + ")"


def forecast(fit: VEMFit, new_inputs) -> Projection:
    """``q(X*)`` at new prior inputs from the fitted sites alone (Sec. 4.2; see the module docstring).

    Parameters
    ----------
    fit : VEMFit
        A fit of a GPLVM with a GP prior on its latent inputs.
    new_inputs : array_like or mapping
        See :func:`prior_points`.

    Returns
    -------
    Projection
        Means and variances ``(n*, Q)``; ``log_density`` is NaN.
    """
    points = jnp.asarray(prior_points(fit, new_inputs))
    kernel = fit.problem.latent_prior_kernel(fit.params.theta)
    T = jnp.asarray(fit.problem.latent_prior_inputs())
    K = fit.problem.latent_prior_covariance(fit.params.theta)
    cross = kernel.cross(T, points)                                        # (N, n*)
    prior_variance = kernel.diag(points)                                   # (n*,)
    params = fit.params.latent
    mean = cross.T @ params.mu_bar

    def variance_of(lam_q):
        root, chol_b = site_factor(K, lam_q)
        V = solve_triangular(chol_b, root[:, None] * cross, lower=True)
        return prior_variance - jnp.sum(V * V, axis=0)

    variance = jax.vmap(variance_of, in_axes=1, out_axes=1)(params.lam)
    return Projection(np.asarray(mean), np.maximum(np.asarray(variance), 0.0), float("nan"),
                      {"iterations": 0, "converged": True, "message": "forecast from the fitted sites"})


def project_with_prior(fit: VEMFit, new_inputs, Y_new, *, max_iterations: int = 2000) -> Projection:
    """Fit ``q(X, X*)`` to partially observed new outputs at new prior inputs (App. D.1; see the module docstring).

    Both ``q(X, X*)`` and, for the reference value, ``q(X)`` alone are optimised by natural-gradient site
    updates (:mod:`~gpdsl.inference.variational.site_updates`) at the fit's hyperparameters and inducing
    inputs, so the difference of the two bounds compares optima found the same way.

    Parameters
    ----------
    fit, new_inputs
        As in :func:`forecast`.
    Y_new : array_like, shape (n*, D)
        New outputs; NaN marks unobserved entries (a row may be entirely unobserved).
    max_iterations : int
        Site updates at most, for each of the two optimisations.

    Returns
    -------
    JointProjection
        The new points' marginals of ``q(X, X*)`` and ``log p(Y*^o | Y)`` approximated by eq. 36. The
        joint optimisation starts at the fit's sites and the :func:`forecast` of the new points.
    """
    problem = fit.problem
    points = prior_points(fit, new_inputs)
    Y_new = _check_outputs(fit, Y_new, points.shape[0])
    T_all = jnp.asarray(np.vstack([problem.latent_prior_inputs(), points]))
    def joint_covariance(theta):
        return problem.latent_prior_kernel(theta)(T_all) + GP_JITTER * jnp.eye(T_all.shape[0])

    joint_q = GPPriorGaussian(joint_covariance)
    joint_problem = replace(problem, Y=np.vstack([problem.Y, Y_new]))
    params = fit.params
    n_new, Q = Y_new.shape[0], problem.latent_dim
    start = GPPriorQParams(jnp.vstack([params.latent.mu_bar, jnp.zeros((n_new, Q))]),
                           jnp.vstack([params.latent.lam, jnp.full((n_new, Q), NEW_SITE_PRECISION)]))
    joint = jax.jit(make_site_updates(joint_problem, fit.settings, joint_q, max_iterations=max_iterations))(
        start, params.inducing, params.theta)
    training = jax.jit(make_site_updates(problem, fit.settings, max_iterations=max_iterations))(
        params.latent, params.inducing, params.theta)
    moments = joint_q.moments(joint.latent, params.theta)
    N = problem.num_points
    converged = bool(joint.converged) and bool(training.converged)
    report = {"iterations": int(joint.iterations), "converged": converged,
              "message": "site updates converged" if converged else "site updates stopped at the limit"}
    return JointProjection(np.asarray(moments.mean[N:]), np.asarray(moments.variance[N:]),
                           float(joint.bound) - float(training.bound), report,
                           np.asarray(moments.mean[:N]), np.asarray(moments.variance[:N]))


def _check_outputs(fit: VEMFit, Y_new, n_new: int) -> np.ndarray:
    problem = fit.problem
    Y_new = np.asarray(Y_new, dtype=float)
    if Y_new.ndim == 1:
        Y_new = Y_new[None, :]
    if Y_new.shape != (n_new, problem.output_dim):
        raise DataError(f"new outputs for '{problem.output}' must have shape ({n_new}, {problem.output_dim}), one "
                        f"row per new input; got {Y_new.shape}")
    if np.isinf(Y_new).any():
        raise DataError(f"new outputs for '{problem.output}' contain infinite values")
    return Y_new


def predict_outputs(fit: VEMFit, new_inputs=None, Y_new=None, *, max_iterations: int = 2000) -> OutputPrediction:
    """``q(X*)`` and the predictive mean and covariance of the outputs at new points.

    With a GP prior on the latent inputs, ``new_inputs`` are required: without ``Y_new`` (or with every
    entry missing) ``q(X*)`` is the :func:`forecast`, otherwise it is fitted jointly
    (:func:`project_with_prior`). Without a GP prior, ``Y_new`` is required and ``q(X*)`` is fitted to it
    (:func:`~gpdsl.inference.predict.gplvm.project_new`). Unobserved entries of ``Y_new`` (NaN) are
    reconstructed: their predictive moments are those of the returned columns.

    Parameters
    ----------
    fit : VEMFit
        The trained model.
    new_inputs : array_like or mapping, optional
        New prior inputs (:func:`prior_points`).
    Y_new : array_like, shape (n*, D), optional
        New outputs with NaN for the unobserved entries.
    max_iterations : int
        Iterations at most when ``q(X*)`` is fitted.

    Returns
    -------
    OutputPrediction

    Raises
    ------
    MethodError
        Neither new inputs nor new outputs are given where the model needs them.
    """
    if fit.problem.latent_prior is None:
        if new_inputs is not None:
            raise MethodError(f"'{fit.problem.latent}' has no GP prior, so there are no new inputs to predict at; "
                              "give new outputs instead")
        if Y_new is None:
            raise MethodError(f"predictions of a Bayesian GPLVM need new outputs for '{fit.problem.output}' "
                              "(NaN where unobserved): q(X*) is fitted to them")
        latent = project_new(fit, Y_new, max_iterations=min(max_iterations, 500))
    elif new_inputs is None:
        raise MethodError(f"predictions need new inputs of the GP prior of '{fit.problem.latent}'")
    elif Y_new is None or np.isnan(np.asarray(Y_new, dtype=float)).all():
        latent = forecast(fit, new_inputs)
    else:
        latent = project_with_prior(fit, new_inputs, Y_new, max_iterations=max_iterations)
    mean, covariance = reconstruct(_with_training_marginals(fit, latent), latent, np.arange(fit.problem.output_dim))
    return OutputPrediction(latent, mean, covariance)


def _with_training_marginals(fit: VEMFit, latent: Projection) -> VEMFit:
    """The fit with ``q(X)`` replaced by the training marginals of a joint projection (the rest unchanged)."""
    if not isinstance(latent, JointProjection):
        return fit
    marginals = GaussianQParams(jnp.asarray(latent.training_mean), jnp.log(jnp.asarray(latent.training_variance)))
    params = VariationalParams(marginals, fit.params.inducing, fit.params.theta)
    return replace(fit, params=params, latent_q=FactorisedGaussian())
