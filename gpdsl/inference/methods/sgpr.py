"""The ``sgpr`` method: sparse GP regression by Titsias's (2009) collapsed variational bound.

The inducing inputs, kernel hyperparameters and noise maximise the bound (plus the log prior of the
hyperparameters that have one; :mod:`gpdsl.inference.variational.sgpr_fit`). The fit is stored like a
one-draw posterior (``chain = 1``, ``draw = 1``): the hyperparameters, and the inducing inputs as
``inducing_inputs`` (dims ``(M, <input dim>)``); ``sample_stats`` holds ``lp`` (the objective), ``bound``
and ``bound_trace`` (the objective after each iteration, dim ``iteration``); the optimiser's report is
under ``report.optimizer``. With new inputs (``--predict``) the ``predictions`` group holds the
predictive ``<y>_mean`` and ``<y>_variance`` (noise included) and ``<f>_variance`` (noise excluded), dim
``<N>_new``, as ``ml``. Missing outputs (NaN) are left out of the bound (it is the observed rows'), and the
``posterior_predictive`` group holds the predictive ``<y>_mean`` and ``<y>_variance`` of every training row, which
at the missing rows impute them.
"""

from __future__ import annotations

from dataclasses import replace

from gpdsl.inference.progress import counted, stage
from gpdsl.settings.fitting import SGPRSettings


def sgpr_refusal(model, facts, settings) -> str | None:
    """Why ``sgpr`` cannot fit the GP regression of ``facts``, or None: its bound takes ``y ~ normal(f, s)`` around
    a zero-mean GP, not a GP mean or terms added to ``f``."""
    node = facts.node
    if not node.has_location:
        return None
    return (f"sgpr fits y ~ normal({node.name}, s) around a zero-mean GP; '{node.name}' has "
            + ("a mean" if node.offset is None else "terms added to it in the likelihood")
            + ": use ml (exact), svgp or pm")


def run_sgpr(model, data, settings: SGPRSettings, context):
    """Run ``sgpr``; returns a one-draw :class:`~gpdsl.results.method_output.MethodOutput`."""
    import jax.numpy as jnp
    import numpy as np

    from gpdsl.inference.families.gp_regression import gp_regression_view
    from gpdsl.inference.variational.sgpr_fit import fit_sgpr

    problem = gp_regression_view(model, data, context.facts)
    with stage(f"sparse GP regression: {settings.optimizer} on the bound", enabled=context.progress):
        fit = fit_sgpr(problem, replace(settings, seed=context.seed), progress=context.progress,
                       checkpoint=context.checkpoint, identity=context.checkpoint_identity)
    output = sgpr_output(fit)
    if not problem.complete:
        prediction = fit.predict(np.asarray(problem.all_inputs(jnp.asarray(fit.theta))))
        target, points = problem.target, problem.node.statement.inputs.index_shape[0]
        output.posterior_predictive = {f"{target}_mean": prediction.mean[None, None],
                                       f"{target}_variance": prediction.variance[None, None]}
        output.dims.update({name: [points] for name in output.posterior_predictive})
    if context.new_inputs is not None:
        with stage(f"predictions at {counted(len(context.new_inputs), 'new input')}", enabled=context.progress):
            output.predictions, dims = sgpr_predictions(fit, context.new_inputs)
        output.dims.update(dims)
    output.state = fit
    return output


def inducing_dims(problem) -> list[str]:
    """Dimension names of the inducing inputs: ``M`` and the inputs' column dimension."""
    dim = problem.node.statement.inputs.dim
    return ["M", dim if isinstance(dim, str) and dim.isidentifier() else "input_dim"]


def sgpr_output(fit):
    """The :class:`~gpdsl.results.method_output.MethodOutput` of an SGPR fit (see the module docstring)."""
    from gpdsl.results.method_output import point_estimate

    return point_estimate({**fit.hyperparameters(), "inducing_inputs": fit.inducing},
                          {"lp": fit.objective, "bound": fit.bound, "bound_trace": fit.trace}, fit.report["seconds"],
                          {"optimizer": fit.report},
                          "sparse variational GP regression, Titsias's collapsed bound, inducing_inputs the fitted Z",
                          {"inducing_inputs": inducing_dims(fit.problem), "bound_trace": ["iteration"]})


def sgpr_predictions(fit, new_inputs) -> tuple[dict, dict]:
    """The predictions group of an SGPR fit at new inputs, and its dims (those of ``ml``)."""
    from gpdsl.inference.methods.ml import regression_predictions

    return regression_predictions(fit.problem, fit.predict(new_inputs), fit.predict(new_inputs, include_noise=False))


def sgpr_report(results, model, settings: SGPRSettings):
    """The fit's report (:class:`~gpdsl.results.report.RunReport`): the optimiser's outcome, bound and objective."""
    from gpdsl.results.report import number, optimiser, optimiser_report

    report = optimiser(results)
    return optimiser_report(results, f"sparse GP regression (Titsias bound, M = {settings.num_inducing}, "
                                     f"{settings.optimizer})",
                            f"bound {number(report, 'bound')}, objective {number(report, 'objective')}")
