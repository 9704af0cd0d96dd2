"""What every method hands to the results module, and the one path from it to results.

A method (NUTS through Stan, or one of gpdsl's engines) returns a :class:`MethodOutput`;
:func:`method_results` adds what is the same for every method (dims named after the model's size
symbols, the data groups, the model source and hash, the method and its full settings, the seed,
versions and timings) and builds the ArviZ-conventional results.

Root attributes of every results file
-------------------------------------
``method``, ``engine`` (``"stan"`` or ``"gpdsl"``), ``settings`` (JSON of the method's settings),
``seed`` (the one used, drawn when none was given), ``model_name``, ``model_hash``, ``model_source``,
``sizes`` (JSON), ``versions`` (JSON: gpdsl, Python, NumPy, and the method's own libraries),
``timings`` (JSON, seconds: ``compile``, ``warmup``, ``sampling``, ``total``; a part that does not
apply is 0) and ``report`` (JSON: what the method reports besides draws, e.g. the adapted proposal
or the optimiser's trace summary), plus the method's own ``attrs``.
"""

from __future__ import annotations

import json
import platform
from dataclasses import asdict, dataclass, field, is_dataclass
from typing import Any

import numpy as np

import gpdsl
from gpdsl.ir.nodes import Model
from gpdsl.ir.values import transformed_draws
from gpdsl.results.arviz_compat import root_attrs
from gpdsl.results.build import build_results

TIMING_PARTS = ("compile", "warmup", "sampling", "total")


@dataclass
class MethodOutput:
    """A method's draws and reports, before they become results.

    Attributes
    ----------
    posterior : dict of str to numpy.ndarray
        Draws shaped ``(chain, draw, *shape)``; a point estimate is one chain of one draw. Model
        variables get their dims from their declarations.
    sample_stats : dict of str to numpy.ndarray
        Per-draw statistics under ArviZ names (``lp``, ``acceptance_rate``, ...).
    timings : dict of str to float
        Seconds spent in ``compile``, ``warmup``, ``sampling`` and ``total``.
    report : dict
        JSON-able facts of the run (stored as the ``report`` attribute).
    dims : dict of str to list of str
        Dims of variables that are not declared in the model (e.g. ``X_variance``).
    predictions : dict of str to numpy.ndarray, optional
        Draws at new inputs, shaped ``(chain, draw, *shape)``.
    log_likelihood : dict of str to numpy.ndarray, optional
        Pointwise log-likelihood of the observed variables, ``(chain, draw, *points)``.
    posterior_predictive : dict of str to numpy.ndarray, optional
        Replicates of the observed variables, ``(chain, draw, *shape)``.
    attrs : dict
        Further root attributes of the method (e.g. ``backend``).
    versions : dict of str to str
        Versions of the libraries the method ran on (beyond gpdsl, Python and NumPy).
    state : object, optional
        The method's own result object for Python callers (e.g. a variational fit); not stored.
    """

    posterior: dict
    sample_stats: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    report: dict = field(default_factory=dict)
    dims: dict = field(default_factory=dict)
    predictions: dict | None = None
    log_likelihood: dict | None = None
    posterior_predictive: dict | None = None
    attrs: dict = field(default_factory=dict)
    versions: dict = field(default_factory=dict)
    state: Any = None


def point_estimate(values: dict, stats: dict, seconds: float, report: dict, inference: str,
                   dims: dict | None = None) -> MethodOutput:
    """The :class:`MethodOutput` of an optimiser's fit, stored like a one-draw posterior.

    Parameters
    ----------
    values : dict of str to array_like
        The estimates by name (hyperparameters, and e.g. the inducing inputs).
    stats : dict of str to float or array_like
        Statistics of the one draw (``lp``: the objective the fit maximised).
    seconds : float
        The fit's wall time (``timings.sampling``).
    report : dict
        The optimiser's report and any variational parameters (the ``report`` attribute).
    inference : str
        What the estimate is (the ``inference`` attribute; "(one draw: the point estimate)" is appended).
    dims : dict of str to list of str, optional
        Dims of variables not declared in the model.
    """
    import jax

    return MethodOutput({name: np.asarray(value)[None, None] for name, value in values.items()},
                        {name: np.asarray(value)[None, None] for name, value in stats.items()},
                        timings={"sampling": seconds}, report=report, dims=dict(dims or {}),
                        attrs={"inference": f"{inference} (one draw: the point estimate)"},
                        versions={"jax": jax.__version__})


def predictive_moments(target: str, latent: str, points: str, y_mean, y_variance, f_variance=None) -> tuple[dict, dict]:
    """The predictions group of a point estimate's Gaussian predictive at new inputs, and its dims: ``<y>_mean``,
    ``<y>_variance`` (noise included) and, when given, ``<f>_variance`` (noise excluded), dim ``points``."""
    values = {f"{target}_mean": y_mean, f"{target}_variance": y_variance}
    if f_variance is not None:
        values[f"{latent}_variance"] = f_variance
    return ({name: np.asarray(value)[None, None] for name, value in values.items()},
            {name: [points] for name in values})


def data_groups(model: Model, data: dict) -> tuple[dict, dict, dict]:
    """Observed data (likelihood targets), constant data (the rest but sizes) and their dims.

    Size symbols are not stored as variables: they are the lengths of the dims named after them.
    """
    observed_names = {s.target.name for s in model.likelihoods()}
    observed, constant, dims = {}, {}, {}
    for name, var in model.data.items():
        if name in model.sizes:
            continue
        value = np.asarray(data[name])
        (observed if name in observed_names else constant)[name] = value
        dims[name] = list(var.type.dim_names(name))
    return observed, constant, dims


def method_results(model: Model, data: dict, method: str, engine: str, settings, seed: int,
                   output: MethodOutput):
    """The results of any method's run.

    Parameters
    ----------
    model : Model
        The checked model.
    data : dict
        The validated data the method ran on.
    method : str
        The method's registry name.
    engine : {"stan", "gpdsl"}
        Who ran it.
    settings : dataclass
        The method's settings, stored in full.
    seed : int
        The seed used.
    output : MethodOutput

    Returns
    -------
    arviz.InferenceData or xarray.DataTree
    """
    posterior = {**output.posterior, **transformed_draws(model, data, output.posterior)}
    variables = {**model.parameters, **model.transformed, **model.latents}
    dims = {name: list(variables[name].type.dim_names(name)) for name in posterior if name in variables}
    dims.update(output.dims)
    observed, constant, data_dims = data_groups(model, data)
    dims.update(data_dims)
    timings = {part: float(output.timings.get(part) or 0.0) for part in TIMING_PARTS}
    versions = {"gpdsl": gpdsl.__version__, "python": platform.python_version(), "numpy": np.__version__,
                **output.versions}
    attrs = {
        "method": method, "engine": engine,
        "settings": json.dumps(asdict(settings) if is_dataclass(settings) else dict(settings), default=str),
        "seed": int(seed), "model_name": model.name, "model_hash": model.source_hash,
        "model_source": model.source.text, "sizes": json.dumps({n: int(data[n]) for n in model.sizes}),
        "versions": json.dumps(versions), "timings": json.dumps(timings),
        "report": json.dumps(output.report, default=float), **output.attrs,
    }
    coords = observed_entry_dims(model, data, output.log_likelihood or {}, dims)
    return build_results(posterior, dims=dims, sample_stats=output.sample_stats, observed_data=observed,
                         constant_data=constant, predictions=output.predictions,
                         log_likelihood=output.log_likelihood, posterior_predictive=output.posterior_predictive,
                         attrs=attrs, coords=coords)


def observed_entry_dims(model: Model, data: dict, log_likelihood: dict, dims: dict) -> dict:
    """For each outcome with missing entries whose pointwise log-likelihood covers its observed entries alone:
    that group's dim ``<N>_observed`` (added to ``dims``), whose coordinates (returned) are the observed entries'
    1-based indices, so that ``log_likelihood.y`` lines up with ``observed_data.y``."""
    from gpdsl.data.missing import observed_masks

    coords = {}
    for name, mask in observed_masks(model, data).items():
        if name not in log_likelihood or mask.ndim != 1 or np.shape(log_likelihood[name])[-1] != mask.sum():
            continue
        dim = f"{model.data[name].type.dim_names(name)[0]}_observed"
        dims[f"log_likelihood/{name}"] = [dim]
        coords[dim] = np.flatnonzero(mask) + 1
    return coords


JSON_ATTRIBUTES = ("settings", "sizes", "versions", "timings", "report")
"""The root attributes every results file holds as a JSON object (:func:`results_json` parses them)."""


def results_json(results, name: str) -> dict:
    """A JSON root attribute of results (``settings``, ``timings``, ``report``, ...) as a dict.

    Parameters
    ----------
    results : arviz.InferenceData or xarray.DataTree
        Results of :func:`gpdsl.run` (or read by :func:`gpdsl.read_results`).
    name : str
        The attribute (see the module docstring for those every results file has).

    Returns
    -------
    dict
        The parsed attribute; empty when the results do not have it.
    """
    value = root_attrs(results).get(name)
    return json.loads(value) if isinstance(value, str) else {}


STOPPED_SHORT = ("iterations", "evaluations", "line_search")
"""Optimiser stops (:data:`gpdsl.inference.optimise.lbfgs.STOP_MESSAGES`) that mean a fit did not converge."""


def not_converged(results) -> list[str]:
    """Why a run that wrote its results did not converge, one sentence each; empty when nothing says so.

    A fit's optimiser that stopped short (:data:`STOPPED_SHORT`), and chains that did not move in warmup
    (``report.stuck_chains``, with the run's ``report.warnings`` naming them).
    """
    report = results_json(results, "report")
    reasons = [str(warning) for warning in report.get("warnings", [])] if report.get("stuck_chains") else []
    optimizer = report.get("optimizer", {})
    if optimizer.get("stop") in STOPPED_SHORT:
        reasons.append(f"the optimiser did not converge after {optimizer.get('iterations')} iterations: "
                       f"{optimizer.get('message')}")
    return reasons
