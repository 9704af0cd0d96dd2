"""GP regression with missing inputs, semi-supervised (Damianou, Titsias & Lawrence 2016, Sec. 6.2, App. E).

The inputs are the latent inputs of a Bayesian GPLVM (``X ~ normal(0, 1)``, standardised inputs), whose
known entries are held at their values: ``q(x_nq) = N(z_nq, epsilon)`` where ``z_nq`` is observed, free
where it is missing (:class:`PartlyKnownGaussian`). :func:`fit_with_missing_inputs` follows Algorithm 1 of
App. E:

1. fit the model on the fully observed rows alone (``M^o``, close to sparse GP regression);
2. initialise the missing entries of the other rows by "partial self-training": ``q`` of those entries
   fitted to their outputs under ``M^o`` with everything else fixed (``init="posterior"``), or at the
   prior, mean 0 and variance 1 (``init="prior"``);
3. fit all rows together (``M^{o,u}``) from ``M^o``'s hyperparameters and inducing inputs, the known
   entries held fixed.

Step 2 fits the partially observed rows jointly rather than one at a time (they interact only through
the collapsed ``q(u)``). Predictions at new, fully observed inputs are the projected-process predictive
(eq. 39) plus the noise.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import jax
import jax.numpy as jnp
import numpy as np
import scipy.optimize
from jax.flatten_util import ravel_pytree

from gpdsl.errors import DataError, MethodError
from gpdsl.inference.variational.latent_q import (
    FactorisedGaussian,
    GaussianQParams,
    LatentMoments,
    kl_standard_normal,
)
from gpdsl.inference.variational.vem import (
    VariationalParams,
    VEMFit,
    fit_vem,
    initial_hyperparameters,
    make_objective,
)

KNOWN_VARIANCE = 1e-9


class PartlyKnownGaussian(FactorisedGaussian):
    """A factorised Gaussian ``q(X)`` whose known entries are fixed at ``N(value, epsilon)``.

    Parameters
    ----------
    known : array_like, shape (N, Q)
        Known values, NaN where the entry is free.
    epsilon : float
        Variance of the known entries (App. E: 1e-9).
    """

    def __init__(self, known, epsilon: float = KNOWN_VARIANCE):
        known = np.asarray(known, dtype=float)
        self.mask = jnp.asarray(~np.isnan(known))
        self.values = jnp.asarray(np.nan_to_num(known))
        self.epsilon = epsilon

    def _fix(self, mean, variance) -> LatentMoments:
        return LatentMoments(jnp.where(self.mask, self.values, mean), jnp.where(self.mask, self.epsilon, variance))

    def initial(self, mean, theta, init_variance=None):
        free = super().initial(mean, theta, init_variance)
        mask = np.asarray(self.mask)
        return GaussianQParams(np.where(mask, np.asarray(self.values), free.mean),
                               np.where(mask, np.log(self.epsilon), free.log_variance))

    def moments(self, params, theta, xp=jnp):
        moments = self._fix(jnp.asarray(params.mean), jnp.exp(jnp.asarray(params.log_variance)))
        return LatentMoments(*(np.asarray(m) for m in moments)) if xp is np else moments

    def kl(self, params, theta, moments=None):
        moments = moments if moments is not None else self.moments(params, theta)
        return kl_standard_normal(moments.mean, moments.variance)

    def unconstrained_moments(self, coordinates, theta):
        return self._fix(coordinates.mean, jax.nn.softplus(coordinates.softplus_variance))


@dataclass
class MissingInputsFit:
    """The fits of :func:`fit_with_missing_inputs`.

    Attributes
    ----------
    fit : VEMFit
        ``M^{o,u}``: all rows, the missing entries inferred.
    observed_fit : VEMFit
        ``M^o``: the fully observed rows alone (a sparse GP regression on them).
    """

    fit: VEMFit
    observed_fit: VEMFit


def fit_with_missing_inputs(problem, inputs, settings, *, init: str = "posterior",
                            epsilon: float = KNOWN_VARIANCE) -> MissingInputsFit:
    """Fit a GP regression whose training inputs have missing entries (see the module docstring).

    Parameters
    ----------
    problem : GPLVMProblem
        A Bayesian GPLVM (``X ~ normal(0, 1)``) over all training rows; its latent inputs are the inputs.
    inputs : array_like, shape (N, Q)
        The inputs, standardised, with NaN for the missing entries; at least one row fully observed.
    settings : VEMSettings
        Options of both fits (``num_inducing`` at most the number of fully observed rows).
    init : {"posterior", "prior"}
        How the missing entries start (step 2).
    epsilon : float
        Variance of the known entries.

    Returns
    -------
    MissingInputsFit
    """
    inputs = _check_inputs(problem, inputs)
    if init not in ("posterior", "prior"):
        raise MethodError(f"init must be 'posterior' or 'prior'; got {init!r}")
    complete = ~np.isnan(inputs).any(axis=1)
    observed_fit = fit_with_known_inputs(replace(problem, Y=problem.Y[complete]), inputs[complete], settings,
                                         epsilon=epsilon)

    all_q = PartlyKnownGaussian(inputs, epsilon)
    latent = all_q.initial(np.zeros_like(inputs), None, 1.0)
    if init == "posterior" and (~complete).any():
        latent = _self_trained(problem, all_q, latent, observed_fit, settings)
    start = VariationalParams(jax.tree_util.tree_map(jnp.asarray, latent), observed_fit.params.inducing,
                              observed_fit.params.theta)
    fit = fit_vem(problem, settings, initial=start, latent_q=all_q)
    return MissingInputsFit(fit, observed_fit)


def fit_with_known_inputs(problem, inputs, settings, *, epsilon: float = KNOWN_VARIANCE) -> VEMFit:
    """Sparse GP regression as a Bayesian GPLVM whose inputs are all known (step 1 of Algorithm 1).

    The inducing inputs start at a random subset of the inputs (seeded by ``settings.seed``), the
    hyperparameters at the fit's heuristics (:func:`~gpdsl.inference.variational.vem.initial_hyperparameters`).
    """
    inputs = np.asarray(inputs, dtype=float)
    latent_q = PartlyKnownGaussian(inputs, epsilon)
    rng = np.random.default_rng(settings.seed)
    inducing = inputs[rng.permutation(inputs.shape[0])[:settings.num_inducing]]
    theta = problem.unconstrain_theta(initial_hyperparameters(problem, inputs, settings))
    start = VariationalParams(latent_q.initial(inputs, theta, epsilon), jnp.asarray(inducing), theta)
    return fit_vem(problem, settings, initial=start, latent_q=latent_q)


def _self_trained(problem, latent_q, latent, observed_fit, settings, max_iterations: int = 500):
    """Step 2: ``q`` of the missing entries fitted to their rows' outputs with ``M^o`` fixed."""
    objective = make_objective(problem, settings, latent_q)
    params = observed_fit.params
    coordinates = latent_q.unconstrain(latent, jnp)
    flat0, unravel = ravel_pytree(coordinates)

    @jax.jit
    def negative_and_gradient(flat):
        return jax.value_and_grad(
            lambda v: -objective(VariationalParams(latent_q.constrain(unravel(v)), params.inducing, params.theta)))(flat)

    result = scipy.optimize.minimize(lambda x: tuple(np.asarray(v) for v in negative_and_gradient(jnp.asarray(x))),
                                     np.asarray(flat0), jac=True, method="L-BFGS-B",
                                     options={"maxiter": max_iterations})
    return latent_q.constrain(unravel(jnp.asarray(result.x)), np)


def _check_inputs(problem, inputs) -> np.ndarray:
    inputs = np.asarray(inputs, dtype=float)
    shape = (problem.num_points, problem.latent_dim)
    if inputs.shape != shape:
        raise DataError(f"the inputs must have shape {shape} (a row per output row, a column per latent "
                        f"dimension of '{problem.latent}'); got {inputs.shape}")
    if np.isinf(inputs).any():
        raise DataError("the inputs contain infinite values; mark missing entries with NaN")
    if np.isnan(inputs).any(axis=1).all():
        raise DataError("no training row has all its inputs: at least one fully observed row is needed")
    return inputs
