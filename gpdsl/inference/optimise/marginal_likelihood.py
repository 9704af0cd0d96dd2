"""Type-II maximum likelihood (MAP with priors) of GP regression hyperparameters.

The exact log marginal likelihood ``log N(y; 0, K + s^2 I)`` plus the log prior of the hyperparameters
that have one (on their constrained scale, so a MAP estimate that does not depend on the
parameterisation) is maximised by L-BFGS (:mod:`gpdsl.inference.optimise.lbfgs`) with JAX gradients.
Hyperparameters bounded only below, ``x > a``, move as ``x = a + softplus(u)`` (GPflow 1's ``Log1pe``
transform, whose default ``a`` is 1e-6; GPy's with ``a = 0``); others keep Stan's unconstrained
coordinates.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.backends.jax.bijectors import unconstrain
from gpdsl.errors import MethodError, NumericalError
from gpdsl.inference.families.gp_regression import GPRegression
from gpdsl.inference.optimise import lbfgs
from gpdsl.inference.variational.softplus import inverse_softplus, log_softplus


class FittedHyperparameters:
    """What a fit of a GP regression view (``problem``) at hyperparameters ``theta`` (unconstrained) offers."""

    problem: GPRegression
    theta: np.ndarray

    def hyperparameters(self) -> dict:
        """Constrained hyperparameters by name."""
        return {k: np.asarray(v) for k, v in self.problem.constrain(jnp.asarray(self.theta))[0].items()}

    def kernel(self):
        """The kernel at the optimum."""
        return self.problem.kernel(jnp.asarray(self.theta))

    def noise_variance(self) -> float:
        """The noise variance at the optimum."""
        return float(self.problem.noise_variance(jnp.asarray(self.theta)))

    def inputs(self) -> np.ndarray:
        """The training inputs, shape ``(n, d)``."""
        return np.asarray(self.problem.inputs(jnp.asarray(self.theta)))


@dataclass
class GPRegressionFit(FittedHyperparameters):
    """A fitted GP regression.

    Attributes
    ----------
    problem : GPRegression
        The model view.
    theta : numpy.ndarray
        The optimum, unconstrained (Stan's coordinates).
    log_marginal : float
        ``log p(y | theta)`` there.
    log_posterior : float
        The objective there: ``log_marginal`` plus the log prior of the hyperparameters that have one.
    report : dict
        ``iterations``, ``evaluations``, ``restarts``, ``converged``, ``stop``, ``message``,
        ``gradient_norm`` and ``seconds``.
    """

    problem: GPRegression
    theta: np.ndarray
    log_marginal: float
    log_posterior: float
    report: dict



def initial_theta(problem: GPRegression, initial_values: dict) -> np.ndarray:
    """Unconstrained starting point: the given constrained values, else 1 (moved inside the bounds).

    Raises
    ------
    MethodError
        A value for a name that is not a hyperparameter, or of a shape that does not broadcast.
    """
    unknown = sorted(set(initial_values) - set(problem.theta_names))
    if unknown:
        raise MethodError(f"initial values given for {', '.join(unknown)}: not a parameter of the model "
                          f"(its parameters: {', '.join(problem.theta_names)})")
    parts = []
    for block in problem.theta_blocks:
        if block.structure is not None:
            default = block.constrain(np.zeros(block.free_shape))[0]
            value = np.asarray(initial_values.get(block.name, default), dtype=float)
            parts.append(np.ravel(np.asarray(block.unconstrain(value))))
            continue
        value = np.asarray(initial_values.get(block.name, 1.0), dtype=float)
        try:
            value = np.broadcast_to(value, block.shape).astype(float)
        except ValueError:
            raise MethodError(f"initial value of '{block.name}' has shape {value.shape}; expected "
                              f"{block.shape}") from None
        lower = -np.inf if block.lower is None else np.asarray(block.lower, dtype=float)
        upper = np.inf if block.upper is None else np.asarray(block.upper, dtype=float)
        if np.any(value <= lower) or np.any(value >= upper):
            middle = np.where(np.isfinite(lower) & np.isfinite(upper), (lower + upper) / 2,
                              np.where(np.isfinite(lower), lower + 1.0, upper - 1.0))
            if block.name in initial_values:
                raise MethodError(f"initial value of '{block.name}' is outside its bounds")
            value = np.broadcast_to(middle, block.shape).astype(float)
        parts.append(np.ravel(np.asarray(unconstrain(value, block.lower, block.upper))))
    return np.concatenate(parts) if parts else np.zeros(0)


def fit_marginal_likelihood(problem: GPRegression, initial_values: dict | None = None, *,
                            max_iterations: int = 1000, max_evaluations: int = 15000, ftol: float = 2.220446049250313e-09,
                            gtol: float = 1e-5, restarts: int = 5) -> GPRegressionFit:
    """Maximise ``log p(y | theta) + log p(theta)`` (the prior only where given) by L-BFGS.

    Parameters
    ----------
    problem : GPRegression
        The model view (:func:`gpdsl.inference.families.gp_regression.gp_regression`).
    initial_values : dict, optional
        Constrained starting values by name (see :func:`initial_theta`).
    max_iterations, max_evaluations : int
        Limits over all L-BFGS runs.
    ftol, gtol : float
        Relative-reduction and largest-gradient-component tolerances (SciPy's L-BFGS-B defaults, which
        GPflow's ScipyOptimizer uses).
    restarts : int
        Restarts from the end point with a fresh memory after a stop short of ``gtol``, while the
        objective improves.

    Returns
    -------
    GPRegressionFit

    Raises
    ------
    NumericalError
        The marginal likelihood is not finite at the starting point.
    """
    started = time.perf_counter()
    theta0 = initial_theta(problem, initial_values or {})
    to_theta, from_theta = softplus_coordinates(problem)

    def negative(u):
        theta = to_theta(u)
        return -(problem.log_marginal(theta) + problem.log_hyperprior(theta))

    value_and_grad = jax.jit(jax.value_and_grad(negative))

    def fun(u):
        value, grad = value_and_grad(jnp.asarray(u))
        return float(value), np.asarray(grad)

    u = from_theta(theta0)
    value0, _ = fun(u)
    if not np.isfinite(value0):
        raise NumericalError(f"the marginal likelihood is not finite at the starting point "
                             f"{_rounded(problem, theta0)}",
                             hint="give other initial values (--init-value name=value) or standardise the data")
    run = lbfgs.minimize_restarting(fun, u, restarts=restarts, max_iterations=max_iterations,
                                    max_evaluations=max_evaluations, ftol=ftol, gtol=gtol, value0=value0)
    result, u = run.result, run.result.x
    theta = np.asarray(to_theta(u, np))
    log_marginal = float(problem.log_marginal(jnp.asarray(theta)))
    report = {"iterations": run.iterations, "evaluations": run.evaluations, "restarts": run.restarts,
              "converged": result.converged, "stop": result.stop, "message": result.message,
              "log_marginal": log_marginal, "log_posterior": -result.value,
              "gradient_norm": float(np.linalg.norm(result.gradient)), "seconds": time.perf_counter() - started}
    return GPRegressionFit(problem, theta, log_marginal, -result.value, report)


def softplus_coordinates(problem):
    """The optimiser's coordinates ``u`` of a view's ``theta``: ``x = a + softplus(u)`` for hyperparameters
    bounded only below (``theta = log(x - a)``), ``theta`` itself for the others.

    Returns
    -------
    to_theta : callable
        ``to_theta(u, xp=jax.numpy) -> theta`` (traceable).
    from_theta : callable
        ``from_theta(theta) -> u`` (NumPy).
    """
    positive = np.concatenate([np.full(b.size, _is_positive(b)) for b in problem.theta_blocks]) \
        if problem.theta_blocks else np.zeros(0, dtype=bool)

    def to_theta(u, xp=jnp):
        return xp.where(positive, log_softplus(u, xp), u)

    def from_theta(theta):
        theta = np.asarray(theta, dtype=float)
        return np.where(positive, inverse_softplus(np.exp(theta)), theta)

    return to_theta, from_theta


def _is_positive(block) -> bool:
    return block.upper is None and block.lower is not None


def _rounded(problem: GPRegression, theta) -> dict:
    return {k: np.round(np.asarray(v), 6).tolist() for k, v in problem.constrain(jnp.asarray(theta))[0].items()}
