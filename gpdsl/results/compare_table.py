"""A :class:`~gpdsl.results.compare.Comparison` as Markdown (printed by ``gpdsl compare``, written by ``-o``)."""

from __future__ import annotations

import math

import numpy as np

from gpdsl.results.compare import Z_FLAG
from gpdsl.results.summary import MAX_RHAT


def comparison_markdown(comparison) -> str:
    """The fits table, the parameters table, the verdict and the notes, as Markdown text ending in a newline."""
    fits = comparison.fits
    lines = [f"## Fits (reference: {comparison.reference})", "",
             "| fit | method | chains x draws | compile s | warmup s | sampling s | total s | min ess_bulk "
             "| min ESS/s | ratio to reference | max r_hat | elpd_loo (se) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for label, row in fits.iterrows():
        loo = "-" if math.isnan(row["elpd_loo"]) else f"{row['elpd_loo']:.2f} ({row['elpd_loo_se']:.2f})" + \
            (" (!)" if row["loo_warning"] == 1 else "")
        lines.append(f"| {label} | {row['method']} | {row['chains']} x {row['draws']} | "
                     + " | ".join(_number(row[f"{part}_s"], 3) for part in ("compile", "warmup", "sampling", "total"))
                     + f" | {_whole(row['min_ess_bulk'])} | {_number(row['min_ess_per_s'], 4)} "
                     f"| {_number(row['ratio_to_reference'], 3)} | {_number(row['max_r_hat'], 4)} | {loo} |")
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
        lines.append(f"| {shown} | {label} | {_number(row['mean'], 4)} | {_number(row['sd'], 3)} | "
                     f"{_number(row['mcse_mean'], 2)} | {_whole(row['ess_bulk'])} | {_whole(row['ess_tail'])} | "
                     f"{_number(row['r_hat'], 4)} | {z} |")
    lines += ["", *(f"- {line}" for line in verdict(comparison)), ""]
    return "\n".join(lines)


def verdict(comparison) -> list[str]:
    """Sentences: how z is computed, the largest |z| and the flags, the ESS-per-second ratios, the notes."""
    lines = [f"z = (mean - reference mean) / sqrt(mcse^2 + reference mcse^2); |z| > {Z_FLAG:g} is flagged (!); "
             "a point estimate is shown in reference posterior sds instead"]
    z = comparison.differences["z"].abs()
    if z.notna().any():
        element, label = z.idxmax()
        state = f"{int(comparison.differences['flagged'].sum())} flagged" if comparison.differences["flagged"].any() \
            else "the posteriors agree within Monte Carlo error"
        lines.append(f"largest |z|: {z.max():.2f} ({element}, {label}); {state}")
    for label, row in comparison.fits.iterrows():
        if np.isfinite(row["max_r_hat"]):
            state = "converged" if row["max_r_hat"] < MAX_RHAT else "NOT converged"
            lines.append(f"{label}: max r_hat {row['max_r_hat']:.3f} ({state}, threshold {MAX_RHAT})")
    for label, row in comparison.fits.iterrows():
        if label != comparison.reference and np.isfinite(row["ratio_to_reference"]):
            lines.append(f"{label}: {row['ratio_to_reference']:.3g} times the minimum ESS per second of "
                         f"{comparison.reference} (ESS over warmup + sampling seconds)")
    unreliable = [str(label) for label, row in comparison.fits.iterrows() if row["loo_warning"] == 1]
    if unreliable:
        lines.append(f"elpd_loo (!) of {', '.join(unreliable)}: some Pareto k above ArviZ's threshold, the PSIS "
                     "estimate may be unreliable")
    return lines + comparison.notes


def _number(value, digits: int, signed: bool = False) -> str:
    if value is None or not np.isfinite(value):
        return "-"
    return f"{value:+.{digits}g}" if signed else f"{value:.{digits}g}"


def _whole(value) -> str:
    return "-" if value is None or not np.isfinite(value) else f"{value:.0f}"
