"""The ``dsdgp`` method: a deep GP fitted by doubly-stochastic variational inference (Salimbeni & Deisenroth 2017;
:mod:`gpdsl.inference.variational.deep_gp`), on a model written as a chain of GPs
(:mod:`gpdsl.inference.families.deep_gp`).

The bound is maximised by Adam (:mod:`gpdsl.inference.optimise.adam`) over the schedule of de Souza (2020):
``--noise-fixed-steps`` with the likelihood's scale held, then ``--steps``, fresh moments, on minibatches of
``--batch-size`` points (all by default), one reparameterised sample per step. The start is Salimbeni's: inducing
inputs at the k-means centres of the inputs in every layer (the identity mean carries them through), ``q(u)`` means
zero and standard deviations ``1e-5`` in the hidden layers, 1 in the last; hyperparameters at 1 (or
``--init-value``). The result holds the hyperparameters as one draw, the variational parameters under
``report.variational``, and with ``--predict`` the predictive moment-matched over ``--predict-samples`` draws
through the layers (``y_mean``, ``y_variance`` with the noise).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from gpdsl.errors import MethodError
from gpdsl.inference.progress import counted, stage
from gpdsl.settings.fitting import DSDGPSettings


def initial_layers(problem, settings: DSDGPSettings):
    """Salimbeni's start of every layer (see the module docstring)."""
    import jax.numpy as jnp

    from gpdsl.inference.variational.deep_gp import Layer
    from gpdsl.inference.variational.inducing_inputs import initial_inducing_inputs

    N = problem.X.shape[0]
    if settings.num_inducing > N:
        raise MethodError(f"num_inducing = {settings.num_inducing} is more than the {N} data points")
    Z = initial_inducing_inputs(problem.X, settings.num_inducing, "kmeans", settings.seed)
    M = settings.num_inducing
    layers = []
    for index, width in enumerate(problem.widths):
        scale = 1.0 if index == len(problem.widths) - 1 else 1e-5
        layers.append(Layer(jnp.asarray(Z), jnp.zeros((M, width)), jnp.asarray(np.tile(np.eye(M) * scale,
                                                                                        (width, 1, 1)))))
        Z = Z if width == Z.shape[1] else np.zeros((M, width))
    return layers


@dataclass
class DSDGPFit:
    """A fitted deep GP: the view, the hyperparameters ``theta``, the layers' variational parameters, the bound."""

    problem: object
    theta: np.ndarray
    layers: list
    bound: float
    report: dict

    def hyperparameters(self) -> dict:
        """Constrained hyperparameters by name."""
        values, _ = self.problem.constrain(self.theta)
        return {name: np.asarray(values[name]) for name in self.problem.theta_names}

    def predict(self, X_new, num_samples: int = 200, seed: int = 0):
        """Moment-matched predictive mean and variance of ``y*`` at ``X_new`` (noise included)."""
        import jax

        from gpdsl.inference.variational.deep_gp import predict

        X_new = np.asarray(X_new, dtype=float).reshape(-1, self.problem.X.shape[1])
        mean, variance = predict(self.layers, self.problem.priors(self.theta), self.noise_variance(), X_new,
                                 jax.random.PRNGKey(seed), num_samples)
        return np.asarray(mean), np.asarray(variance)

    def noise_variance(self) -> float:
        return float(self.problem.noise_variance(self.theta))


def fit_dsdgp(problem, settings: DSDGPSettings, progress: bool = False, checkpoint=None, identity=None) -> DSDGPFit:
    """Maximise the doubly-stochastic bound (plus the hyperparameters' log prior) by Adam over the schedule."""
    import jax
    import jax.numpy as jnp
    from jax.flatten_util import ravel_pytree

    from gpdsl.inference.optimise.adam import maximise, schedule_phases
    from gpdsl.inference.optimise.marginal_likelihood import initial_theta
    from gpdsl.inference.variational.deep_gp import elbo_estimate

    theta0 = initial_theta(problem, settings.initial_values)
    flat_layers, unravel = ravel_pytree(initial_layers(problem, settings))
    p = theta0.size
    X, y = jnp.asarray(problem.X), jnp.asarray(problem.y)
    N = X.shape[0]

    def objective(x, key, batch=None):
        theta = x[:p]
        return (elbo_estimate(unravel(x[p:]), problem.priors(theta), problem.noise_variance(theta), X, y, key,
                              batch, N) + problem.log_hyperprior(theta))

    x0 = np.concatenate([theta0, np.asarray(flat_layers)])
    key = jax.random.PRNGKey(settings.seed)
    start = float(jax.jit(objective)(jnp.asarray(x0), key))
    if not np.isfinite(start):
        raise MethodError(f"the deep-GP bound is not finite at the start ({start}) with hyperparameters "
                          f"{problem.constrain(jnp.asarray(theta0))[0]}",
                          hint="give other initial values (--init-value name=value) or standardise the data")
    batch = settings.batch_size if 0 < settings.batch_size < N else None
    phases = schedule_phases(settings, problem.noise_mask(x0.size))
    result = maximise(objective, x0, phases, learning_rate=settings.learning_rate,
                      key=key, data_size=N if batch else None, batch_size=batch, chunk=settings.chunk,
                      progress=progress, checkpoint=checkpoint, identity=identity)
    x = jnp.asarray(result.x)
    bound = float(np.mean(result.trace[-3:])) if len(result.trace) else start
    report = {"seconds": result.seconds, "steps": result.steps, "start_bound": start, "bound": bound,
              "trace": [float(v) for v in result.trace]}
    return DSDGPFit(problem, np.asarray(x[:p]), unravel(x[p:]), bound, report)


def run_dsdgp(model, data, settings: DSDGPSettings, context):
    """Run ``dsdgp``; returns a one-draw :class:`~gpdsl.results.method_output.MethodOutput`."""
    from gpdsl.inference.families.deep_gp import deep_gp_view
    from gpdsl.inference.methods.dmgp import point_estimate_output

    problem = deep_gp_view(model, data, context.facts)
    settings = replace(settings, seed=context.seed)
    with stage("deep GP: Adam on the doubly-stochastic bound", enabled=context.progress):
        fit = fit_dsdgp(problem, settings, progress=context.progress, checkpoint=context.checkpoint,
                        identity=context.checkpoint_identity)
    predictive = None
    if context.new_inputs is not None:
        with stage(f"predictions at {counted(len(context.new_inputs), 'new input')}", enabled=context.progress):
            predictive = fit.predict(context.new_inputs, settings.predict_samples, settings.seed)
    variational = [{name: np.asarray(value).tolist() for name, value in layer._asdict().items()}
                   for layer in fit.layers]
    output = point_estimate_output(fit, variational, "doubly-stochastic variational deep GP",
                                   problem.layers[-1], predictive, None)
    output.state = fit
    return output


def dsdgp_report(results, model, settings: DSDGPSettings):
    """The fit's report (:class:`~gpdsl.results.report.RunReport`): Adam's steps and the bound."""
    from gpdsl.results.report import adam_report

    return adam_report(results, f"deep GP (doubly-stochastic bound, M = {settings.num_inducing} per layer)")
