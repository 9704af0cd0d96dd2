"""The ``vem`` method: variational EM on a GPLVM, with results in the common format.

A variational fit is stored like a one-draw posterior (``chain = 1``, ``draw = 1``) so that every
results tool reads it: the ``posterior`` group holds the variational means of the latent inputs under
their own name (``X``, dims ``(N, Q)``), their variances as ``X_variance``, the inducing inputs as
``inducing_inputs`` (dims ``(M, Q)``) and the point estimates of the hyperparameters; with a GP prior on the
latent inputs also the parameters of ``q(X)``, ``X_mu_bar`` and ``X_lambda`` (Opper-Archambeau form). ``sample_stats``
holds ``lp`` (the final bound) and ``bound_trace`` (the bound after each optimiser iteration, dim
``iteration``). The root attrs carry ``method = "vem"``, the settings, the optimiser's report (under
``report.optimizer``) and the model source, from which :func:`fit_from_results` rebuilds the fit for
predictions and plots.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from gpdsl.errors import GpdslError
from gpdsl.inference.progress import counted, stage
from gpdsl.settings.fitting import VEMSettings

INDUCING_DIMS = ["M"]


def run_vem(model, data, settings: VEMSettings, context):
    """Fit the GPLVM the registry classified (``context.facts``) by variational EM."""
    from gpdsl.inference.families.gplvm import gplvm_view
    from gpdsl.inference.variational.vem import fit_vem_starts

    problem = gplvm_view(model, data, context.facts)
    with stage(f"variational EM: L-BFGS on the bound, {counted(settings.starts, 'start')}", enabled=context.progress):
        fit = fit_vem_starts(problem, replace(settings, seed=context.seed), progress=context.progress)
    return fitted_output(model, fit, context)


def fitted_output(model, fit, context):
    """The method output of a variational fit of a GPLVM (:func:`vem_output`), with its predictions at
    ``context.new_inputs`` when given (:func:`vem_predictions`); each a progress stage with ``context.progress``."""
    from gpdsl.inference.predict.gp_prior_latents import count_points

    with stage("the means and variances of q(X)", enabled=context.progress):
        output = vem_output(model, fit)
    if context.new_inputs is not None:
        with stage(f"predictions at {counted(count_points(context.new_inputs), 'new point')}",
                   enabled=context.progress):
            output.predictions, prediction_dims = vem_predictions(model, fit, context.new_inputs)
        output.dims.update(prediction_dims)
    output.state = fit
    return output


def vem_predictions(model, fit, new) -> tuple[dict, dict]:
    """The predictions group of a variational fit at new points, and its dimension names.

    ``new`` maps names to values: the new inputs of the latent inputs' GP prior (by the names the model
    gives them) and, optionally, new outputs under the output's name with NaN where unobserved (required
    for a Bayesian GPLVM, whose ``q(X*)`` is fitted to them); an array is the prior's new input points.
    Stored: ``<Y>_new`` and ``<Y>_new_variance`` (the predictive mean and variance of every output column,
    noise included), ``<X>_new`` and ``<X>_new_variance`` (``q(X*)``) and, when ``q(X*)`` was fitted to new
    outputs, ``log_density`` (eq. 36).
    """
    from collections.abc import Mapping

    from gpdsl.inference.predict.gp_prior_latents import predict_outputs

    problem = fit.problem
    output, latent = problem.output, problem.latent
    if isinstance(new, Mapping):
        names = [name for name in (problem.latent_prior.statement.inputs.names if problem.latent_prior else ())
                 if name]
        inputs = {name: new[name] for name in names if name in new} or None
        Y_new = new.get(output)
    else:
        inputs, Y_new = new, None
    prediction = predict_outputs(fit, inputs, Y_new)
    point = f"{model.data[output].type.dim_names(output)[0]}_new"
    output_dims = [point, model.data[output].type.dim_names(output)[1]]
    latent_dims = [point, model.latents[latent].type.dim_names(latent)[1]]
    values = {f"{output}_new": prediction.mean, f"{output}_new_variance": prediction.variance,
              f"{latent}_new": prediction.latent.mean, f"{latent}_new_variance": prediction.latent.variance}
    dims = {f"{output}_new": output_dims, f"{output}_new_variance": output_dims, f"{latent}_new": latent_dims,
            f"{latent}_new_variance": latent_dims}
    if np.isfinite(prediction.latent.log_density):
        values["log_density"] = np.asarray(prediction.latent.log_density)
        dims["log_density"] = []
    return {name: np.asarray(value)[None, None] for name, value in values.items()}, dims


def vem_output(model, fit):
    """The :class:`~gpdsl.results.method_output.MethodOutput` of a variational fit (see the module docstring)."""
    import jax

    from gpdsl.results.method_output import MethodOutput

    latent = fit.problem.latent
    latent_dims = list(model.latents[latent].type.dim_names(latent))
    posterior = {latent: fit.mean[None, None],
                 f"{latent}_variance": fit.variance[None, None],
                 "inducing_inputs": np.asarray(fit.params.inducing)[None, None]}
    dims = {f"{latent}_variance": latent_dims, "inducing_inputs": INDUCING_DIMS + latent_dims[1:],
            "bound_trace": ["iteration"]}
    if fit.problem.latent_prior is not None:
        for name, value in zip(("mu_bar", "lambda"), fit.params.latent):
            posterior[f"{latent}_{name}"] = np.asarray(value)[None, None]
            dims[f"{latent}_{name}"] = latent_dims
    for name, value in fit.hyperparameters().items():
        posterior[name] = np.asarray(value)[None, None]
    stats = {"lp": np.asarray([[fit.bound]]), "bound_trace": np.asarray(fit.trace)[None, None]}
    return MethodOutput(posterior, stats, timings={"sampling": fit.report["seconds"]},
                        report={"optimizer": fit.report}, dims=dims,
                        attrs={"latent": latent, "inference": "variational (one draw: the fitted q(X) and point "
                                                             "estimates)"},
                        versions={"jax": jax.__version__})


def fit_from_results(results):
    """Rebuild the model and the :class:`~gpdsl.inference.variational.vem.VEMFit` of a ``vem`` results file.

    Returns
    -------
    model : Model
    fit : VEMFit

    Raises
    ------
    GpdslError
        The results are not a variational fit of gpdsl.
    """
    import jax.numpy as jnp

    from gpdsl.semantics.model_text import check_text
    from gpdsl.data.io import load_data
    from gpdsl.inference.families.gplvm import gplvm_problem
    from gpdsl.inference.variational.gp_prior_q import GPPriorQParams
    from gpdsl.inference.variational.latent_q import GaussianQParams
    from gpdsl.inference.variational.vem import VariationalParams, VEMFit
    from gpdsl.results.arviz_compat import groups, root_attrs
    from gpdsl.results.method_output import results_json
    from gpdsl.settings.recorded import recorded_settings

    attrs = root_attrs(results)
    if attrs.get("method") != "vem" or not isinstance(attrs.get("model_source"), str):
        raise GpdslError("these results are not a variational fit (gpdsl fit); latent-space plots and "
                         "GPLVM predictions need one")
    model, _ = check_text(attrs["model_source"], f"<model_source of the results, {attrs.get('model_name', 'model')}>")
    settings = recorded_settings(VEMSettings, results)
    try:
        parts = groups(results)
        values = {}
        for group in ("observed_data", "constant_data"):
            if group in parts:
                values.update({name: np.asarray(parts[group][name]) for name in parts[group].data_vars})
        values.update(results_json(results, "sizes"))
        missing = [n for n, v in values.items()
                   if np.issubdtype(np.asarray(v).dtype, np.floating) and np.isnan(v).any()]
        data, _ = load_data(values, model, allow_missing=missing)
        problem = gplvm_problem(model, data, "vem")
        posterior = parts["posterior"]
        latent = attrs["latent"]

        def value(name):
            return jnp.asarray(np.asarray(posterior[name])[0, 0])

        expected = tuple(int(d) for d in model.latents[latent].type.concrete_shape(data))
        for name in [latent, f"{latent}_variance"] if problem.latent_prior is None else \
                [f"{latent}_mu_bar", f"{latent}_lambda"]:
            stored = np.asarray(posterior[name])[0, 0]
            if stored.shape != expected or not np.isfinite(stored).all():
                found = f"it has shape {stored.shape}" if stored.shape != expected else "it holds NaN or infinities"
                raise GpdslError(f"the results' {name} is not a finite array of shape {expected} ({found}); the "
                                 "variational fit cannot be rebuilt")
        if problem.latent_prior is None:
            q = GaussianQParams(value(latent), jnp.log(value(f"{latent}_variance")))
        else:
            q = GPPriorQParams(value(f"{latent}_mu_bar"), value(f"{latent}_lambda"))
        theta = problem.unconstrain_theta({name: np.asarray(posterior[name])[0, 0] for name in problem.theta_names})
        params = VariationalParams(q, value("inducing_inputs"), theta)
        sample_stats = parts["sample_stats"]
        fit = VEMFit(problem, settings, params, float(np.asarray(sample_stats["lp"])[0, 0]),
                     np.asarray(sample_stats["bound_trace"])[0, 0], dict(results_json(results, "report")["optimizer"]))
    except (KeyError, IndexError, TypeError, ValueError) as error:
        raise GpdslError(f"the variational fit cannot be rebuilt from these results ({type(error).__name__}: "
                         f"{str(error)[:200]})") from None
    return model, fit


def vem_report(results, model, settings: VEMSettings):
    """The fit's report (:class:`~gpdsl.results.report.RunReport`): the optimiser's outcome and the final bound."""
    from gpdsl.results.report import number, optimiser, optimiser_report

    from gpdsl.ir.latent_hsgp import is_latent_hsgp

    features = next((s for s, _ in model.walk() if is_latent_hsgp(s)), None)
    inducing = f"M = {settings.num_inducing}" if features is None else \
        f"the {features.target.name} basis weights as inducing variables"
    return optimiser_report(results, f"variational EM ({settings.psi} Psi statistics, {inducing})",
                            f"final bound {number(optimiser(results), 'bound')}")
