"""Results files side by side: posterior statistics, run times, efficiency, agreement and LOO.

:func:`compare` reads any number of results files of one model's (or several models') fits to the same
data and returns a :class:`Comparison`: per parameter element the mean, sd, MCSE, bulk and tail ESS and
R-hat of each fit, with the z-score of its mean against the reference fit's in their combined MCSE; per
fit the wall times (compile, warmup, sampling), the minimum bulk ESS per second of sampling (warmup
included, as ``case_studies/filippone2014/bench.py`` counts it) and its ratio to the reference, and
``elpd_loo`` with its standard error where the file has a ``log_likelihood`` group. Fits stored as one
draw (variational and maximum-likelihood point estimates) are compared on their point estimates.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gpdsl.errors import GpdslError
from gpdsl.results import arviz_compat
from gpdsl.results.elements import checked_var_names, elements
from gpdsl.results.method_output import TIMING_PARTS, results_json
from gpdsl.results.summary import MAX_RHAT, divergent_transitions, failing_diagnostics, summarize

Z_FLAG = 4.0
MAX_DEFAULT_ELEMENTS = 20
PARAMETER_COLUMNS = ["mean", "sd", "mcse_mean", "ess_bulk", "ess_tail", "r_hat", "q5", "q95"]
DIFFERENCE_COLUMNS = ["difference", "z", "flagged", "in_reference_sd"]
FIT_COLUMNS = ["file", "method", "kind", "chains", "draws", *(f"{part}_s" for part in TIMING_PARTS),
               "min_ess_bulk", "min_ess_per_s", "ratio_to_reference", "max_r_hat", "divergences", "converged",
               "elpd_loo", "elpd_loo_se", "p_loo", "loo_warning"]


@dataclass(frozen=True)
class Fit:
    """One results object with its label and, when read from a file, its path."""

    label: str
    results: Any
    path: str | None = None

    @property
    def groups(self) -> dict:
        """The results' groups as datasets."""
        return arviz_compat.groups(self.results)

    @property
    def posterior(self):
        """The posterior group."""
        return self.groups["posterior"]

    @property
    def is_point(self) -> bool:
        """A point estimate stored as one chain of one draw."""
        return self.posterior.sizes["chain"] * self.posterior.sizes["draw"] == 1

    @property
    def timings(self) -> dict[str, float]:
        """Seconds of ``compile``, ``warmup``, ``sampling`` and ``total`` (NaN when the file has none)."""
        stored = results_json(self.results, "timings")
        return {part: _seconds(stored.get(part)) for part in TIMING_PARTS}


@dataclass
class Comparison:
    """What :func:`compare` found.

    Attributes
    ----------
    reference : str
        The label of the reference fit.
    fits : pandas.DataFrame
        One row per fit (index: label): ``file``, ``method``, ``kind`` (``draws`` or ``point estimate``),
        ``chains``, ``draws``, seconds of ``compile``, ``warmup``, ``sampling`` and ``total``,
        ``min_ess_bulk`` over the compared elements, ``min_ess_per_s`` (that over warmup plus sampling
        seconds), ``ratio_to_reference``, ``max_r_hat``, ``divergences`` (NaN where the sampler records none),
        ``converged`` (Stan's and ArviZ's guidance: every r_hat at most 1.01, every bulk ESS at least 100 per
        chain, no divergence; NaN for a point estimate), ``elpd_loo``, ``elpd_loo_se``, ``p_loo`` and
        ``loo_warning`` (NaN where there is no ``log_likelihood`` group).
    parameters : pandas.DataFrame
        Indexed by (element, fit): ``mean``, ``sd``, ``mcse_mean``, ``ess_bulk``, ``ess_tail``, ``r_hat``,
        ``q5``, ``q95`` (a point estimate has only ``mean``).
    differences : pandas.DataFrame
        Indexed by (element, fit) for every fit but the reference: ``difference`` of the means,
        ``z`` (the difference over the root of the summed squared MCSEs; NaN unless both fits have draws),
        ``flagged`` (``|z| > 4``) and ``in_reference_sd`` (the difference in reference posterior sds).
    notes : list of str
        Things to know when reading the tables (different model sources, missing timings).
    """

    reference: str
    fits: pd.DataFrame
    parameters: pd.DataFrame
    differences: pd.DataFrame
    notes: list[str] = field(default_factory=list)

    def flagged(self) -> pd.DataFrame:
        """The rows of :attr:`differences` whose ``|z|`` exceeds 4."""
        return self.differences[self.differences["flagged"]]

    def to_markdown(self) -> str:
        """The comparison as Markdown: the fits table, the parameters table, then the verdict and notes."""
        from gpdsl.results.compare_table import comparison_markdown

        return comparison_markdown(self)


def compare(*fits, reference=None, var_names: Sequence[str] | None = None,
            labels: Sequence[str] | None = None) -> Comparison:
    """Compare fits of the same data side by side.

    Parameters
    ----------
    *fits : path or results, or one mapping of label to path or results
        Results files (``.nc``) or results objects, at least two; or one results file on its own.
    reference : str, path or int, optional
        The fit the others are measured against (ratios of ESS per second, z-scores): a label, the
        path it was given as, or a position. The first fit by default.
    var_names : sequence of str, optional
        Posterior variables to compare; by default the model's parameters that every fit holds (the
        small variables every posterior holds when the files carry no model source).
    labels : sequence of str, optional
        Names of the fits in the tables; default the file names without ``.nc`` (the method for
        results objects).

    Returns
    -------
    Comparison

    Raises
    ------
    GpdslError
        A file cannot be read, the fits were made on different data, a variable is missing, or the
        reference is not one of the fits.
    """
    loaded = _loaded(fits, labels)
    if not loaded:
        raise GpdslError("nothing to compare: give one or more results files")
    chosen = _reference(loaded, reference)
    ordered = [chosen] + [fit for fit in loaded if fit is not chosen]
    notes = _same_problem(ordered)
    names = _compared_names(ordered, var_names)
    parameters = {fit.label: _parameter_rows(fit, names) for fit in ordered}
    rows = [fit_row(fit, parameters[fit.label]) for fit in ordered]
    fits_table = pd.DataFrame(rows, index=[fit.label for fit in ordered], columns=FIT_COLUMNS)
    rate = fits_table.loc[chosen.label, "min_ess_per_s"]
    fits_table["ratio_to_reference"] = fits_table["min_ess_per_s"] / rate if rate > 0 else np.nan
    notes += [f"{fit.label}: the file records no timings" for fit in ordered
              if all(math.isnan(v) for v in fit.timings.values())]
    parameter_table = _stacked(parameters, PARAMETER_COLUMNS)
    differences = _differences(parameters, chosen.label)
    return Comparison(chosen.label, fits_table, parameter_table, differences, notes)


def min_ess_per_second(table: pd.DataFrame, timings: Mapping[str, float]) -> tuple[float, float]:
    """The smallest bulk ESS of a summary table, and it over the seconds of warmup plus sampling.

    Parameters
    ----------
    table : pandas.DataFrame
        Rows of compared elements with an ``ess_bulk`` column (:func:`gpdsl.results.summary.summarize`).
    timings : mapping
        The results' ``timings`` (seconds of ``warmup`` and ``sampling``).

    Returns
    -------
    min_ess : float
    per_second : float
        NaN when the seconds are unknown or zero.
    """
    min_ess = float(np.nanmin(table["ess_bulk"])) if len(table) and table["ess_bulk"].notna().any() else np.nan
    seconds = _seconds(timings.get("warmup")) + _seconds(timings.get("sampling"))
    return min_ess, (min_ess / seconds if seconds > 0 else np.nan)


def fit_row(fit: Fit, parameters: pd.DataFrame) -> dict:
    """One row of :attr:`Comparison.fits` (without the ratio)."""
    timings = fit.timings
    min_ess, per_second = min_ess_per_second(parameters, timings) if not fit.is_point else (np.nan, np.nan)
    row = {"file": fit.path or "", "method": method_label(fit.results),
           "kind": "point estimate" if fit.is_point else "draws",
           "chains": fit.posterior.sizes["chain"], "draws": fit.posterior.sizes["draw"],
           **{f"{part}_s": timings[part] for part in TIMING_PARTS},
           "min_ess_bulk": min_ess, "min_ess_per_s": per_second,
           "max_r_hat": float(np.nanmax(parameters["r_hat"])) if parameters["r_hat"].notna().any() else np.nan,
           "divergences": _divergences(fit)}
    row["converged"] = np.nan if fit.is_point else float(not convergence_problems(row, parameters))
    row.update(_loo(fit))
    return row


def convergence_problems(row: Mapping, parameters: pd.DataFrame) -> list[str]:
    """Why a fit's draws fail Stan's and ArviZ's guidance (r_hat, bulk ESS per chain, divergences), in words.

    Parameters
    ----------
    row : mapping
        The fit's row of :attr:`Comparison.fits` (``chains``, ``divergences``).
    parameters : pandas.DataFrame
        Its compared elements (``r_hat``, ``ess_bulk``).
    """
    high_rhat, low_ess, threshold = failing_diagnostics(parameters, int(row["chains"]))
    problems = []
    if len(high_rhat):
        problems.append(f"max r_hat {float(np.nanmax(parameters['r_hat'])):.3f} > {MAX_RHAT}")
    if len(low_ess):
        problems.append(f"min bulk ESS {float(np.nanmin(parameters['ess_bulk'])):.0f} < {threshold}")
    if np.isfinite(row["divergences"]) and row["divergences"] > 0:
        problems.append(f"{int(row['divergences'])} divergences")
    return problems


def _divergences(fit: Fit) -> float:
    count = divergent_transitions(fit.groups.get("sample_stats"))
    return np.nan if count is None else float(count)


def method_label(results) -> str:
    """The method of results with the settings that tell its variants apart (``pm (ep, 16 importance draws)``)."""
    attrs = arviz_compat.root_attrs(results)
    method = str(attrs.get("method", "unknown"))
    settings = {**results_json(results, "settings"), **({"backend": attrs["backend"]} if "backend" in attrs else {})}
    details = [str(settings[key]) for key in ("approximation", "theta_update", "psi", "backend") if settings.get(key)]
    if settings.get("num_importance"):
        details.append(f"{settings['num_importance']} importance draws")
    return f"{method} ({', '.join(details)})" if details else method


def _seconds(value) -> float:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return np.nan
    return seconds if math.isfinite(seconds) and seconds >= 0 else np.nan


def _loaded(fits, labels) -> list[Fit]:
    from gpdsl.results.io import read_netcdf

    if len(fits) == 1 and isinstance(fits[0], Mapping):
        labels, fits = list(fits[0]), list(fits[0].values())
    if len(fits) == 1 and isinstance(fits[0], (list, tuple)):
        fits = list(fits[0])
    if labels is not None and len(labels) != len(fits):
        raise GpdslError(f"{len(labels)} labels for {len(fits)} fits")
    loaded = []
    for index, source in enumerate(fits):
        if isinstance(source, (str, os.PathLike)):
            results, path = read_netcdf(source), os.fspath(source)
            label = Path(path).name.removesuffix(".nc")
        else:
            results, path = source, None
            label = str(arviz_compat.root_attrs(source).get("method", f"fit {index + 1}"))
        loaded.append(Fit(labels[index] if labels is not None else label, results, path))
    return _unique_labels(loaded)


def _unique_labels(fits: list[Fit]) -> list[Fit]:
    counts: dict[str, int] = {}
    for fit in fits:
        counts[fit.label] = counts.get(fit.label, 0) + 1
    seen: dict[str, int] = {}
    unique = []
    for fit in fits:
        if counts[fit.label] > 1:
            seen[fit.label] = seen.get(fit.label, 0) + 1
            fit = Fit(f"{fit.label} #{seen[fit.label]}", fit.results, fit.path)
        unique.append(fit)
    return unique


def _reference(fits: list[Fit], reference) -> Fit:
    if reference is None:
        return fits[0]
    if isinstance(reference, int) and not isinstance(reference, bool):
        if not 0 <= reference < len(fits):
            raise GpdslError(f"reference {reference} is not a position among the {len(fits)} fits")
        return fits[reference]
    wanted = os.fspath(reference)
    for fit in fits:
        if wanted == fit.label or (fit.path and Path(wanted).resolve() == Path(fit.path).resolve()):
            return fit
    raise GpdslError(f"the reference {wanted} is not one of the compared fits",
                     hint=f"the fits: {', '.join(fit.path or fit.label for fit in fits)}")


def _same_problem(fits: list[Fit]) -> list[str]:
    """Refuse fits to different data; note different model sources."""
    first = fits[0]
    for other in fits[1:]:
        a, b = first.groups.get("observed_data"), other.groups.get("observed_data")
        if a is None or b is None:
            continue
        for name in sorted(set(a.data_vars) & set(b.data_vars)):
            same = a[name].shape == b[name].shape and np.allclose(a[name].values, b[name].values, equal_nan=True)
            if not same:
                raise GpdslError(f"{first.label} and {other.label} were fitted to different data ('{name}' differs)")
    hashes = {arviz_compat.root_attrs(fit.results).get("model_hash") for fit in fits} - {None}
    return ["the fits come from different model sources (model_hash differs)"] if len(hashes) > 1 else []


def _compared_names(fits: list[Fit], requested) -> list[str]:
    if requested:
        for fit in fits:
            try:
                checked_var_names(fit.posterior, requested)
            except GpdslError as error:
                raise GpdslError(f"{fit.label}: {error.message}", hint=error.hint) from None
        return list(requested)
    common = [str(name) for name in fits[0].posterior.data_vars
              if all(name in fit.posterior.data_vars for fit in fits[1:])]
    parameters = _model_parameters(fits[0])
    names = [name for name in common if name in parameters] if parameters else \
        [name for name in common if _element_count(fits[0].posterior[name]) <= MAX_DEFAULT_ELEMENTS]
    if not names:
        raise GpdslError("the fits have no posterior variable in common to compare",
                         hint="name the variables to compare (--vars)")
    return names


def _model_parameters(fit: Fit) -> list[str]:
    """The parameters of the model a results file stores the source of (empty if it stores none)."""
    source = arviz_compat.root_attrs(fit.results).get("model_source")
    if not isinstance(source, str):
        return []
    from gpdsl.semantics.model_text import check_text

    try:
        model, _ = check_text(source, str(arviz_compat.root_attrs(fit.results).get("model_name", "<model>")))
    except GpdslError:
        return []
    return list(model.parameters)


def _element_count(array) -> int:
    return math.prod(size for dim, size in array.sizes.items() if dim not in ("chain", "draw"))


def _parameter_rows(fit: Fit, names: list[str]) -> pd.DataFrame:
    if not fit.is_point:
        return summarize(fit.results, var_names=names).reindex(columns=PARAMETER_COLUMNS)
    rows = {element.label: {"mean": float(element.draws(fit.posterior).ravel()[0])}
            for element in elements(fit.posterior, names)}
    return pd.DataFrame.from_dict(rows, orient="index").reindex(columns=PARAMETER_COLUMNS)


def _stacked(tables: dict[str, pd.DataFrame], columns: list[str]) -> pd.DataFrame:
    reference = next(iter(tables.values()))
    rows, index = [], []
    for element in reference.index:
        for label, table in tables.items():
            index.append((element, label))
            rows.append(table.loc[element] if element in table.index else pd.Series(np.nan, index=columns))
    return pd.DataFrame(rows, index=pd.MultiIndex.from_tuples(index, names=["element", "fit"]), columns=columns)


def _differences(tables: dict[str, pd.DataFrame], reference: str) -> pd.DataFrame:
    base = tables[reference]
    rows, index = [], []
    for element in base.index:
        ref = base.loc[element]
        for label, table in tables.items():
            if label == reference:
                continue
            row = table.loc[element] if element in table.index else pd.Series(np.nan, index=PARAMETER_COLUMNS)
            difference = row["mean"] - ref["mean"]
            scale = math.hypot(row["mcse_mean"], ref["mcse_mean"])
            z = difference / scale if scale > 0 else np.nan
            in_sd = difference / ref["sd"] if ref["sd"] > 0 else np.nan
            index.append((element, label))
            rows.append({"difference": difference, "z": z, "flagged": bool(abs(z) > Z_FLAG), "in_reference_sd": in_sd})
    frame = pd.DataFrame(rows, columns=DIFFERENCE_COLUMNS)
    frame.index = pd.MultiIndex.from_tuples(index, names=["element", "fit"]) if index else \
        pd.MultiIndex.from_tuples([], names=["element", "fit"])
    return frame


def _loo(fit: Fit) -> dict:
    empty = {"elpd_loo": np.nan, "elpd_loo_se": np.nan, "p_loo": np.nan, "loo_warning": np.nan}
    log_likelihood = fit.groups.get("log_likelihood")
    if log_likelihood is None or fit.is_point or not log_likelihood.data_vars:
        return empty
    results = fit.results
    if len(log_likelihood.data_vars) > 1:
        results = _one_pointwise_variable(fit, log_likelihood)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # reported as loo_warning, and in the verdict
        loo = arviz_compat.loo(results)
    return {"elpd_loo": loo["elpd_loo"], "elpd_loo_se": loo["se"], "p_loo": loo["p_loo"],
            "loo_warning": loo["warning"]}


def _one_pointwise_variable(fit: Fit, log_likelihood):
    """Results whose log_likelihood holds every observation of every variable in one vector (LOO over all)."""
    import xarray as xr

    chains, draws = log_likelihood.sizes["chain"], log_likelihood.sizes["draw"]
    flat = [log_likelihood[name].transpose("chain", "draw", ...).values.reshape(chains, draws, -1)
            for name in log_likelihood.data_vars]
    joined = xr.Dataset({"all": (("chain", "draw", "observation"), np.concatenate(flat, axis=2))})
    return arviz_compat.make_container({"posterior": fit.posterior, "log_likelihood": joined}, {})
