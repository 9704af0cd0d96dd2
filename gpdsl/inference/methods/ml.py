"""The ``ml`` method: type-II maximum likelihood (MAP with priors) of GP regression, f integrated out.

A Hilbert-space approximate GP under a normal likelihood is fitted alike on its exact marginal with the basis weights
integrated out in ``O(N M^2)`` (:mod:`gpdsl.inference.families.hsgp_regression`); its predictions come from the
weights' Gaussian posterior at the estimate.

Student-t process regression is fitted alike on its exact marginal (``nu`` with the kernel and noise), and its
predictions are the conditional Student-t's moments, with ``<y>_dof`` (:mod:`gpdsl.inference.predict.student_t_process`).

The hyperparameters maximise the exact log marginal likelihood, plus the log prior of those that have
one (:mod:`gpdsl.inference.optimise.marginal_likelihood`). The estimate is stored like a one-draw
posterior (``chain = 1``, ``draw = 1``) with ``sample_stats.lp`` (the objective) and
``sample_stats.log_marginal``; the optimiser's report is under ``report.optimizer``. With new inputs
(``--predict``) the ``predictions`` group holds the exact predictive ``<y>_mean`` and ``<y>_variance``
(noise included) and ``<f>_variance`` (noise excluded), and one draw each of ``<f>_new`` and ``<y>_new``, jointly
over the new points or point by point (``context.predictive``), dim ``<N>_new``.

Missing outputs (NaN) are integrated out: the estimate maximises the marginal likelihood of the observed rows
(the same as on the data without the missing rows), and the ``posterior_predictive`` group imputes every row at the
estimate: ``<y>_mean`` and ``<y>_variance`` of ``y_i | y_obs`` (noise included) and one joint draw ``<y>``.
"""

from __future__ import annotations

from gpdsl.inference.progress import counted, stage
from gpdsl.ir.approximations import HSGP
from gpdsl.settings.fitting import MLSettings


def fit_gp_regression(model, data, settings: MLSettings, facts=None, family: str | None = None):
    """Fit the GP regression ``model`` to ``data`` (validated) by :func:`fit_marginal_likelihood`; with ``family``
    (and its ``facts``), that family's view (Student-t process regression).

    Returns
    -------
    GPRegressionFit
    """
    from gpdsl.inference.families.gp_regression import gp_regression, gp_regression_view
    from gpdsl.inference.optimise.marginal_likelihood import fit_marginal_likelihood
    from gpdsl.ir.families import FAMILIES, HSGP_LATENT_GP

    if facts is None:
        problem = gp_regression(model, data)
    elif family == HSGP_LATENT_GP:
        from gpdsl.inference.families.hsgp_regression import hsgp_regression_view

        problem = hsgp_regression_view(model, data, facts)
    elif family is None:
        problem = gp_regression_view(model, data, facts)
    else:
        problem = FAMILIES[family].view(model, data, facts)
    return fit_marginal_likelihood(problem, settings.initial_values, max_iterations=settings.max_iterations,
                                   max_evaluations=settings.max_evaluations, ftol=settings.ftol,
                                   gtol=settings.gtol, restarts=settings.restarts)


def run_ml(model, data, settings: MLSettings, context):
    """Run ``ml``; returns a one-draw :class:`~gpdsl.results.method_output.MethodOutput`."""
    with stage("type-II maximum likelihood: L-BFGS on the log marginal likelihood", enabled=context.progress):
        fit = fit_gp_regression(model, data, settings, context.facts, context.family)
    output = ml_output(fit)
    if not fit.problem.complete:
        output.posterior_predictive, dims = ml_imputations(fit, context.seed)
        output.dims.update(dims)
    if context.new_inputs is not None:
        with stage(f"predictions at {counted(len(context.new_inputs), 'new input')}", enabled=context.progress):
            output.predictions, dims = ml_predictions(fit, context.new_inputs, context.seed,
                                                      joint=context.predictive == "joint")
        output.dims.update(dims)
    output.state = fit
    return output


def ml_output(fit):
    """The :class:`~gpdsl.results.method_output.MethodOutput` of a GP regression fit (see the module docstring)."""
    from gpdsl.results.method_output import point_estimate

    return point_estimate(fit.hyperparameters(), {"lp": fit.log_posterior, "log_marginal": fit.log_marginal},
                          fit.report["seconds"], {"optimizer": fit.report}, "type-II maximum likelihood / MAP")


def ml_predictions(fit, new_inputs, seed: int = 0, joint: bool = True) -> tuple[dict, dict]:
    """The predictions group of a fit at new inputs, and its dims: the exact predictive's moments and one draw of
    ``f*`` and ``y*`` (jointly over the new points with ``joint``)."""
    import jax
    import numpy as np

    from gpdsl.inference.families.hsgp_regression import HSGPRegression
    from gpdsl.inference.predict.draws import regression_new_draws
    from gpdsl.inference.predict.hsgp import hsgp_regression_new_draws

    new_draws = hsgp_regression_new_draws if isinstance(fit.problem, HSGPRegression) else regression_new_draws
    values = new_draws(fit.problem, np.asarray(fit.theta)[None, None], new_inputs, jax.random.PRNGKey(seed),
                       joint=joint)
    points = f"{fit.problem.node.statement.inputs.index_shape[0]}_new"
    return values, {name: [points] for name in values}


def ml_imputations(fit, seed: int = 0) -> tuple[dict, dict]:
    """The posterior predictive of a fit with missing outputs at every training row, each ``(1, 1, N)``, and its
    dims: ``<y>_mean`` and ``<y>_variance`` of ``y_i | y_obs`` (the imputations' moments at the missing rows) and
    one joint draw ``<y>``."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from gpdsl.inference.predict.draws import gp_regression_imputation_moments, gp_regression_replicates

    problem, theta = fit.problem, np.asarray(fit.theta)
    mean, variance = gp_regression_imputation_moments(problem, jnp.asarray(theta))
    target = problem.target
    replicate = gp_regression_replicates(problem, theta[None, None], jax.random.PRNGKey(seed))
    values = {target: replicate, f"{target}_mean": np.asarray(mean)[None, None],
              f"{target}_variance": np.asarray(variance)[None, None]}
    points = problem.node.statement.inputs.index_shape[0]
    return values, {f"{target}_mean": [points], f"{target}_variance": [points]}


def regression_predictions(problem, y, f) -> tuple[dict, dict]:
    """The predictions group of a GP regression view from the predictive of ``y*`` and of ``f*``, and its dims:
    ``<y>_mean``, ``<y>_variance`` and ``<f>_variance``, dim ``<N>_new``."""
    from gpdsl.results.method_output import predictive_moments

    points = f"{problem.node.statement.inputs.index_shape[0]}_new"
    return predictive_moments(problem.target, problem.name, points, y.mean, y.variance, f.variance)


def ml_refusal(model, facts, settings) -> str | None:
    """Why ``ml`` cannot integrate out the latent values of the model of ``facts``, or None: an HSGP's weights
    (:mod:`gpdsl.inference.families.hsgp_regression`) only under a normal likelihood whose location is ``f`` plus
    terms free of it."""
    node = getattr(facts, "node", None)
    approximation = getattr(getattr(node, "statement", None), "approximation", None)
    if approximation is None or approximation.name != HSGP:
        return None
    if facts.likelihood != "normal":
        return (f"ml integrates out an HSGP's weights under a normal likelihood; this model's is {facts.likelihood}: "
                "use --method pm --approximation laplace, gibbs or nuts")
    if not facts.node.shifted:
        return (f"ml needs the location of the normal likelihood to be '{facts.node.name}' plus terms free of it "
                "(an offset)")
    return None


def ml_report(results, model=None, settings=None):
    """The fit's report (:class:`~gpdsl.results.report.RunReport`): the optimiser's outcome, the log marginal
    likelihood and the objective."""
    from gpdsl.results.report import number, optimiser, optimiser_report

    report = optimiser(results)
    return optimiser_report(results, "type-II maximum likelihood (MAP where there are priors)",
                            f"log marginal likelihood {number(report, 'log_marginal')}, objective "
                            f"{number(report, 'log_posterior')}")
