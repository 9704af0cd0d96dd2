"""Fitting a sparse variational GP (``svgp``) to a latent-GP model with any scalar likelihood, or to GP regression.

The objective is the bound of :mod:`gpdsl.inference.variational.svgp` on the observed points (missing outcomes are
left out of it) plus the log prior of the hyperparameters that have one (MAP where there are priors, as ``ml`` and
``sgpr``). One flat vector holds the hyperparameters ``theta`` (unconstrained, Stan's coordinates), the inducing
inputs ``Z``, and ``q``'s mean and lower Cholesky factor; Adam (:mod:`gpdsl.inference.optimise.adam`) moves it over
the two-phase schedule, on minibatches of ``batch_size`` points drawn with replacement, or (``natural_gradient``)
moves ``q`` by a natural-gradient step on the same batch before each Adam step of the rest. Input columns read from
integer labels (the output index of ``coregion``) are held at values of the training inputs: the inducing inputs
then start at a random subset of them whatever ``inducing_init`` says. The likelihood's
latent argument is ``offset + f`` (an offset free of ``f``, and the GP's mean), as for the Laplace and EP
approximations.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.errors import MethodError, NumericalError
from gpdsl.inference.families.latent_gp import LatentGP
from gpdsl.inference.optimise.adam import maximise, schedule_phases
from gpdsl.inference.optimise.marginal_likelihood import initial_theta
from gpdsl.inference.variational.inducing_inputs import initial_inducing_inputs
from gpdsl.inference.variational.svgp import (inducing_factor, latent_marginals, natural_gradient_step, svgp_bound,
                                              svgp_bound_moments)
from gpdsl.ir.structure import expression_refs
from gpdsl.likelihoods import LIKELIHOODS
from gpdsl.numerics.linalg import cholesky
from gpdsl.settings.fitting import SVGPSettings


class SVGPData:
    """What the bound reads of a :class:`~gpdsl.inference.families.latent_gp.LatentGP` view, at its observed points.

    Parameters
    ----------
    problem : LatentGP
        One latent GP vector under a scalar built-in likelihood.
    """

    def __init__(self, problem: LatentGP):
        self.problem = problem
        self.likelihood = LIKELIHOODS[problem.likelihood]
        self.rows = np.flatnonzero(problem.observed)
        self.size = int(self.rows.size)
        self._rows = jnp.asarray(self.rows)
        self.y = jnp.asarray(np.asarray(problem.y, dtype=float)[self.rows])

    def kernel(self, theta):
        """The GP's kernel at ``theta``."""
        problem = self.problem
        return problem.jax_model.gp_kernel(problem.node.statement, problem.environment(theta))

    def all_inputs(self, theta) -> jax.Array:
        """The inputs of every point, missing outcomes included, ``(N, d)``."""
        problem = self.problem
        return problem.jax_model.gp_inputs(problem.node.statement, problem.environment(theta))

    def inputs(self, theta, index=None) -> jax.Array:
        """The inputs of the observed points (those at ``index`` among them), ``(n, d)``."""
        return self.all_inputs(theta)[self._select(index)]

    def _select(self, index):
        return self._rows if index is None else self._rows[index]

    def observations(self, theta, index=None):
        """``(y, offset, others)`` of the observed points (those at ``index``): the outcomes, what the likelihood's
        latent argument adds to ``f``, and the likelihood's other arguments in order (shared vectors whole)."""
        rows, n = self._select(index), self.problem.n
        offset = self.problem.location_offset(theta)[rows]
        others = [value if name in self.likelihood.own_shape or jnp.ndim(value) == 0
                  else jnp.reshape(jnp.broadcast_to(value, (n,)), (n,))[rows]
                  for name, value in zip(self.likelihood.other_params, self.problem.likelihood_arguments(theta))]
        return self.y if index is None else self.y[index], offset, others

    def expected(self, theta, index=None):
        """``expected(mean, var)``: ``E[log p(y_n | offset_n + f_n)]`` of the observed points (at ``index``) for
        ``f_n ~ N(mean_n, var_n)``."""
        y, offset, others = self.observations(theta, index)
        return lambda mean, var: self.likelihood.expected_log_density(y, offset + mean, var, *others)

    def log_predictive(self, theta, mean, var) -> jax.Array:
        """``log int p(y_n | offset_n + f) N(f | mean_n, var_n) df`` of every observed point (the likelihood's tilted
        log normaliser)."""
        y, offset, others = self.observations(theta)
        return self.likelihood.tilted_moments(y, offset + mean, var, *others)[0]

    def label_columns(self) -> np.ndarray:
        """True on the input columns read from integer labels (the output index of ``coregion``, a group): the
        inducing inputs take the training inputs' values there and keep them."""
        statement = self.problem.node.statement
        offsets = self.problem.jax_model.gp_input_offsets(statement)
        labels = np.zeros(int(offsets[-1]), dtype=bool)
        for component, start, end in zip(statement.inputs.components, offsets[:-1], offsets[1:]):
            labels[start:end] = component.type.base == "int"
        return labels

    def likelihood_parameter_names(self) -> set[str]:
        """The hyperparameters the likelihood's arguments other than the latent one read (its scale, dispersion)."""
        given = dict(self.problem.node.likelihood.distribution.args)
        names = set()
        for name in self.likelihood.other_params:
            names |= expression_refs(given[name])
        return names & set(self.problem.theta_names)


@dataclass
class SVGPFit:
    """A fitted sparse variational GP.

    Attributes
    ----------
    data : SVGPData
    theta : numpy.ndarray
        Unconstrained hyperparameters.
    inducing : numpy.ndarray, shape (M, d)
    mean, covariance : numpy.ndarray, shapes (M,) and (M, M)
        Moments of ``q(v)`` (``whiten``) or ``q(u)``.
    whiten : bool
    jitter : float
    bound : float
        The bound on the whole data at the end.
    objective : float
        ``bound`` plus the log prior of the hyperparameters that have one.
    trace : numpy.ndarray
        The mean objective estimate of each chunk of Adam steps.
    report : dict
    """

    data: SVGPData
    theta: np.ndarray
    inducing: np.ndarray
    mean: np.ndarray
    covariance: np.ndarray
    whiten: bool
    jitter: float
    bound: float
    objective: float
    trace: np.ndarray
    report: dict

    @property
    def problem(self) -> LatentGP:
        return self.data.problem

    def hyperparameters(self) -> dict:
        """Constrained hyperparameters by name."""
        values, _ = self.problem.constrain(jnp.asarray(self.theta))
        return {name: np.asarray(values[name]) for name in self.problem.theta_names}

    def latent_moments(self, X) -> tuple[jax.Array, jax.Array]:
        """Means and variances of ``q(f)`` at the rows of ``X`` (the centred GP: without its mean)."""
        theta = jnp.asarray(self.theta)
        return latent_marginals(self.data.kernel(theta), jnp.asarray(self.inducing), jnp.asarray(X, dtype=float),
                                jnp.asarray(self.mean), jnp.asarray(self.covariance), whiten=self.whiten,
                                jitter=self.jitter)


class SVGPSpace:
    """The flat vector ``[theta, vec(Z), m, vec(chol)]`` and its maps."""

    def __init__(self, size: int, shape: tuple[int, int]):
        self.size, self.shape = size, tuple(shape)
        M, d = self.shape
        self.ends = np.cumsum([size, M * d, M, M * M])

    def pack(self, theta, Z, mean, chol) -> np.ndarray:
        return np.concatenate([np.ravel(np.asarray(part, dtype=float)) for part in (theta, Z, mean, chol)])

    def unpack(self, x):
        M, d = self.shape
        theta, Z, mean, chol = jnp.split(x, self.ends[:-1])
        return theta, jnp.reshape(Z, (M, d)), mean, jnp.tril(jnp.reshape(chol, (M, M)))

    def mask(self, theta=None, inducing=False, q: bool = False) -> np.ndarray:
        """True on the coordinates of ``theta`` where ``theta`` (a mask) is, of ``Z``'s columns where ``inducing`` (a
        bool, or one per column) is, and of ``q`` with ``q``."""
        M, d = self.shape
        theta = np.zeros(self.size, dtype=bool) if theta is None else np.asarray(theta, dtype=bool)
        return np.concatenate([theta, np.tile(np.broadcast_to(inducing, (d,)), M), np.full(M + M * M, q)])


def fit_svgp(data: SVGPData, settings: SVGPSettings, *, progress: bool = False, checkpoint=None,
             identity: dict | None = None) -> SVGPFit:
    """Maximise the bound plus the hyperparameters' log prior (see the module docstring).

    Parameters
    ----------
    data : SVGPData
    settings : SVGPSettings
    progress : bool
        Print the mean objective of each chunk of steps on standard error.
    checkpoint : path, optional
        Write Adam's state after every chunk, and resume from it when it exists.
    identity : dict, optional
        The run's identity recorded in the checkpoint.

    Returns
    -------
    SVGPFit

    Raises
    ------
    MethodError
        More inducing inputs than observed points, or initial values that do not fit.
    NumericalError
        The bound is not finite at the start or at the end.
    """
    problem, n = data.problem, data.size
    if settings.num_inducing > n:
        raise MethodError(f"--num-inducing {settings.num_inducing} is more than the {n} observed points")
    theta0 = initial_theta(problem, settings.initial_values)
    X0 = np.asarray(data.inputs(jnp.asarray(theta0)))
    labels = data.label_columns()
    rule = "random" if labels.any() else settings.inducing_init  # k-means would average labels
    Z0 = initial_inducing_inputs(X0, settings.num_inducing, rule, settings.seed)
    M = Z0.shape[0]
    chol0 = np.eye(M) if settings.whiten else np.asarray(
        inducing_factor(data.kernel(jnp.asarray(theta0)), jnp.asarray(Z0), settings.jitter))
    space = SVGPSpace(theta0.size, Z0.shape)
    options = {"whiten": settings.whiten, "jitter": settings.jitter}
    batch = settings.batch_size if 0 < settings.batch_size < n else None
    scale = 1.0 if batch is None else n / batch

    def objective(x, key=None, index=None):
        theta, Z, mean, chol = space.unpack(x)
        bound = svgp_bound(data.expected(theta, index), data.kernel(theta), Z, data.inputs(theta, index), mean, chol,
                           scale=1.0 if index is None else scale, **options)
        return bound + problem.log_hyperprior(theta)

    def natural_step(x, key, index):
        theta, Z, mean, chol = space.unpack(x)
        expected, kernel, X = data.expected(theta, index), data.kernel(theta), data.inputs(theta, index)

        def of_moments(m, S):
            return svgp_bound_moments(expected, kernel, Z, X, m, S, scale=1.0 if index is None else scale, **options)

        mean, covariance = natural_gradient_step(of_moments, mean, chol @ chol.T, settings.natural_step)
        return jnp.concatenate([x[:space.ends[1]], mean, jnp.ravel(cholesky(covariance))])

    x0 = space.pack(theta0, Z0, np.zeros(M), chol0)
    start = float(jax.jit(objective)(jnp.asarray(x0)))
    if not np.isfinite(start):
        raise NumericalError(f"the SVGP bound is not finite at the start with hyperparameters "
                             f"{problem.constrain(jnp.asarray(theta0))[0]}",
                             hint="give other initial values (--init-value name=value) or standardise the data")
    held = space.mask(inducing=labels | settings.fix_inducing, q=settings.natural_gradient)
    noise = space.mask(problem.theta_mask(data.likelihood_parameter_names()))
    result = maximise(objective, x0, schedule_phases(settings, noise, held), learning_rate=settings.learning_rate,
                      key=jax.random.PRNGKey(settings.seed), data_size=n if batch else None, batch_size=batch,
                      chunk=settings.chunk, progress=progress, checkpoint=checkpoint, identity=identity,
                      inner_step=natural_step if settings.natural_gradient else None)
    x = jnp.asarray(result.x)
    value = float(jax.jit(objective)(x))
    if not np.isfinite(value):
        raise NumericalError("the SVGP bound is not finite at the end of the fit",
                             hint="lower --learning-rate (or --natural-step), standardise the data or use fewer "
                                  "inducing inputs")
    theta, Z, mean, chol = (np.asarray(part) for part in space.unpack(x))
    bound = value - float(problem.log_hyperprior(jnp.asarray(theta)))
    report = {"optimizer": "adam", "natural_gradient": settings.natural_gradient, "steps": result.steps,
              "stop": "steps", "message": f"ran the schedule's {result.steps} steps (no convergence test)",
              "start_bound": start - float(problem.log_hyperprior(jnp.asarray(theta0))), "bound": bound,
              "objective": value, "num_inducing": M, "batch_size": batch or n, "whiten": settings.whiten,
              "learning_rate": settings.learning_rate, "trace_every": settings.chunk, "seconds": result.seconds}
    return SVGPFit(data, theta, Z, mean, chol @ chol.T, settings.whiten, settings.jitter, bound, value,
                   np.asarray(result.trace), report)
