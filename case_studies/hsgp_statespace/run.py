"""US births per day 1969-1988: a Hilbert-space GP and a state-space GP beside the exact GP, with their times.

The data are the birthday data of BDA3 Ch. 21 and of the case study of Riutort-Mayol, Bürkner, Andersen, Solin &
Vehtari (2023): 7305 days, ``y`` the births relative to the average day (100), standardised for the models. Fits:

- ``births_hsgp.gpm``: a slow Matérn-3/2 trend (20 Laplacian eigenfunctions, ``c = 1.5``) plus a yearly periodic term
  (its cosine series, 20 harmonics) in one HSGP, plus a day-of-week effect; NUTS (Stan) and ``ml`` at full size;
- ``births_state_space.gpm``: trend (Matérn-3/2) + yearly (periodic, 365.25 days) + weekly (periodic, 7 days) under
  a normal likelihood as a state-space GP; ``ml`` (Kalman filter, O(N)) at full size, ``ml`` and NUTS (the Stan
  Kalman program) on the first year;
- ``births_exact.gpm``: the same model as an exact GP on the first year (``ml``, NUTS);
- ``births_state_space_special.gpm``: the state-space model plus day-of-year ("special day") effects, Student-t(1),
  as the paper's ``f4``; ``ml`` at full size;
- ``pm`` (adaptive Metropolis on the exact Kalman marginal) on the state-space model on the first year, beside NUTS,
  every chain started at the ``ml`` estimate (from prior draws, chains stall where the trend is slow, about 32 nats of
  log posterior below the ``ml`` estimate), thinned (``--thin``) so that long chains pay the smoother's draws of ``f``
  for the kept draws alone.

Usage::

    python case_studies/hsgp_statespace/run.py                 # the sizes in the README
    python case_studies/hsgp_statespace/run.py --quick         # two years, a 120-day subset, short chains
    python case_studies/hsgp_statespace/run.py --quick --methods ml   # the ml fits only (no Stan build)
    python case_studies/hsgp_statespace/run.py --only state_space_pm_subset   # one fit, merged into fits.json

Outputs in ``case_studies/hsgp_statespace/results/`` (``*_quick.*`` from ``--quick``): ``fits.json`` (each fit's
size, method, wall time, estimates and diagnostics), ``fits.md`` (the table), ``decomposition.png`` and
``special_days.png``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import gpdsl  # noqa: E402  (sets BLAS thread variables before numpy/jax load)

import arviz as az  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from gpdsl.backends.jax.hsgp import hsgp_basis  # noqa: E402
from gpdsl.datasets.births import births_usa_1969  # noqa: E402
from gpdsl.kernels import build_kernel  # noqa: E402
from gpdsl.storage.atomic import atomic_target, atomic_write_text  # noqa: E402

RESULTS = HERE / "results"
MODELS = {"hsgp": HERE / "births_hsgp.gpm", "state_space": HERE / "births_state_space.gpm",
          "exact": HERE / "births_exact.gpm", "state_space_special": HERE / "births_state_space_special.gpm",
          "hsgp_centred": (HERE / "births_hsgp.gpm").read_text().replace("c = 1.5)", "c = 1.5, centred = 1)")}
FIELDS = {"hsgp": ("N", "t", "y", "weekday"), "hsgp_centred": ("N", "t", "y", "weekday"), "state_space": ("N", "t", "y"), "exact": ("N", "t", "y"),
          "state_space_special": ("N", "t", "y", "day_of_year")}
YEAR = 365.25
SCALARS = ("trend_sd", "trend_lengthscale", "year_sd", "year_lengthscale", "week_sd", "week_lengthscale", "sigma")


@dataclass(frozen=True)
class Size:
    """The days of the full fits and of the subset, the NUTS chains (number, warmup and draws per model) and pm's
    (on the subset: number, warmup, draws and thin)."""

    days: int
    subset: int
    nuts: dict
    pm: tuple


SIZES = {"full": Size(7305, 365, {"hsgp": (4, 500, 1000), "hsgp_centred": (4, 500, 1000),
                                  "state_space": (1, 150, 150), "exact": (1, 100, 100)},
                     (4, 10000, 1000, 20)),
         "quick": Size(730, 120, {"hsgp": (1, 60, 60), "hsgp_centred": (1, 60, 60), "state_space": (1, 60, 60),
                                  "exact": (1, 60, 60)},
                      (2, 200, 200, 2))}
SAMPLERS = ("nuts", "pm")


@dataclass(frozen=True)
class Fit:
    """One fit: its model, method and whether it runs on the subset."""

    model: str
    method: str
    subset: bool

    @property
    def label(self) -> str:
        return f"{self.model}_{self.method}" + ("_subset" if self.subset else "")


FITS = (Fit("hsgp", "ml", False), Fit("state_space", "ml", False), Fit("state_space_special", "ml", False),
        Fit("state_space", "ml", True),
        Fit("exact", "ml", True), Fit("state_space", "nuts", True), Fit("exact", "nuts", True),
        Fit("hsgp", "nuts", False), Fit("hsgp_centred", "nuts", False), Fit("state_space", "pm", True))


def births_data(days: int) -> tuple[dict, float, float]:
    """The first ``days`` days as model data (``t`` days since 1969-01-01, ``y`` standardised relative births,
    ``weekday``, ``day_of_year`` on a 366-day calendar), and the mean and standard deviation of the relative births
    over all 7305 days."""
    births = births_usa_1969(relative=True)
    mean, sd = float(births.y.mean()), float(births.y.std())
    X = births.X[:days]
    data = {"N": days, "t": X[:, 0] - 1.0, "y": (births.y[:days] - mean) / sd, "weekday": X[:, 6].astype(int),
            "day_of_year": X[:, 5].astype(int)}
    return data, mean, sd


def run_fit(fit: Fit, data: dict, size: Size, seed: int):
    """Run one fit; return its results and wall time (s)."""
    model = MODELS[fit.model]
    fields = {k: data[k] for k in FIELDS[fit.model]}
    started = time.perf_counter()
    if fit.method == "ml":
        result = gpdsl.fit(model, fields, "ml", seed=seed)
    elif fit.method == "pm":
        chains, warmup, draws, thin = size.pm
        estimate = gpdsl.fit(model, fields, "ml", seed=seed).posterior
        start = {name: float(estimate[name].values.ravel()[0]) for name in SCALARS if name in estimate}
        result = gpdsl.sample(model, fields, "pm", seed=seed, chains=chains, warmup=warmup, draws=draws,
                              thin=thin, initial_values=start)
    else:
        chains, warmup, draws = size.nuts[fit.model]
        result = gpdsl.sample(model, fields, "nuts", seed=seed, chains=chains, warmup=warmup, draws=draws)
    return result, time.perf_counter() - started


def describe(fit: Fit, result, seconds: float, n: int) -> dict:
    """The row of the table: size, wall time, estimates (posterior means for NUTS) and diagnostics."""
    posterior = result.posterior
    names = [name for name in SCALARS if name in posterior]
    row = {"fit": fit.label, "model": fit.model, "method": fit.method, "N": n, "seconds": round(seconds, 1),
           "estimates": {name: float(posterior[name].mean()) for name in names}}
    timings = json.loads(result.attrs.get("timings", "{}"))
    row["engine_seconds"] = {k: round(float(v), 1) for k, v in timings.items()}
    if "special" in posterior:
        row["special_days"] = special_days(result)
    if fit.method == "ml":
        row["log_marginal"] = float(result.sample_stats["log_marginal"].values.ravel()[0])
    else:
        summary = az.summary(result, var_names=names + (["weekday_effect"] if fit.model.startswith("hsgp") else []),
                             kind="diagnostics")
        row["chains"], row["draws"] = int(posterior.sizes["chain"]), int(posterior.sizes["draw"])
        settings = json.loads(result.attrs.get("settings", "{}"))
        row["warmup"], row["thin"] = settings.get("warmup"), settings.get("thin", 1)
        row["max_rhat"] = float(summary["r_hat"].max())
        row["min_ess_bulk"] = float(summary["ess_bulk"].min())
        row["min_ess_tail"] = float(summary["ess_tail"].min())
        row["divergences"] = int(result.sample_stats["diverging"].sum()) if "diverging" in result.sample_stats else None
        stats = az.summary(result, var_names=names, kind="stats")
        row["mean_sd"] = {name: [float(stats.loc[name, "mean"]), float(stats.loc[name, "sd"])] for name in names}
        row["ess_per_second"] = round(row["min_ess_bulk"] / seconds, 3)
    return row


def calendar_day(day_of_year: int) -> str:
    """The date of a day of the 366-day calendar (1 March is day 61), e.g. ``"Dec 25"``."""
    return (date(2000, 1, 1) + timedelta(days=day_of_year - 1)).strftime("%b %d")


def special_days(result, largest: int = 10) -> list[dict]:
    """The ``largest`` day-of-year effects by size (posterior means, standardised units), with their dates."""
    effect = np.asarray(result.posterior["special"].mean(("chain", "draw")))
    days = np.argsort(-np.abs(effect))[:largest] + 1
    return [{"day_of_year": int(day), "date": calendar_day(int(day)), "effect": round(float(effect[day - 1]), 4)}
            for day in days]


def special_days_figure(result, sd: float, title: str, path: Path, labelled: int = 10) -> None:
    """The day-of-year effects in relative births (100 = mean), the ``labelled`` largest named by their dates."""
    effect = sd * np.asarray(result.posterior["special"].mean(("chain", "draw")))
    figure = Figure(figsize=(11, 4), layout="constrained")
    axis = figure.subplots()
    days = np.arange(1, effect.size + 1)
    axis.vlines(days, 0, effect, color="C4", lw=0.8)
    axis.axhline(0, color="0.5", lw=0.5)
    for day in np.argsort(-np.abs(effect))[:labelled] + 1:
        axis.annotate(calendar_day(int(day)), (day, effect[day - 1]), fontsize=7, ha="center",
                      va="top" if effect[day - 1] < 0 else "bottom")
    axis.set(title=title, xlabel="day of the year (366-day calendar)", ylabel="effect on relative births",
             xlim=(0, effect.size + 1))
    with atomic_target(path) as target:
        figure.savefig(target, dpi=110, format="png")


def components(result, data: dict, draws: int = 60) -> dict:
    """The trend and the yearly term of the HSGP fit at the data's days (standardised units), and the weekday effects.

    For each of up to ``draws`` posterior draws, the weights ``f_z`` of the trend's Laplacian basis and of the yearly
    cosine series times the square roots of their variances under the draw's hyperparameters; averaged. An ``ml``
    fit has no weights: they are its weights' posterior mean given the estimate."""
    model, _ = gpdsl.check(MODELS["hsgp"])
    statement = model.gp_statements()[0]
    basis = hsgp_basis(statement, data["t"][:, None])
    (_, trend_basis), (_, year_basis) = basis.parts
    posterior = result.posterior.stack(sample=("chain", "draw"))
    picks = np.linspace(0, posterior.sizes["sample"] - 1, min(draws, posterior.sizes["sample"])).astype(int)
    trend, year, week = [], [], []
    for i in picks:
        theta = {name: float(posterior[name].values[i]) for name in ("trend_sd", "trend_lengthscale", "year_sd",
                                                                    "year_lengthscale", "sigma")}
        effect = np.asarray(posterior["weekday_effect"].values[:, i])
        trend_scales = np.sqrt(np.asarray(trend_basis.weight_variances(build_kernel(
            "matern32", variance=theta["trend_sd"] ** 2, lengthscale=theta["trend_lengthscale"]))))
        year_scales = np.sqrt(np.asarray(year_basis.weight_variances(build_kernel(
            "periodic", variance=theta["year_sd"] ** 2, lengthscale=theta["year_lengthscale"], period=YEAR))))
        A = np.concatenate([trend_basis.phi * trend_scales, year_basis.phi * year_scales], axis=1)
        if "f_z" in posterior:
            z = np.asarray(posterior["f_z"].values[:, i])
        else:
            residual = data["y"] - effect[data["weekday"] - 1]
            precision = np.eye(A.shape[1]) + A.T @ A / theta["sigma"] ** 2
            z = np.linalg.solve(precision, A.T @ residual / theta["sigma"] ** 2)
        size = trend_scales.size
        trend.append(A[:, :size] @ z[:size])
        year.append(A[:, size:] @ z[size:])
        week.append(effect)
    return {"trend": np.mean(trend, axis=0), "year": np.mean(year, axis=0), "week": np.mean(week, axis=0)}


def decomposition_figure(parts: dict, data: dict, mean: float, sd: float, title: str, path: Path) -> None:
    """Data, trend, yearly term over the day of the year and the weekday effects, in relative births (100 = mean)."""
    figure = Figure(figsize=(11, 7.5), layout="constrained")
    axes = figure.subplots(2, 2)
    t, years = data["t"], 1969 + data["t"] / YEAR
    fitted = parts["trend"] + parts["year"] + parts["week"][data["weekday"] - 1]
    axes[0, 0].plot(years, mean + sd * data["y"], ".", ms=1.5, color="0.6", label="data")
    axes[0, 0].plot(years, mean + sd * fitted, lw=0.4, color="C3", label="trend + yearly + weekday")
    axes[0, 0].set(title="relative births per day", xlabel="year", ylabel="relative births (100 = mean)")
    axes[0, 0].legend(loc="lower right", markerscale=6)
    axes[0, 1].plot(years, mean + sd * parts["trend"], color="C0")
    axes[0, 1].set(title="slow trend (HSGP, Matérn-3/2)", xlabel="year", ylabel="relative births")
    first = t < YEAR
    axes[1, 0].plot(t[first] + 1, sd * parts["year"][first], color="C1")
    axes[1, 0].set(title="yearly term (HSGP cosine series)", xlabel="day of the year", ylabel="effect")
    axes[1, 1].bar(["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"], sd * (parts["week"] - parts["week"].mean()),
                   color="C2")
    axes[1, 1].set(title="day-of-week effect", ylabel="effect (centred)")
    figure.suptitle(title)
    with atomic_target(path) as target:
        figure.savefig(target, dpi=110, format="png")


def with_warmup(row: dict, size: Size) -> dict:
    """``row`` with its sampler's warmup iterations (from ``size`` where the results did not record them)."""
    if row["method"] in SAMPLERS and row.get("warmup") is None:
        row["warmup"] = (size.pm if row["method"] == "pm" else size.nuts[row["model"]])[1]
    return row


def thinned(row: dict) -> str:
    """`` x thin`` after the draws of a thinned chain (empty for one kept whole)."""
    return f" x {row['thin']}" if row.get("thin", 1) > 1 else ""


def table(rows: list[dict]) -> str:
    """The Markdown table of the fits."""
    lines = ["| model | N | method | wall s | of which Stan build s | sigma | trend lengthscale (days) "
             "| year lengthscale | log marginal | chains x (warmup + draws) | max R-hat | min bulk ESS | divergences |",
             "|" + "---|" * 13]
    for row in rows:
        e = row["estimates"]
        sampler = row["method"] in SAMPLERS
        nuts = row["method"] == "nuts"
        rhat = "n/a (1 chain)" if sampler and row["chains"] == 1 else (f"{row['max_rhat']:.3f}" if sampler else "")
        lines.append(" | ".join([
            f"| {row['model']}", str(row["N"]), row["method"], f"{row['seconds']:.0f}",
            f"{row['engine_seconds'].get('compile', 0):.0f}" if nuts else "", f"{e['sigma']:.3f}",
            f"{e['trend_lengthscale']:.0f}", f"{e['year_lengthscale']:.2f}",
            f"{row['log_marginal']:.1f}" if not sampler else "",
            f"{row['chains']} x ({row['warmup']} + {row['draws']}{thinned(row)})" if sampler else "", rhat,
            f"{row['min_ess_bulk']:.0f}" if sampler else "", str(row["divergences"]) if nuts else ""]) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="two years, a 120-day subset, short chains")
    parser.add_argument("--methods", nargs="+", default=["ml", "nuts", "pm"], choices=["ml", "nuts", "pm"])
    parser.add_argument("--only", nargs="+", metavar="FIT", choices=[fit.label for fit in FITS],
                        help="run these fits alone and merge their rows into the existing fits.json")
    parser.add_argument("--seed", type=int, default=20260)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--table-only", action="store_true", help="rewrite fits.md from fits.json")
    args = parser.parse_args(argv)
    size = SIZES["quick" if args.quick else "full"]
    suffix = "_quick" if args.quick else ""
    if args.table_only:
        rows = [with_warmup(row, size) for row in json.loads((args.out / f"fits{suffix}.json").read_text())]
        atomic_write_text(args.out / f"fits{suffix}.md", table(rows))
        return rows
    args.out.mkdir(parents=True, exist_ok=True)
    full, mean, sd = births_data(size.days)
    subset, _, _ = births_data(size.subset)
    rows, results = [], {}
    if args.only:
        kept = json.loads((args.out / f"fits{suffix}.json").read_text())
        rows = [with_warmup(row, size) for row in kept if row["fit"] not in args.only]
    for fit in FITS:
        if fit.method not in args.methods or (args.only and fit.label not in args.only):
            continue
        data = subset if fit.subset else full
        result, seconds = run_fit(fit, data, size, args.seed)
        results[fit.label] = result
        rows.append(with_warmup(describe(fit, result, seconds, data["N"]), size))
        print(f"{fit.label}: N = {data['N']}, {seconds:.1f} s", file=sys.stderr)
        rows.sort(key=lambda row: [f.label for f in FITS].index(row["fit"]))
        atomic_write_text(args.out / f"fits{suffix}.json", json.dumps(rows, indent=1) + "\n")
    atomic_write_text(args.out / f"fits{suffix}.md", table(rows))
    source = "hsgp_nuts" if "hsgp_nuts" in results else "hsgp_ml"
    if source in results:
        parts = components(results[source], full)
        decomposition_figure(parts, full, mean, sd, f"US births {1969}-{1969 + size.days // 365 - 1}: "
                             f"HSGP fit by {source.split('_')[1]}", args.out / f"decomposition{suffix}.png")
    if "state_space_special_ml" in results:
        special_days_figure(results["state_space_special_ml"], sd, "day-of-year effects (state-space model with "
                            "special days, ml)", args.out / f"special_days{suffix}.png")
    return rows


if __name__ == "__main__":
    main()
