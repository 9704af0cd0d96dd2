"""Compare two results files of one model side by side (e.g. gpdsl's pm engine against NUTS).

For every scalar element of the hyperparameters (the posterior variables both files hold, up to
20 elements each; or those named with --vars) it prints, per file, the posterior mean and sd with
their Monte Carlo standard errors, rank-normalised split R-hat, bulk ESS and bulk ESS per second of
sampling time; then the z-score of the difference of means and of sds (difference over the root of
the summed squared MCSEs: |z| < 3 is agreement within Monte Carlo error), and each run's times.
--plot draws both posteriors of each element overlaid, as densities, into a PNG.
"""

from __future__ import annotations

import json
import math
import sys

from _script import ExampleError, make_parser, run

MAX_DEFAULT_ELEMENTS = 20
Z_AGREE = 3.0
MAX_RHAT = 1.01
TIMING_KEYS = ("compile", "warmup", "sampling", "total")


class Fit:
    """One results file: its label, posterior, root attributes and run times."""

    def __init__(self, path: str, label: str | None):
        from gpdsl.results import arviz_compat
        from gpdsl.results.io import read_netcdf

        self.path = path
        self.results = results = read_netcdf(path)
        self.groups = arviz_compat.groups(results)
        if "posterior" not in self.groups:
            raise ExampleError(f"{path} has no posterior group")
        self.posterior = self.groups["posterior"]
        self.attrs = arviz_compat.root_attrs(results)
        self.label = label or method_label(self.attrs)
        self.times, self.time_note = run_times(self.attrs)


def method_label(attrs: dict) -> str:
    """A short name of the run: ``nuts``, ``pm-ep (N_imp 1)``, ``gibbs``, ..."""
    method = str(attrs.get("method", "unknown"))
    if method == "pm":
        settings = _json(attrs.get("settings"))
        approximation = settings.get("approximation")
        if approximation:
            return f"pm-{approximation} (N_imp {settings.get('num_importance', 1)})"
    return method


def _json(text) -> dict:
    try:
        value = json.loads(text) if isinstance(text, str) else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def run_times(attrs: dict) -> tuple[dict, str | None]:
    """Seconds spent compiling, in warmup, sampling and in total (the results' ``timings`` attribute)."""
    timings = _json(attrs.get("timings"))
    if not timings:
        return {key: None for key in TIMING_KEYS}, "this file has no `timings` (written by another tool?)"
    return {key: _seconds(timings.get(key)) for key in TIMING_KEYS}, None


def _seconds(value) -> float | None:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def compared_names(fits: list[Fit], requested) -> list[str]:
    """Variables to compare: the requested ones, or the small variables every posterior holds."""
    from gpdsl.errors import GpdslError
    from gpdsl.results.elements import checked_var_names

    if requested:
        for fit in fits:
            try:
                checked_var_names(fit.posterior, requested)
            except GpdslError as error:
                raise ExampleError(f"{fit.path}: {error}") from None
        return list(requested)
    common = [name for name in fits[0].posterior.data_vars
              if all(name in fit.posterior.data_vars for fit in fits[1:])]
    names = [str(name) for name in common if _element_count(fits[0].posterior[name]) <= MAX_DEFAULT_ELEMENTS]
    if not names:
        raise ExampleError(f"{fits[0].path} and {fits[1].path} have no posterior variable in common "
                           "(name some with --vars)")
    return names


def _element_count(array) -> int:
    return math.prod(size for dim, size in array.sizes.items() if dim not in ("chain", "draw"))


def check_same_problem(fits: list[Fit]) -> list[str]:
    """Refuse two different data sets; warn about different model sources."""
    import numpy as np

    first, second = fits
    for group in ("observed_data", "constant_data"):
        a, b = first.groups.get(group), second.groups.get(group)
        if a is None or b is None:
            continue
        for name in set(a.data_vars) & set(b.data_vars):
            if a[name].shape != b[name].shape or not np.allclose(a[name].values, b[name].values, equal_nan=True):
                raise ExampleError(f"{first.path} and {second.path} were fitted to different data ('{name}' differs)")
    hashes = first.attrs.get("model_hash"), second.attrs.get("model_hash")
    if None not in hashes and hashes[0] != hashes[1]:
        return ["the two files come from different model sources (model_hash differs)"]
    return []


def statistics(fit: Fit, names: list[str]) -> dict:
    """Per element label: mean, mcse_mean, sd, mcse_sd, r_hat, ess_bulk, ess_per_s."""
    from gpdsl.results import arviz_compat
    from gpdsl.results.elements import elements
    from gpdsl.results.summary import summarize

    table = summarize(fit.results, var_names=names)
    mcse_sd = arviz_compat.mcse(fit.posterior, names, method="sd")
    sampling = fit.times.get("sampling")
    rows = {}
    for element in elements(fit.posterior, names):
        row = table.loc[element.label]
        ess = float(row["ess_bulk"])
        rows[element.label] = {
            "mean": float(row["mean"]), "mcse_mean": float(row["mcse_mean"]),
            "sd": float(row["sd"]), "mcse_sd": element.value(mcse_sd),
            "r_hat": float(row["r_hat"]), "ess_bulk": ess,
            "ess_per_s": ess / sampling if sampling else float("nan"),
        }
    return rows


def z_score(a: float, b: float, se_a: float, se_b: float) -> float:
    """(a - b) / sqrt(se_a^2 + se_b^2); NaN when the standard errors are unknown or zero."""
    scale = math.hypot(se_a, se_b)
    return (a - b) / scale if scale > 0 else float("nan")


def _g(value: float, digits: int = 3) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.{digits}g}"


def _with_se(value: float, se: float) -> str:
    return f"{_g(value, 4)} ({_g(se, 2)})"


def _rate(value: float) -> str:
    if not math.isfinite(value):
        return "-"
    return f"{value:.0f}" if value >= 100 else f"{value:.3g}"


def comparison_table(fits: list[Fit], stats: list[dict]) -> tuple[str, list[float]]:
    """The side-by-side table and the z-scores of the means."""
    width = max(12, *(len(fit.label) + 2 for fit in fits))
    header = (f"{'element':<10}{'method':<{width}}{'mean (mcse)':>20}{'sd (mcse)':>20}"
              f"{'r_hat':>8}{'ess_bulk':>10}{'ESS/s':>9}")
    lines = [header, "-" * len(header)]
    z_means = []
    for label in stats[0]:
        for index, (fit, rows) in enumerate(zip(fits, stats)):
            row = rows[label]
            lines.append(f"{label if index == 0 else '':<10}{fit.label:<{width}}"
                         f"{_with_se(row['mean'], row['mcse_mean']):>20}{_with_se(row['sd'], row['mcse_sd']):>20}"
                         f"{row['r_hat']:>8.3f}{row['ess_bulk']:>10.0f}{_rate(row['ess_per_s']):>9}")
        a, b = stats[0][label], stats[1][label]
        z_mean = z_score(a["mean"], b["mean"], a["mcse_mean"], b["mcse_mean"])
        z_sd = z_score(a["sd"], b["sd"], a["mcse_sd"], b["mcse_sd"])
        z_means.append(z_mean)
        lines.append(f"{'':<10}{'z (1st - 2nd)':<{width}}{z_mean:>+20.2f}{z_sd:>+20.2f}")
    return "\n".join(lines), z_means


def times_table(fits: list[Fit]) -> str:
    width = max(12, *(len(fit.label) + 2 for fit in fits))
    lines = [f"{'seconds':<{width}}" + "".join(f"{key:>10}" for key in TIMING_KEYS)]
    for fit in fits:
        marks = "".join(f"{_g(fit.times.get(key), 3):>10}" for key in TIMING_KEYS)
        lines.append(f"{fit.label:<{width}}{marks}")
    notes = [f"  {fit.label}: {fit.time_note}" for fit in fits if fit.time_note]
    return "\n".join(lines + notes)


def verdict(fits: list[Fit], stats: list[dict], z_means: list[float]) -> list[str]:
    lines = []
    finite = [abs(z) for z in z_means if math.isfinite(z)]
    if finite:
        largest = max(finite)
        agree = "agree within Monte Carlo error" if largest < Z_AGREE else "DIFFER by more than Monte Carlo error"
        lines.append(f"largest |z| of the means: {largest:.2f} -> the two posteriors {agree} (|z| < {Z_AGREE:g})")
    for fit, rows in zip(fits, stats):
        worst = max(row["r_hat"] for row in rows.values())
        state = "converged" if worst < MAX_RHAT else "NOT converged"
        lines.append(f"{fit.label}: max r_hat {worst:.3f} ({state}, threshold {MAX_RHAT}), "
                     f"min ESS/s {_rate(min(row['ess_per_s'] for row in rows.values()))}")
    rates = [min(row["ess_per_s"] for row in rows.values()) for rows in stats]
    if all(math.isfinite(rate) and rate > 0 for rate in rates):
        lines.append(f"{fits[0].label} gives {rates[0] / rates[1]:.3g} times the (minimum) ESS per second of "
                     f"{fits[1].label}")
    return lines


def plot_densities(fits: list[Fit], names: list[str], path: str) -> str:
    """Overlaid posterior densities (histograms on shared bins), one panel per element."""
    import numpy as np
    from matplotlib.figure import Figure

    from gpdsl.results.elements import elements
    from gpdsl.results.plots import save_png

    chosen = list(elements(fits[0].posterior, names))
    columns = min(4, len(chosen))
    rows = -(-len(chosen) // columns)
    figure = Figure(figsize=(3.3 * columns, 2.6 * rows + 0.6), layout="constrained")
    axes = figure.subplots(rows, columns, squeeze=False).ravel()
    for ax, element in zip(axes, chosen):
        draws = [element.draws(fit.posterior).ravel() for fit in fits]
        low, high = np.quantile(np.concatenate(draws), [0.005, 0.995])
        bins = np.linspace(low, high, 41)
        for index, (fit, values) in enumerate(zip(fits, draws)):
            ax.hist(values, bins=bins, density=True, histtype="step", linewidth=1.5, color=f"C{index}",
                    label=fit.label)
            ax.axvline(values.mean(), color=f"C{index}", linewidth=0.8, linestyle="--")
        ax.set_title(element.label, fontsize="medium")
        ax.set_yticks([])
    for ax in axes[len(chosen):]:
        ax.set_axis_off()
    axes[0].legend(fontsize="small")
    figure.suptitle("posterior densities (dashed: means)")
    return str(save_png(figure, path))


def main(argv=None) -> int:
    parser = make_parser(__doc__)
    parser.add_argument("first", metavar="FIRST.nc", help="results file, e.g. of --method pm")
    parser.add_argument("second", metavar="SECOND.nc", help="results file of the same model and data, e.g. NUTS")
    parser.add_argument("--labels", nargs=2, default=None, metavar=("FIRST", "SECOND"),
                        help="names of the two runs (default: from their method and settings)")
    parser.add_argument("--vars", nargs="+", default=None, metavar="NAME", help="variables to compare")
    parser.add_argument("--plot", default=None, metavar="OUT.png", help="overlaid posterior densities")
    args = parser.parse_args(argv)
    labels = args.labels or (None, None)
    fits = [Fit(path, label) for path, label in zip((args.first, args.second), labels)]
    if fits[0].label == fits[1].label:
        fits[0].label, fits[1].label = f"{fits[0].label} #1", f"{fits[1].label} #2"
    warnings = check_same_problem(fits)
    names = compared_names(fits, args.vars)
    stats = [statistics(fit, names) for fit in fits]
    table, z_means = comparison_table(fits, stats)
    print(f"{fits[0].label}: {fits[0].path}    {fits[1].label}: {fits[1].path}")
    print(table)
    print()
    print(times_table(fits))
    print()
    for line in verdict(fits, stats, z_means) + [f"warning: {w}" for w in warnings]:
        print(line)
    if args.plot:
        print(f"wrote {plot_densities(fits, names, args.plot)}")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
