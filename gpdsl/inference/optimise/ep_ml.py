"""Type-II maximum likelihood on the EP marginal (the paper's EP-ML comparison method)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from scipy.optimize import minimize

from gpdsl.inference.approximations import state_space
from gpdsl.inference.approximations.ep import check_ep_likelihood, ep
from gpdsl.inference.approximations.weight_space import ep_weights
from gpdsl.inference.families.latent_gp import LatentGP
from gpdsl.inference.families.state_space_latent import StateSpaceLatent


def ep_type2_ml(problem: LatentGP, starts, tol=None, max_sweeps: int = 100):
    """Maximise the EP approximation of ``log p(y | theta)`` over unconstrained ``theta``.

    For a sampled vector read through a linear map (an HSGP's weights) the EP is that of the weights
    (:func:`~gpdsl.inference.approximations.weight_space.ep_weights`, parallel sweeps); for a latent state-space GP,
    EP by Kalman smoothing (:func:`~gpdsl.inference.approximations.state_space.ep`, ``O(N)`` a sweep). EP's
    fixed-point iterations are not differentiated through, so the optimiser is derivative-free (Nelder-Mead on the
    unconstrained scale), restarted from each row of ``starts``; the best optimum is
    returned.

    Parameters
    ----------
    problem : LatentGP
        The model view (probit likelihood).
    starts : array_like, shape (k, p)
        Starting points.

    Returns
    -------
    theta : numpy.ndarray, shape (p,)
    log_marginal : float
    report : dict
        Iterations, evaluations and convergence flag of the best run, and the number of starts.
    """
    check_ep_likelihood(problem.likelihood)
    y = jnp.asarray(problem.y)
    if isinstance(problem, StateSpaceLatent):
        objective = jax.jit(lambda theta: -_state_space_ep(problem, y, theta, tol, max_sweeps).log_marginal)
    elif problem.mapped:
        objective = jax.jit(lambda theta: -ep_weights(problem.likelihood_operator(theta), y, problem.likelihood,
                                                      tol=tol,
                                                      max_sweeps=max_sweeps, offset=problem.location_offset(theta),
                                                      args=problem.likelihood_arguments(theta)).log_marginal)
    else:
        objective = jax.jit(lambda theta: -ep(problem.covariance(theta), y, tol=tol, max_sweeps=max_sweeps,
                                              offset=problem.location_offset(theta), likelihood=problem.likelihood,
                                              args=problem.likelihood_arguments(theta)).log_marginal)

    def safe(theta):
        value = float(objective(jnp.asarray(theta)))
        return value if np.isfinite(value) else 1e300

    best = None
    for start in np.atleast_2d(np.asarray(starts)):
        result = minimize(safe, start, method="Nelder-Mead",
                          options={"xatol": 1e-6, "fatol": 1e-8, "maxiter": 2000 * len(start)})
        if best is None or result.fun < best.fun:
            best = result
    report = {"iterations": int(best.nit), "evaluations": int(best.nfev), "converged": bool(best.success),
              "message": str(best.message), "starts": int(np.atleast_2d(starts).shape[0])}
    return best.x, -float(best.fun), report


def _state_space_ep(problem: StateSpaceLatent, y, theta, tol, max_sweeps: int):
    """Parallel EP of a latent state-space GP at ``theta`` by Kalman smoothing along its times."""
    return state_space.ep(problem.kernel(theta), problem.times, y, problem.likelihood, tol=tol, max_sweeps=max_sweeps,
                          offset=problem.location_offset(theta), args=problem.likelihood_arguments(theta),
                          periodic_order=problem.order)
