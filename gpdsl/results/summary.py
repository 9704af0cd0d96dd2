"""Posterior summary table, sampler warnings and their terminal rendering."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from gpdsl.errors import GpdslError
from gpdsl.results import arviz_compat
from gpdsl.results.elements import checked_var_names, elements
from gpdsl.results.original_units import GROUPS, in_original_units, stored_model

COLUMNS = ["mean", "mcse_mean", "sd", "q5", "q50", "q95", "ess_bulk", "ess_tail", "r_hat"]
DEFAULT_MAX_TREE_DEPTH = 10
MIN_EBFMI = 0.3
MAX_RHAT = 1.01
MIN_ESS_PER_CHAIN = 100
LISTED_NAMES = 8


def summarize(results: Any, var_names: Sequence[str] | None = None, group: str = "posterior",
              original_units: bool = True) -> pd.DataFrame:
    """Posterior statistics and convergence diagnostics, one row per scalar element.

    Parameters
    ----------
    results : arviz.InferenceData or xarray.DataTree
        Results with a ``posterior`` group.
    var_names : sequence of str, optional
        Variables to summarise; all the group's variables by default.
    group : str
        The group to summarise (``predictions``, ``posterior_predictive``: draws like the posterior's).
    original_units : bool
        Show the variables of a standardised outcome in its original units
        (:func:`~gpdsl.results.original_units.in_original_units`); the table's ``attrs["original_units"]``
        names them.

    Returns
    -------
    pandas.DataFrame
        Indexed by element label (``mu``, ``tau[1]``, ``K[1, 2]``) with columns ``mean``,
        ``mcse_mean``, ``sd``, ``q5``, ``q50``, ``q95``, ``ess_bulk``, ``ess_tail`` and
        ``r_hat``. The diagnostics come from ArviZ (rank-normalised split R-hat, bulk and tail
        ESS); ``sd`` uses ``ddof=1``.

    Raises
    ------
    GpdslError
        If there is no posterior or a requested variable is not in it.
    """
    posterior = _group(results, group)
    mapped = []
    if original_units and group in GROUPS:
        posterior, mapped = in_original_units(results, group, stored_model(results))
    names = checked_var_names(posterior, var_names, group)
    if _is_point_estimate(posterior):
        ess_bulk = ess_tail = r_hat = mcse_mean = None
    else:
        ess_bulk = arviz_compat.ess(posterior, names, method="bulk")
        ess_tail = arviz_compat.ess(posterior, names, method="tail")
        r_hat = arviz_compat.rhat(posterior, names)
        mcse_mean = arviz_compat.mcse(posterior, names, method="mean")
    diagnostic = lambda values: np.nan if values is None else element.value(values)  # noqa: E731
    rows = {}
    for element in elements(posterior, names):
        draws = element.draws(posterior).astype(float).ravel()
        q5, q50, q95 = np.quantile(draws, [0.05, 0.5, 0.95])
        rows[element.label] = {
            "mean": draws.mean(),
            "mcse_mean": diagnostic(mcse_mean),
            "sd": draws.std(ddof=1) if draws.size > 1 else np.nan,
            "q5": q5,
            "q50": q50,
            "q95": q95,
            "ess_bulk": diagnostic(ess_bulk),
            "ess_tail": diagnostic(ess_tail),
            "r_hat": diagnostic(r_hat),
        }
    table = pd.DataFrame.from_dict(rows, orient="index", columns=COLUMNS)
    table.attrs["original_units"] = [name for name in mapped if name in names]
    return table


def failing_diagnostics(table: pd.DataFrame, n_chains: int) -> tuple[pd.Index, pd.Index, int]:
    """The elements of a summary table that fail Stan's and ArviZ's guidance.

    Returns
    -------
    high_rhat : pandas.Index
        Elements whose r_hat is above :data:`MAX_RHAT`.
    low_ess : pandas.Index
        Elements whose bulk ESS is below ``threshold``.
    threshold : int
        :data:`MIN_ESS_PER_CHAIN` per chain.
    """
    threshold = MIN_ESS_PER_CHAIN * n_chains
    return table.index[table["r_hat"] > MAX_RHAT], table.index[table["ess_bulk"] < threshold], threshold


def divergent_transitions(sample_stats) -> int | None:
    """How many transitions ended in a divergence, or None when the sampler records no ``diverging``."""
    if sample_stats is None or "diverging" not in sample_stats:
        return None
    return int(np.asarray(sample_stats["diverging"].values, dtype=bool).sum())


def sampler_warnings(results: Any, table: pd.DataFrame | None = None) -> list[str]:
    """Problems a user should know about before trusting the draws.

    Checks divergent transitions (``diverging``), transitions that reached the maximum tree
    depth (``tree_depth`` against the ``max_tree_depth`` attribute or setting, default 10),
    E-BFMI below 0.3 per chain (from ``energy``), R-hat above 1.01 and bulk ESS below 100 per
    chain. Sampler statistics that are absent are not checked.

    Parameters
    ----------
    results : arviz.InferenceData or xarray.DataTree
        Results with a ``posterior`` and optionally a ``sample_stats`` group.
    table : pandas.DataFrame, optional
        The output of :func:`summarize` for these results, to avoid computing it again.

    Returns
    -------
    list of str
        One sentence per problem; empty when nothing was found.
    """
    groups = arviz_compat.groups(results)
    posterior = _group(results, "posterior")
    warnings = list(_reported_warnings(results))
    if _is_point_estimate(posterior):
        return warnings
    stats = groups.get("sample_stats")
    if stats is not None:
        total = stats.sizes["chain"] * stats.sizes["draw"]
        count = divergent_transitions(stats)
        if count:
            warnings.append(
                f"{count} of {total} transitions ({100 * count / total:.1f}%) ended with a "
                "divergence; increase adapt_delta or reparameterise the model"
            )
        if "tree_depth" in stats:
            depth = _max_tree_depth(results, stats)
            count = int((stats["tree_depth"].values >= depth).sum())
            if count:
                warnings.append(
                    f"{count} of {total} transitions ({100 * count / total:.1f}%) reached the "
                    f"maximum tree depth of {depth}; increase max_tree_depth"
                )
        if "energy" in stats and stats.sizes["draw"] > 2:
            values = arviz_compat.bfmi(stats)
            chains = stats["chain"].values
            low = [f"chain {chains[i]} ({values[i]:.2f})" for i in np.flatnonzero(values < MIN_EBFMI)]
            if low:
                warnings.append(
                    f"E-BFMI below {MIN_EBFMI} in {', '.join(low)}; the sampler may not explore "
                    "the posterior well, try reparameterising"
                )
    if table is None:
        table = summarize(results)
    high_rhat, low_ess, threshold = failing_diagnostics(table, posterior.sizes["chain"])
    if len(high_rhat):
        warnings.append(
            f"r_hat above {MAX_RHAT} for {_listed(high_rhat)} (max {table['r_hat'].max():.4f}); "
            "the chains have not mixed, run longer or check the model"
        )
    if len(low_ess):
        warnings.append(
            f"ess_bulk below {threshold:g} ({MIN_ESS_PER_CHAIN} per chain) for {_listed(low_ess)} "
            f"(min {table['ess_bulk'].min():.0f}); estimates are unreliable, run more draws"
        )
    return warnings


def format_summary(table: pd.DataFrame, warnings: Sequence[str], group: str = "posterior") -> str:
    """The summary as terminal text: an aligned table, then the warnings.

    Parameters
    ----------
    table : pandas.DataFrame
        The output of :func:`summarize`.
    warnings : sequence of str
        The output of :func:`sampler_warnings` (shown for the posterior only).
    group : str
        The group summarised.

    Returns
    -------
    str
        Text ending in a newline.
    """
    point = "sd" in table and len(table) > 0 and bool(table["sd"].isna().all())
    if point:
        table = table[["mean"]].rename(columns={"mean": "estimate"})
    formatters = {column: _significant for column in (*COLUMNS, "estimate")}
    formatters.update(ess_bulk=_whole, ess_tail=_whole, r_hat=lambda value: f"{value:.3f}")
    text = table.to_string(formatters={c: f for c, f in formatters.items() if c in table}, na_rep="-")
    lines = [text, ""]
    if group == "posterior":
        lines += ["Warnings:", *(f"  - {warning}" for warning in warnings)] if warnings else ["No sampler warnings."]
        lines.append("")
    quantiles = "posterior quantiles" if group == "posterior" else f"quantiles of the {group} draws"
    lines.append(
        "a point estimate (one draw): no intervals, effective sample sizes or R-hat." if point else
        f"q5/q50/q95 are {quantiles}; ess_bulk and ess_tail are effective sample sizes "
        "and r_hat the rank-normalised split R-hat (1.0 at convergence); - where undefined."
    )
    return "\n".join(lines) + "\n"


def _is_point_estimate(posterior) -> bool:
    """One draw in all: a fit's point estimate, for which intervals and chain diagnostics are undefined."""
    return posterior.sizes.get("chain", 1) * posterior.sizes.get("draw", 1) == 1


def _reported_warnings(results) -> list[str]:
    """The warnings the run itself recorded (``report.warnings``: e.g. chains that did not move in warmup)."""
    from gpdsl.results.method_output import results_json

    return [str(warning) for warning in results_json(results, "report").get("warnings", [])]


def _group(results: Any, name: str):
    groups = arviz_compat.groups(results)
    if name not in groups:
        raise GpdslError(f"results have no {name} group (groups: {', '.join(groups) or 'none'})")
    return groups[name]


def _max_tree_depth(results: Any, stats) -> int:
    sources = [stats.attrs, _group(results, "posterior").attrs, arviz_compat.root_attrs(results)]
    for attrs in sources:
        if str(attrs.get("max_tree_depth", "")).isdigit():
            return int(attrs["max_tree_depth"])
    for attrs in sources:
        settings = attrs.get("settings")
        if isinstance(settings, str):
            try:
                settings = json.loads(settings)
            except ValueError:
                continue
        if isinstance(settings, dict):
            for key in ("max_tree_depth", "max_depth", "max_treedepth"):
                if isinstance(settings.get(key), int):
                    return settings[key]
    return DEFAULT_MAX_TREE_DEPTH


def _listed(labels: Sequence[str]) -> str:
    labels = list(labels)
    shown = ", ".join(labels[:LISTED_NAMES])
    if len(labels) > LISTED_NAMES:
        shown += f" and {len(labels) - LISTED_NAMES} more"
    return shown


def _significant(value: float) -> str:
    return f"{value:.4g}"


def _whole(value: float) -> str:
    return "nan" if np.isnan(value) else f"{value:.0f}"
