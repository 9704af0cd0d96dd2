"""Results of a run on standardised data, shown in the data's original units.

A run whose data file recorded a standardisation (:mod:`gpdsl.data.scaling`, written by ``gpdsl data
--standardize``) keeps it in the results' ``data_scaling`` attribute. An outcome ``y`` standardised that
way, and each latent GP ``f`` that is its mean in ``y ~ normal(f, ...)``, are in ``y``'s units: their
values, draws and predictive means map back as ``centre + scale * value``, their variances as
``scale**2 * value`` (names ending ``_variance``) and their standard deviations as ``scale * value``
(``_sd``). Parameters (a noise variance, a kernel's variance) keep the scale the model saw: their
meaning is the model's, not the data's.
"""

from __future__ import annotations

from typing import Any

from gpdsl.data.scaling import Scaling, scalings_from_json
from gpdsl.errors import GpdslError
from gpdsl.ir.nodes import LikelihoodStatement, Ref
from gpdsl.results.arviz_compat import groups, root_attrs

GROUPS = ("predictions", "posterior_predictive", "observed_data")
"""The groups whose outcome-like variables :func:`in_original_units` maps back."""


def data_scalings(results: Any) -> dict[str, Scaling]:
    """How the run's data variables were standardised, by name (none for data that were not).

    Raises
    ------
    GpdslError
        The ``data_scaling`` attribute is not what gpdsl writes.
    """
    try:
        return scalings_from_json(root_attrs(results).get("data_scaling"))
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise GpdslError(f"the results' data_scaling attribute is malformed ({error})") from None


def stored_model(results: Any):
    """The checked model whose source the results keep (``model_source``); None when they keep none."""
    from gpdsl.semantics.model_text import check_text

    attrs = root_attrs(results)
    source = attrs.get("model_source")
    if not isinstance(source, str):
        return None
    try:
        return check_text(source, f"<model_source of the results, {attrs.get('model_name', 'model')}>")[0]
    except GpdslError:
        return None


def outcome_units(model, scalings: dict[str, Scaling]) -> dict[str, Scaling]:
    """The variables in the units of a standardised outcome: the outcome and the latent GPs that are its mean.

    Parameters
    ----------
    model : Model
        The checked model of the run.
    scalings : dict of str to Scaling
        From :func:`data_scalings`.

    Returns
    -------
    dict of str to Scaling
        By variable name.
    """
    gp_values = {statement.target.name for statement in (*model.gp_statements(), *model.student_t_processes())}
    units = {}
    for statement in model.likelihoods():
        scaling = scalings.get(statement.target.name)
        if scaling is None:
            continue
        units[statement.target.name] = scaling
        if isinstance(statement, LikelihoodStatement) and statement.distribution.name == "normal":
            mean = statement.distribution.args[0][1]
            if isinstance(mean, Ref) and mean.name in gp_values:
                units[mean.name] = scaling
    return units


def in_original_units(results: Any, group: str, model) -> tuple[Any, list[str]]:
    """A group of the results with its outcome-like variables in the original units.

    Parameters
    ----------
    results : arviz.InferenceData or xarray.DataTree
    group : str
        One of :data:`GROUPS`; any other group is returned as it is.
    model : Model or None
        The run's checked model (:func:`stored_model`); without one nothing is mapped.

    Returns
    -------
    dataset : xarray.Dataset
        The group, with the mapped variables replaced.
    mapped : list of str
        The names of the variables mapped back.
    """
    present = groups(results)
    if group not in present:
        raise GpdslError(f"results have no {group} group (groups: {', '.join(present) or 'none'})")
    dataset = present[group]
    units = outcome_units(model, data_scalings(results)) if group in GROUPS and model is not None else {}
    mapped = {}
    for name in dataset.data_vars:
        scaling = _unit_of(str(name), units)[1]
        if scaling is None:
            continue
        values = dataset[name]
        if name.endswith("_variance"):
            mapped[name] = values.copy(data=scaling.original_variance(values.values))
        elif name.endswith("_sd"):
            mapped[name] = values.copy(data=scaling.scale * values.values)
        else:
            mapped[name] = values.copy(data=scaling.original(values.values))
    return dataset.assign(mapped), sorted(mapped)


def _unit_of(name: str, units: dict[str, Scaling]) -> tuple[str | None, Scaling | None]:
    for base, scaling in units.items():
        if name == base or name.startswith(base + "_"):
            return base, scaling
    return None, None


def units_note(results: Any, group: str, mapped, standardized: bool = False) -> str | None:
    """One line saying which values a summary shows in the original units, or that the data were standardised.

    Parameters
    ----------
    results : arviz.InferenceData or xarray.DataTree
    group : str
        The group summarised.
    mapped : sequence of str
        The variables shown in the original units (``summarize(...).attrs["original_units"]``).
    standardized : bool
        The summary was asked for the values as the model saw them.

    Returns
    -------
    str or None
        None when the run's data were not standardised.
    """
    scalings = data_scalings(results)
    if not scalings:
        return None
    standardised = ", ".join(sorted(scalings))
    if standardized:
        return f"the run's data were standardised ({standardised}); shown as the model saw them"
    if not mapped:
        where = "predictions in the original units: --group predictions" if "predictions" in groups(results) else \
            "parameters are on that scale"
        return f"the run's data were standardised ({standardised}: centre and scale in the data file); {where}"
    model = stored_model(results)
    units = outcome_units(model, scalings) if model is not None else {}
    scales = "; ".join(f"{name}: centre {_number(scaling.centre)}, scale {_number(scaling.scale)}"
                       for name, scaling in units.items() if name in scalings)
    return (f"{', '.join(mapped)} in the original units ({scales}; the data file's standardisation); "
            f"--standardized shows the values the model saw")


def _number(values) -> str:
    import numpy as np

    values = np.atleast_1d(values)
    text = ", ".join(f"{value:.4g}" for value in values[:4]) + (", ..." if values.size > 4 else "")
    return text if values.size == 1 else f"[{text}]"
