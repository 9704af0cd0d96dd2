"""A :class:`~gpdsl.results.compare.Comparison` as Markdown (printed by ``gpdsl compare``, written by ``-o``)."""

from __future__ import annotations

import math

import numpy as np

from gpdsl.results.compare import Z_FLAG
from gpdsl.results.summary import MAX_RHAT, MIN_ESS_PER_CHAIN


def comparison_markdown(comparison) -> str:
    """The fits table, the parameters table, the verdict and the notes, as Markdown text ending in a newline."""
    fits = comparison.fits
    lines = [f"## Fits (reference: {comparison.reference})", "",
             "| fit | method | chains x draws | compile s | warmup s | sampling s | total s | min ess_bulk "
             "| min ESS/s | ratio to reference | max r_hat | divergences | converged | elpd_loo (se) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for label, row in fits.iterrows():
        loo = "-" if math.isnan(row["elpd_loo"]) else f"{row['elpd_loo']:.2f} ({row['elpd_loo_se']:.2f})" + \
            (" (!)" if row["loo_warning"] == 1 else "")
        lines.append(f"| {label} | {row['method']} | {row['chains']} x {row['draws']} | "
                     + " | ".join(_number(row[f"{part}_s"], 3) for part in ("compile", "warmup", "sampling", "total"))
                     + f" | {_whole(row['min_ess_bulk'])} | {_number(row['min_ess_per_s'], 4)} "
                     f"| {_number(row['ratio_to_reference'], 3)}{_flag(comparison, label)} "
                     f"| {_number(row['max_r_hat'], 4)} | {_whole(row['divergences'])} | {_converged(row)} | {loo} |")
    lines += ["", "## Parameters", "",
              f"| element | fit | mean | sd | mcse | ess_bulk | ess_tail | r_hat | z vs {comparison.reference} |",
              "|---|---|---|---|---|---|---|---|---|"]
    differences = comparison.differences
    previous = None
    for (element, label), row in comparison.parameters.iterrows():
        z = ""
        if (element, label) in differences.index:
            found = differences.loc[(element, label)]
            z = _number(found["z"], 2, signed=True) + (" **(!)**" if found["flagged"] else "")
            if math.isnan(found["z"]):
                z = f"{_number(found['in_reference_sd'], 2, signed=True)} sd" if not math.isnan(found["in_reference_sd"]) \
                    else "-"
        shown = element if element != previous else ""
        previous = element
        if z and z != "-" and not _both_converged(comparison, label):
            z += " (not converged)"
        lines.append(f"| {shown} | {label} | {_number(row['mean'], 4)} | {_number(row['sd'], 3)} | "
                     f"{_number(row['mcse_mean'], 2)} | {_whole(row['ess_bulk'])} | {_whole(row['ess_tail'])} | "
                     f"{_number(row['r_hat'], 4)} | {z} |")
    lines += ["", *(f"- {line}" for line in verdict(comparison)), ""]
    return "\n".join(lines)


def verdict(comparison) -> list[str]:
    """Sentences: how z is computed, the largest |z| and the flags, convergence, the ESS-per-second ratios, the
    notes. A fit whose draws fail the convergence guidance gets no "agree" sentence and no ratio sentence: a
    sentence says why instead."""
    fits = comparison.fits
    unconverged = [str(label) for label, row in fits.iterrows() if row["converged"] == 0]
    lines = [f"z = (mean - reference mean) / sqrt(mcse^2 + reference mcse^2); |z| > {Z_FLAG:g} is flagged (!); "
             "a point estimate is shown in reference posterior sds instead",
             f"converged: every r_hat <= {MAX_RHAT}, every bulk ESS >= {MIN_ESS_PER_CHAIN} per chain and no "
             "divergence (Stan's and ArviZ's guidance); (!) marks a fit that fails it"]
    z = comparison.differences["z"].abs()
    if z.notna().any():
        element, label = z.idxmax()
        flagged = comparison.differences["flagged"]
        if flagged.any():
            state = f"{int(flagged.sum())} flagged"
        elif unconverged:
            state = (f"no conclusion on agreement: {', '.join(unconverged)} "
                     f"{'has' if len(unconverged) == 1 else 'have'} not converged")
        else:
            state = "the posteriors agree within Monte Carlo error"
        lines.append(f"largest |z|: {z.max():.2f} ({element}, {label}); {state}")
    for label, row in fits.iterrows():
        if np.isfinite(row["max_r_hat"]):
            state = "converged" if row["converged"] == 1 else "NOT converged (!)"
            divergences = f", {_whole(row['divergences'])} divergences" if np.isfinite(row["divergences"]) else ""
            lines.append(f"{label}: max r_hat {row['max_r_hat']:.3f}, min bulk ESS {_whole(row['min_ess_bulk'])}"
                         f"{divergences}: {state}")
    for label, row in fits.iterrows():
        if label == comparison.reference or not np.isfinite(row["ratio_to_reference"]):
            continue
        if _both_converged(comparison, label):
            lines.append(f"{label}: {row['ratio_to_reference']:.3g} times the minimum ESS per second of "
                         f"{comparison.reference} (ESS over warmup + sampling seconds)")
        else:
            lines.append(f"{label}: no ESS-per-second ratio to {comparison.reference} is concluded: "
                         f"{' and '.join(n for n in (label, comparison.reference) if n in unconverged)} not "
                         "converged (!)")
    unreliable = [str(label) for label, row in fits.iterrows() if row["loo_warning"] == 1]
    if unreliable:
        lines.append(f"elpd_loo (!) of {', '.join(unreliable)}: some Pareto k above ArviZ's threshold (0.7, lower "
                     "for few draws): the PSIS-LOO estimate may be unreliable, as happens with very influential points "
                     "(check them, or use K-fold cross-validation)")
    return lines + comparison.notes


def _both_converged(comparison, label) -> bool:
    fits = comparison.fits
    return all(fits.loc[name, "converged"] != 0 for name in (label, comparison.reference))


def _flag(comparison, label) -> str:
    return "" if _both_converged(comparison, label) else " (!)"


def _converged(row) -> str:
    return "-" if not np.isfinite(row["converged"]) else ("yes" if row["converged"] == 1 else "NO (!)")


def _number(value, digits: int, signed: bool = False) -> str:
    if value is None or not np.isfinite(value):
        return "-"
    return f"{value:+.{digits}g}" if signed else f"{value:.{digits}g}"


def _whole(value) -> str:
    return "-" if value is None or not np.isfinite(value) else f"{value:.0f}"
