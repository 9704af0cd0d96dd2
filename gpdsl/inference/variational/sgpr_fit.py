"""Fitting sparse GP regression: the inducing inputs, kernel hyperparameters and noise maximise Titsias's bound.

The objective is :func:`~gpdsl.inference.variational.sgpr.sgpr_bound` plus the log prior of the
hyperparameters that have one (MAP where there are priors, as ``ml``). The optimiser moves one flat
vector: the hyperparameters in the coordinates of
:func:`~gpdsl.inference.optimise.marginal_likelihood.softplus_coordinates`, then the inducing inputs
row by row. L-BFGS (:mod:`gpdsl.inference.optimise.lbfgs`) by default; Adam
(:mod:`gpdsl.inference.optimise.adam`) with its two-phase schedule as an option.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.errors import MethodError, NumericalError
from gpdsl.inference.families.gp_regression import GPRegression
from gpdsl.inference.optimise import lbfgs
from gpdsl.inference.progress import say
from gpdsl.inference.optimise.marginal_likelihood import FittedHyperparameters, initial_theta, softplus_coordinates
from gpdsl.inference.predict.gp_regression import Prediction
from gpdsl.inference.predict.latent_gp import check_new_inputs
from gpdsl.inference.variational.inducing_inputs import initial_inducing_inputs
from gpdsl.inference.variational.sgpr import sgpr_bound, sgpr_moments, sgpr_posterior

if TYPE_CHECKING:
    from gpdsl.settings import SGPRSettings


@dataclass
class SGPRFit(FittedHyperparameters):
    """A fitted sparse GP regression.

    Attributes
    ----------
    problem : GPRegression
        The model view.
    theta : numpy.ndarray
        The hyperparameters at the optimum, unconstrained (Stan's coordinates).
    inducing : numpy.ndarray, shape (M, d)
        The inducing inputs there.
    bound : float
        Titsias's bound on ``log p(y | theta)`` there.
    objective : float
        ``bound`` plus the log prior of the hyperparameters that have one.
    trace : numpy.ndarray
        L-BFGS: the objective at the start and after each iteration; Adam: the mean objective of each chunk of
        steps.
    times : numpy.ndarray
        Seconds from the start of the fit to each entry of ``trace``.
    report : dict
        The optimiser's report: ``iterations``, ``evaluations``, ``converged``, ``stop``, ``message``,
        ``bound``, ``objective``, ``gradient_norm``, ``seconds``, and the optimiser's own entries.
    jitter : float
        The jitter on ``K(Z)``.
    """

    problem: GPRegression
    theta: np.ndarray
    inducing: np.ndarray
    bound: float
    objective: float
    trace: np.ndarray
    times: np.ndarray
    report: dict
    jitter: float

    def predict(self, X_new, include_noise: bool = True) -> Prediction:
        """Predictive mean and variance at new inputs ``X_new`` (n*, d), of ``y*`` or (``include_noise=False``) ``f*``.

        Raises
        ------
        DataError
            ``X_new`` is not a finite matrix with the training inputs' number of columns.
        """
        X_new = check_new_inputs(self.problem, X_new)
        kernel = self.kernel()
        posterior = sgpr_posterior(kernel, self.inputs(), self.problem.y, self.inducing,
                                   self.noise_variance(), self.jitter)
        mean, variance = sgpr_moments(posterior, kernel, self.inducing, jnp.asarray(X_new), include_noise)
        return Prediction(np.asarray(mean), np.asarray(variance))


class SGPRSpace:
    """The optimiser's flat vector ``x = [u, vec(Z)]`` of a GP regression view and its maps.

    Parameters
    ----------
    problem : GPRegression
    shape : tuple of int
        The inducing inputs' shape ``(M, d)``.
    """

    def __init__(self, problem: GPRegression, shape: tuple[int, int]):
        self.problem = problem
        self.shape = tuple(shape)
        self.to_theta, self.from_theta = softplus_coordinates(problem)
        self.size = sum(block.size for block in problem.theta_blocks)

    def pack(self, theta, Z) -> np.ndarray:
        """``x`` from unconstrained ``theta`` and inducing inputs ``Z``."""
        return np.concatenate([self.from_theta(theta), np.ravel(np.asarray(Z, dtype=float))])

    def unpack(self, x, xp=jnp):
        """``(theta, Z)`` of ``x`` (traceable with ``xp = jax.numpy``)."""
        return self.to_theta(x[:self.size], xp), xp.reshape(x[self.size:], self.shape)

    def scale_blocks(self) -> np.ndarray:
        """L-BFGS's scaling blocks (:func:`~gpdsl.inference.optimise.lbfgs.minimize`): one per hyperparameter
        coordinate and one per input column of the inducing inputs."""
        M, d = self.shape
        return np.concatenate([np.arange(self.size), self.size + np.tile(np.arange(d), M)])

    def mask(self, names=(), inducing: bool = False) -> np.ndarray:
        """True on the coordinates of the hyperparameters ``names`` and, with ``inducing``, of ``Z``."""
        return np.concatenate([self.problem.theta_mask(names), np.full(int(np.prod(self.shape)), inducing)])


def sgpr_objective(problem: GPRegression, jitter: float):
    """``objective(theta, Z)``: the bound plus the log prior of the hyperparameters that have one (traceable)."""
    y = jax.device_put(problem.y)

    def objective(theta, Z):
        bound = sgpr_bound(problem.kernel(theta), problem.inputs(theta), y, Z, problem.noise_variance(theta), jitter)
        return bound + problem.log_hyperprior(theta)

    return objective


def fit_sgpr(problem: GPRegression, settings: SGPRSettings, *, progress: bool = False,
             checkpoint=None, identity: dict | None = None) -> SGPRFit:
    """Maximise the bound (plus log prior) over the inducing inputs and hyperparameters.

    Parameters
    ----------
    problem : GPRegression
        The model view (:func:`gpdsl.inference.families.gp_regression.gp_regression`).
    settings : SGPRSettings
        Inducing inputs, their initialisation and seed, starting values, the optimiser and its options.
    progress : bool
        Print the bound every 50 iterations (L-BFGS) or every chunk (Adam) on standard error.
    checkpoint : path, optional
        Adam only: write the optimiser's state after every chunk, and resume from it when it exists.
    identity : dict, optional
        The run's identity to record in the checkpoint (:func:`gpdsl.storage.checkpoint.run_identity`).

    Returns
    -------
    SGPRFit

    Raises
    ------
    MethodError
        ``num_inducing`` larger than the number of points, initial values that do not fit, or a checkpoint
        asked of L-BFGS.
    NumericalError
        The bound is not finite at the starting point (L-BFGS) or at the end.
    """
    started = time.perf_counter()
    if checkpoint is not None and settings.optimizer != "adam":
        raise MethodError("sgpr writes checkpoints with --optimizer adam only (L-BFGS fits are not resumed)")
    theta0 = initial_theta(problem, settings.initial_values)
    X = np.asarray(problem.inputs(jnp.asarray(theta0)))
    if settings.num_inducing > X.shape[0]:
        raise MethodError(f"--num-inducing {settings.num_inducing} is more than the {X.shape[0]} training points")
    Z0 = initial_inducing_inputs(X, settings.num_inducing, settings.inducing_init, settings.seed)
    space = SGPRSpace(problem, Z0.shape)
    objective = sgpr_objective(problem, settings.jitter)

    def negative(x):
        return -objective(*space.unpack(x))

    x0 = space.pack(theta0, Z0)
    held = space.mask(inducing=settings.fix_inducing)
    if settings.optimizer == "adam":
        x, run_report, trace, times = _adam(negative, x0, held, space, problem, settings, progress, checkpoint,
                                            identity, started)
    else:
        labels = space.scale_blocks() if settings.scaling == "blocks" else None
        x, run_report, trace, times = _lbfgs(negative, x0, held, settings, progress, started, labels)
    theta, Z = (np.asarray(part) for part in space.unpack(jnp.asarray(x), jnp))
    value = float(objective(jnp.asarray(theta), jnp.asarray(Z)))
    if not np.isfinite(value):
        raise NumericalError(f"the SGPR bound is not finite at the end of the {settings.optimizer} fit",
                             hint="lower --learning-rate, standardise the data or use fewer inducing inputs")
    bound = value - float(problem.log_hyperprior(jnp.asarray(theta)))
    report = {**run_report, "bound": bound, "objective": value, "num_inducing": settings.num_inducing,
              "seconds": time.perf_counter() - started}
    return SGPRFit(problem, theta, Z, bound, value, np.asarray(trace), np.asarray(times), report, settings.jitter)


def _value_and_gradient(negative, held):
    free = jnp.asarray(~held)

    def both(x):
        value, grad = jax.value_and_grad(negative)(x)
        return jnp.concatenate([value[None], jnp.where(free, grad, 0.0)])

    return jax.jit(both)


def _lbfgs(negative, x0, held, settings, progress, started, labels):
    both = _value_and_gradient(negative, held)

    def fun(x):
        out = np.asarray(both(x))
        return out[0], out[1:]

    value0 = fun(x0)[0]
    if not np.isfinite(value0):
        raise NumericalError("the SGPR bound is not finite at the starting point",
                             hint="standardise the data, give other initial values (--init-value name=value) or "
                                  "use fewer inducing inputs")
    trace, times = [-value0], [time.perf_counter() - started]

    def callback(x, value):
        trace.append(-value)
        times.append(time.perf_counter() - started)
        if progress and len(trace) % 50 == 1:
            say(f"  iteration {len(trace) - 1}: objective {trace[-1]:.6g}")

    run = lbfgs.minimize_restarting(fun, x0, restarts=settings.restarts, max_iterations=settings.max_iterations,
                                    max_evaluations=settings.max_evaluations, ftol=settings.ftol,
                                    gtol=settings.gtol, value0=value0, callback=callback, scale_blocks=labels)
    result = run.result
    report = {"optimizer": "lbfgs", "iterations": run.iterations, "evaluations": run.evaluations,
              "restarts": run.restarts, "converged": result.converged, "stop": result.stop,
              "message": result.message, "gradient_norm": float(np.linalg.norm(result.gradient))}
    return result.x, report, trace, times


def _adam(negative, x0, held, space, problem, settings, progress, checkpoint, identity, started):
    from gpdsl.inference.optimise import adam

    phases = adam.schedule_phases(settings, space.mask(names=problem.noise_names), held)
    times = []
    result = adam.maximise(lambda x, key, batch: -negative(x), x0, phases, learning_rate=settings.learning_rate,
                           chunk=settings.chunk, progress=progress, checkpoint=checkpoint, identity=identity,
                           report=lambda steps, value: times.append(time.perf_counter() - started))
    report = {"optimizer": "adam", "iterations": result.steps, "evaluations": result.steps, "converged": True,
              "stop": "steps", "message": f"ran the schedule's {result.steps} Adam steps (noise held for the first "
                                          f"{settings.noise_fixed_steps})",
              "gradient_norm": float(np.linalg.norm(result.gradient)), "learning_rate": settings.learning_rate,
              "trace_every": settings.chunk}
    times = np.concatenate([np.full(len(result.trace) - len(times), np.nan), times])  # chunks before a resume
    return result.x, report, result.trace, times
