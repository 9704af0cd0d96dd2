"""Variational EM on a model file's Bayesian GPLVM, with results in the common format.

A variational fit is stored like a one-draw posterior (``chain = 1``, ``draw = 1``) so that every
results tool reads it: the ``posterior`` group holds the variational means of the latent inputs under
their own name (``X``, dims ``(N, Q)``), their variances as ``X_variance``, the inducing inputs as
``inducing_inputs`` (dims ``(M, Q)``) and the point estimates of the hyperparameters. ``sample_stats``
holds ``lp`` (the final bound) and ``bound_trace`` (the bound after each optimiser iteration, dim
``iteration``). The root attrs carry ``method = "vem"``, the settings, the optimiser's report
and the model source, from which :func:`fit_from_results` rebuilds the fit for predictions and plots.
"""

from __future__ import annotations

import json
from dataclasses import asdict

import jax.numpy as jnp
import numpy as np

from gpdsl.backends.stan.nuts import data_groups
from gpdsl.errors import GpdslError
from gpdsl.inference.families.gplvm import gplvm_problem
from gpdsl.inference.variational.vem import (
    VariationalParams,
    VEMFit,
    VEMSettings,
    fit_vem,
)
from gpdsl.ir.nodes import Model
from gpdsl.results.arviz_compat import groups, root_attrs
from gpdsl.results.build import build_results

INDUCING_DIMS = ["M"]


def fit_model(model: Model, data: dict, settings: VEMSettings | None = None, *, progress: bool = False):
    """Fit a Bayesian GPLVM by variational EM and return ``(results, fit)``.

    Parameters
    ----------
    model : Model
        The checked model (``X ~ normal(0, 1); F ~ gp(X, k); Y ~ normal(F, s)``).
    data : dict
        Validated data; missing outputs are NaN (load them with ``allow_missing``).
    settings : VEMSettings, optional
        Options of the fit.
    progress : bool
        Print the bound as the optimiser goes.

    Returns
    -------
    results : arviz.InferenceData or xarray.DataTree
    fit : VEMFit
    """
    settings = settings or VEMSettings()
    problem = gplvm_problem(model, data, "vem")
    fit = fit_vem(problem, settings, progress=progress)
    return vem_results(model, data, fit), fit


def vem_results(model: Model, data: dict, fit: VEMFit):
    """The results of a variational fit (see the module docstring)."""
    problem = fit.problem
    latent = problem.latent
    latent_dims = list(model.latents[latent].type.dim_names(latent))
    posterior = {latent: np.asarray(fit.params.mean)[None, None],
                 f"{latent}_variance": fit.variance[None, None],
                 "inducing_inputs": np.asarray(fit.params.inducing)[None, None]}
    dims = {latent: latent_dims, f"{latent}_variance": latent_dims,
            "inducing_inputs": INDUCING_DIMS + latent_dims[1:]}
    for name, value in fit.hyperparameters().items():
        posterior[name] = np.asarray(value)[None, None]
        dims[name] = list(model.parameters[name].type.dim_names(name))
    stats = {"lp": np.asarray([[fit.bound]]), "bound_trace": np.asarray(fit.trace)[None, None]}
    dims["bound_trace"] = ["iteration"]
    observed, constant, data_dims = data_groups(model, data)
    dims.update(data_dims)
    attrs = {"method": "vem", "engine": "gpdsl", "inference": "variational (one draw: the fitted q(X) and point "
             "estimates)", "settings": json.dumps(asdict(fit.settings)), "optimizer": json.dumps(fit.report),
             "latent": latent, "model_hash": model.source_hash, "model_name": model.name,
             "model_source": model.source.text, "sizes": json.dumps({n: int(data[n]) for n in model.sizes}),
             "wall_time": fit.report["seconds"], "seed": fit.settings.seed}
    return build_results(posterior, dims=dims, sample_stats=stats, observed_data=observed, constant_data=constant,
                         attrs=attrs)


def fit_from_results(results) -> tuple[Model, VEMFit]:
    """Rebuild the model and the :class:`VEMFit` of a results file written by :func:`vem_results`.

    Raises
    ------
    GpdslError
        The results are not a variational fit of gpdsl.
    """
    from gpdsl.api import load_model
    from gpdsl.data_io import load_data

    attrs = root_attrs(results)
    if attrs.get("method") != "vem" or "model_source" not in attrs:
        raise GpdslError("these results are not a variational fit (gpdsl fit); latent-space plots and "
                         "GPLVM predictions need one")
    model = load_model(attrs["model_source"])
    parts = groups(results)
    values = {}
    for group in ("observed_data", "constant_data"):
        if group in parts:
            values.update({name: np.asarray(parts[group][name]) for name in parts[group].data_vars})
    values.update(json.loads(attrs.get("sizes", "{}")))
    data, _ = load_data(values, model, allow_missing=[n for n, v in values.items() if np.issubdtype(np.asarray(v).dtype, np.floating)
                                                     and np.isnan(v).any()])
    problem = gplvm_problem(model, data, "vem")
    settings_dict = json.loads(attrs["settings"])
    settings = VEMSettings(**settings_dict)
    posterior = parts["posterior"]
    latent = attrs["latent"]
    mean = np.asarray(posterior[latent])[0, 0]
    variance = np.asarray(posterior[f"{latent}_variance"])[0, 0]
    theta = problem.unconstrain_theta({name: np.asarray(posterior[name])[0, 0] for name in problem.theta_names})
    params = VariationalParams(jnp.asarray(mean), jnp.log(jnp.asarray(variance)),
                               jnp.asarray(np.asarray(posterior["inducing_inputs"])[0, 0]), theta)
    sample_stats = parts["sample_stats"]
    fit = VEMFit(problem, settings, params, float(np.asarray(sample_stats["lp"])[0, 0]),
                 np.asarray(sample_stats["bound_trace"])[0, 0], json.loads(attrs["optimizer"]))
    return model, fit
