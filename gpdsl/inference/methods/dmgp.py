"""The ``dmgp`` method: the two-layer deep Mahalanobis GP fitted by its collapsed variational bound (de Souza 2020,
Sec. 4.3.1 and App. A; :mod:`gpdsl.inference.variational.deep_mahalanobis`).

The bound is maximised by Adam over the thesis's schedule (``--steps-fixed-noise`` steps with the likelihood's scale
held, then ``--steps`` with everything free, fresh moments in each phase; :mod:`gpdsl.inference.optimise.adam`),
plus the log prior of the hyperparameters that have one. The start follows the author's code: the means of ``q(V)``
are the inputs' principal axes (``Q`` of them) at every pseudo-input, their standard deviations ``1.001 / D``, the
pseudo-inputs ``Xi`` the k-means centres of the inputs and the inducing inputs ``Z`` those of the inputs projected on
the principal axes; hyperparameters start at 1 (or at ``--init-value``). The hyperparameters are stored like a
one-draw posterior (as ``ml`` does), the variational parameters under ``report.variational``; with ``--predict`` the
``predictions`` group holds the moment-matched predictive ``<y>_mean``, ``<y>_variance`` (noise included) and
``<f>_variance``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from gpdsl.errors import MethodError
from gpdsl.inference.progress import counted, stage
from gpdsl.settings.fitting import DMGPSettings


def initial_variational(problem, settings: DMGPSettings):
    """The author's start of ``q(V)`` and the inducing inputs (see the module docstring)."""
    import jax.numpy as jnp

    from gpdsl.inference.variational.deep_mahalanobis import DMGPVariational
    from gpdsl.inference.variational.inducing_inputs import initial_inducing_inputs

    X = problem.X
    N, D = X.shape
    Q = problem.num_fields
    for name, value in (("num_inducing", settings.num_inducing), ("num_inducing_fields",
                                                                  settings.num_inducing_fields)):
        if value > N:
            raise MethodError(f"{name} = {value} is more than the {N} data points")
    _, _, axes = np.linalg.svd(X - X.mean(0), full_matrices=False)
    components = np.zeros((Q, D))
    components[:min(Q, axes.shape[0])] = axes[:Q]
    Xi = initial_inducing_inputs(X, settings.num_inducing_fields, "kmeans", settings.seed)
    Z = initial_inducing_inputs(X @ components.T, settings.num_inducing, "kmeans", settings.seed)
    mean_v = np.repeat(components[:, :, None], settings.num_inducing_fields, axis=2)
    log_std_v = np.full((Q, settings.num_inducing_fields), np.log(1.001 / D))
    return DMGPVariational(jnp.asarray(Z), jnp.asarray(Xi), jnp.asarray(mean_v), jnp.asarray(log_std_v))


@dataclass
class DMGPFit:
    """A fitted deep Mahalanobis GP: the view, the hyperparameters ``theta``, the variational parameters, the bound."""

    problem: object
    theta: np.ndarray
    variational: object
    bound: float
    report: dict

    def hyperparameters(self) -> dict:
        """Constrained hyperparameters by name."""
        values, _ = self.problem.constrain(self.theta)
        return {name: np.asarray(values[name]) for name in self.problem.theta_names}

    def predict(self, X_new):
        """Moment-matched predictive mean and variance of ``f*`` at ``X_new`` (noise excluded)."""
        from gpdsl.inference.variational.deep_mahalanobis import dmgp_predict

        X_new = np.asarray(X_new, dtype=float).reshape(-1, self.problem.X.shape[1])
        mean, variance = dmgp_predict(self.variational, self.problem.kernels(self.theta), self.problem.X,
                                      self.problem.y, X_new)
        return np.asarray(mean), np.asarray(variance)

    def noise_variance(self) -> float:
        return float(self.problem.kernels(self.theta).noise_variance)


def fit_dmgp(problem, settings: DMGPSettings, progress: bool = False, checkpoint=None, identity=None) -> DMGPFit:
    """Maximise the DVMGP bound (plus the hyperparameters' log prior) by Adam over the schedule."""
    import jax
    import jax.numpy as jnp
    from jax.flatten_util import ravel_pytree

    from gpdsl.inference.optimise.adam import maximise, schedule_phases
    from gpdsl.inference.optimise.marginal_likelihood import initial_theta
    from gpdsl.inference.variational.deep_mahalanobis import dmgp_bound

    theta0 = initial_theta(problem, settings.initial_values)
    flat_variational, unravel = ravel_pytree(initial_variational(problem, settings))
    p = theta0.size
    X, y = jnp.asarray(problem.X), jnp.asarray(problem.y)

    def objective(x, key=None, batch=None):
        theta, variational = x[:p], unravel(x[p:])
        return dmgp_bound(variational, problem.kernels(theta), X, y) + problem.log_hyperprior(theta)

    x0 = np.concatenate([theta0, np.asarray(flat_variational)])
    start = float(jax.jit(objective)(jnp.asarray(x0)))
    if not np.isfinite(start):
        raise MethodError(f"the DMGP bound is not finite at the start ({start}) with hyperparameters "
                          f"{problem.constrain(jnp.asarray(theta0))[0]}",
                          hint="give other initial values (--init-value name=value) or standardise the data")
    phases = schedule_phases(settings, problem.noise_mask(x0.size))
    result = maximise(objective, x0, phases, learning_rate=settings.learning_rate,
                      chunk=settings.chunk, progress=progress, checkpoint=checkpoint, identity=identity)
    x = jnp.asarray(result.x)
    bound = float(jax.jit(objective)(x))
    if not np.isfinite(bound):
        raise MethodError(f"the DMGP bound became {bound} during the fit",
                          hint="lower --learning-rate or give other initial values")
    report = {"seconds": result.seconds, "steps": result.steps, "start_bound": start, "bound": bound,
              "trace": [float(v) for v in result.trace]}
    return DMGPFit(problem, np.asarray(x[:p]), unravel(x[p:]), bound, report)


def run_dmgp(model, data, settings: DMGPSettings, context):
    """Run ``dmgp``; returns a one-draw :class:`~gpdsl.results.method_output.MethodOutput`."""
    from gpdsl.inference.families.deep_mahalanobis import deep_mahalanobis_view

    problem = deep_mahalanobis_view(model, data, context.facts)
    with stage("deep Mahalanobis GP: Adam on the collapsed bound", enabled=context.progress):
        fit = fit_dmgp(problem, replace(settings, seed=context.seed), progress=context.progress,
                       checkpoint=context.checkpoint, identity=context.checkpoint_identity)
    predictive = latent_variance = None
    if context.new_inputs is not None:
        with stage(f"predictions at {counted(len(context.new_inputs), 'new input')}", enabled=context.progress):
            mean, latent_variance = fit.predict(context.new_inputs)
        predictive = (mean, latent_variance + fit.noise_variance())
    variational = {name: np.asarray(value).tolist() for name, value in fit.variational._asdict().items()}
    output = point_estimate_output(fit, variational, "collapsed DVMGP bound", problem.output, predictive,
                                   latent_variance)
    output.state = fit
    return output


def point_estimate_output(fit, variational, bound_name: str, output_node, predictive, latent_variance):
    """The :class:`~gpdsl.results.method_output.MethodOutput` of a variational fit of a deep GP: the hyperparameters
    as one draw, ``sample_stats.lp`` the bound, the optimiser's report and the variational parameters under
    ``report``, and the predictions ``<y>_mean``, ``<y>_variance`` (and ``<f>_variance``) at new inputs."""
    from gpdsl.results.method_output import point_estimate, predictive_moments

    output = point_estimate(fit.hyperparameters(), {"lp": fit.bound}, fit.report["seconds"],
                            {"optimizer": fit.report, "variational": variational}, f"variational ({bound_name})")
    if predictive is not None:
        points = f"{output_node.statement.inputs.index_shape[0]}_new"
        output.predictions, dims = predictive_moments(output_node.likelihood.target.name, output_node.name, points,
                                                      predictive[0], predictive[1], latent_variance)
        output.dims.update(dims)
    return output


def dmgp_report(results, model, settings: DMGPSettings):
    """The fit's report (:class:`~gpdsl.results.report.RunReport`): Adam's steps and the bound."""
    from gpdsl.results.report import adam_report

    return adam_report(results, f"deep Mahalanobis GP (collapsed bound, M = {settings.num_inducing})")
