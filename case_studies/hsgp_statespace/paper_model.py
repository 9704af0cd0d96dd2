"""The HSGP paper's own birthday model by NUTS, beside the figures the paper reports for it.

Riutort-Mayol, Bürkner, Andersen, Solin & Vehtari (2023), Sec. "Birthday data", Table 8 (iteration 5, the final
model): a squared-exponential trend (HSGP, ``m = 23``, ``c = 1.2``, over the standardised day index), yearly and weekly
periodic terms (cosine series, ``J = 16`` and ``13``) and Student-t(1) day-of-year effects, fitted with Stan's NUTS;
the paper reports the posterior length-scales, RMSE and ELPD. ``births_paper.gpm`` is that model in gpdsl's language.

Usage::

    python case_studies/hsgp_statespace/paper_model.py                        # 4 chains x (600 + 600)
    python case_studies/hsgp_statespace/paper_model.py --chains 1 --warmup 30 --draws 30 --out /tmp/x
    python case_studies/hsgp_statespace/paper_model.py --model identified --save /tmp/run.nc  # without its ridges
    python case_studies/hsgp_statespace/paper_model.py --model identified --from-saved /tmp/run.nc  # outputs again

Outputs in ``results/``: ``paper_model.json`` (settings, wall time, diagnostics, estimates), ``paper_model.md`` (ours
beside the paper's) and ``paper_model.png`` (the paper's Figs. 10-11: trend and yearly term over 1969-1988, and 1972
with the day-of-year effects).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import gpdsl  # noqa: E402  (sets BLAS thread variables before numpy/jax load)

import arviz as az  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from gpdsl.datasets.births import births_usa_1969  # noqa: E402
from gpdsl.results.arviz_compat import loo  # noqa: E402
from gpdsl.results.io import read_netcdf, write_netcdf  # noqa: E402
from gpdsl.storage.atomic import atomic_target, atomic_write_text  # noqa: E402

MODELS = {"paper": HERE / "births_paper.gpm", "identified": HERE / "births_paper_identified.gpm",
          "no-constants": HERE / "births_paper_no_constants.gpm"}
"""The paper's model as written; without the ridges that stop NUTS converging on it (no intercept, non-centred
day-of-year effects); and with its periodic series' constants dropped beside the intercept, as its Stan code has it."""
OUTPUT_STEM = {"paper": "paper_model", "identified": "paper_model_identified",
               "no-constants": "paper_model_no_constants"}
RESULTS = HERE / "results"
HYPERPARAMETERS = ("intercept", "trend_sd", "trend_lengthscale", "year_sd", "year_lengthscale", "week_sd",
                   "week_lengthscale", "special_scale", "sigma")
# Table 8, iteration 5 of the paper: posterior length-scales (its periodic form, l_paper = 2 l_gpdsl), RMSE and ELPD.
PAPER = {"trend_lengthscale": 0.20, "year_lengthscale": 0.23, "week_lengthscale": 1.63, "rmse": 0.29, "elpd": 0.18}
PAPER_PERIODIC_FACTOR = 2.0


def paper_data() -> dict:
    """The model's data as the paper prepares it: standardised day index and births, days, day of the year."""
    births = births_usa_1969()
    index = births.X[:, 0]
    return {"N": index.size, "x": (index - index.mean()) / index.std(ddof=1), "t": index - 1.0,
            "y": (births.y - births.y.mean()) / births.y.std(ddof=1), "day_of_year": births.X[:, 5].astype(int)}


def intercept(result) -> float:
    """The posterior mean of the intercept, 0 in a model without one."""
    return float(result.posterior["intercept"].mean()) if "intercept" in result.posterior else 0.0


def hyperparameters(result) -> list[str]:
    """The model's scalar parameters among :data:`HYPERPARAMETERS`."""
    return [name for name in HYPERPARAMETERS if name in result.posterior]


def fitted_mean(result, data: dict) -> np.ndarray:
    """The posterior mean of ``intercept + trend + year + week + special[day_of_year]`` at every day."""
    p = result.posterior
    special = p["special"].mean(("chain", "draw")).values[data["day_of_year"] - 1]
    parts = sum(p[name].mean(("chain", "draw")).values for name in ("trend", "year", "week"))
    return intercept(result) + parts + special


def describe(result, data: dict, seconds: float, settings: dict) -> dict:
    """Settings, wall time, convergence, estimates and the paper's comparison figures (RMSE, ELPD per point)."""
    names = hyperparameters(result)
    summary = az.summary(result, var_names=names)
    n = data["N"]
    elpd = loo(result)
    residual = data["y"] - fitted_mean(result, data)
    return {
        "settings": settings, "seconds": round(seconds, 1),
        "timings": {k: round(float(v), 1) for k, v in json.loads(result.attrs.get("timings", "{}")).items()},
        "max_rhat": float(summary["r_hat"].max()), "min_ess_bulk": float(summary["ess_bulk"].min()),
        "min_ess_tail": float(summary["ess_tail"].min()),
        "divergences": int(result.sample_stats["diverging"].sum()),
        "estimates": {name: {"mean": float(summary.loc[name, "mean"]), "sd": float(summary.loc[name, "sd"]),
                             "r_hat": float(summary.loc[name, "r_hat"]), "ess_bulk": float(summary.loc[name, "ess_bulk"])}
                      for name in names},
        "rmse": float(np.sqrt(np.mean(residual ** 2))),
        "elpd_loo_per_point": elpd["elpd_loo"] / n, "elpd_loo_se": elpd["se"], "p_loo": elpd["p_loo"],
        "pareto_k_warning": bool(elpd["warning"]),
    }


def table(row: dict) -> str:
    """Ours beside the paper's Table 8 (iteration 5)."""
    e = row["estimates"]
    lines = ["| quantity | paper (Table 8, iter. 5) | gpdsl NUTS (posterior mean ± sd) |", "|---|---|---|",
             f"| trend length-scale (standardised days) | {PAPER['trend_lengthscale']:.2f} | "
             f"{e['trend_lengthscale']['mean']:.3f} ± {e['trend_lengthscale']['sd']:.3f} |"]
    for name, label in (("year_lengthscale", "yearly"), ("week_lengthscale", "weekly")):
        lines.append(f"| {label} length-scale (paper's form, 2 x gpdsl's) | {PAPER[name]:.2f} | "
                     f"{PAPER_PERIODIC_FACTOR * e[name]['mean']:.3f} ± {PAPER_PERIODIC_FACTOR * e[name]['sd']:.3f} |")
    lines += [f"| RMSE of the posterior mean (standardised births) | {PAPER['rmse']:.2f} | {row['rmse']:.3f} |",
              f"| ELPD | {PAPER['elpd']:.2f} (definition not stated) | {row['elpd_loo_per_point']:.3f} "
              f"(PSIS-LOO per day) |",
              f"| noise sigma | | {e['sigma']['mean']:.3f} ± {e['sigma']['sd']:.4f} |"]
    s = row["settings"]
    kept = f" (chains {s['kept_chains']} of a longer run)" if "kept_chains" in s else ""
    lines += ["", f"`{s.get('model', 'births_paper.gpm')}`, {s['chains']} chains{kept} x ({s['warmup']} + {s['draws']}), "
              f"adapt_delta {s['adapt_delta']}, seed "
              f"{s['seed']}: {row['seconds']:.0f} s wall; max R-hat {row['max_rhat']:.3f}, min bulk ESS "
              f"{row['min_ess_bulk']:.0f}, min tail ESS {row['min_ess_tail']:.0f}, {row['divergences']} divergent "
              "transitions (hyperparameters)."]
    return "\n".join(lines) + "\n"


def figure(result, data: dict, path: Path, model_file: str = "births_paper.gpm") -> None:
    """The paper's Figs. 10 and 11: trend and trend + yearly over the whole period, and the year 1972."""
    p = result.posterior
    mean = {name: p[name].mean(("chain", "draw")).values for name in ("trend", "year", "week")}
    level = intercept(result)
    special = p["special"].mean(("chain", "draw")).values[data["day_of_year"] - 1]
    years = 1969 + data["t"] / 365.25
    fig = Figure(figsize=(11, 7.5), layout="constrained")
    top, bottom = fig.subplots(2, 1)
    top.plot(years, data["y"], ".", ms=1.2, color="0.65", label="data")
    top.plot(years, level + mean["trend"], color="C0", label="trend f1")
    top.plot(years, level + mean["trend"] + mean["year"], lw=0.6, color="C1", label="f1 + yearly f2")
    top.set(title="1969-1988 (standardised births)", xlabel="year")
    top.legend(loc="lower right", markerscale=6)
    day = (data["t"] >= 1096) & (data["t"] < 1096 + 366)
    doy = np.arange(1, day.sum() + 1)
    bottom.plot(doy, data["y"][day], ".", ms=3, color="0.6", label="data")
    bottom.plot(doy, fitted_mean(result, data)[day], lw=0.6, color="k", label="mu")
    bottom.plot(doy, (level + mean["trend"])[day], color="C0", label="f1")
    bottom.plot(doy, (level + mean["trend"] + mean["year"])[day], color="C1", label="f1 + f2")
    bottom.plot(doy, level + special[day], lw=0.8, color="C3", label="intercept + special days f4")
    bottom.set(title="1972", xlabel="day of the year")
    bottom.legend(loc="lower left", ncols=5, fontsize=8)
    fig.suptitle(f"The HSGP paper's birthday model (Table 8, iteration 5) by NUTS in gpdsl ({model_file})")
    with atomic_target(path) as target:
        fig.savefig(target, dpi=110, format="png")


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=600)
    parser.add_argument("--draws", type=int, default=600)
    parser.add_argument("--adapt-delta", type=float, default=0.9)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--model", choices=sorted(MODELS), default="paper",
                        help="the paper's model as written, or without its ridges (births_paper_identified.gpm)")
    parser.add_argument("--save", type=Path, help="also write the whole run (NetCDF) to this path")
    parser.add_argument("--from-saved", type=Path, help="write the outputs from a run saved with --save (no sampling)")
    parser.add_argument("--keep-chains", type=int, nargs="+", metavar="CHAIN",
                        help="with --from-saved: the outputs of these chains alone (numbered from 0)")
    args = parser.parse_args(argv)
    data = paper_data()
    settings = {"model": MODELS[args.model].name, "chains": args.chains, "warmup": args.warmup, "draws": args.draws,
                "adapt_delta": args.adapt_delta, "seed": args.seed}
    if args.from_saved is not None:
        result = read_netcdf(args.from_saved)
        seconds = json.loads(result.attrs["timings"])["total"]
        if args.keep_chains:
            result = result.isel(chain=args.keep_chains)
            settings["kept_chains"] = list(args.keep_chains)
        posterior = result.posterior
        settings.update(chains=int(posterior.sizes["chain"]), draws=int(posterior.sizes["draw"]))
        settings.update({k: v for k, v in json.loads(result.attrs.get("settings", "{}")).items()
                         if k in ("warmup", "adapt_delta")})
        settings["seed"] = int(result.attrs.get("seed", settings["seed"]))
    else:
        started = time.perf_counter()
        result = gpdsl.sample(MODELS[args.model], data, "nuts", seed=args.seed, chains=args.chains,
                              warmup=args.warmup, draws=args.draws, adapt_delta=args.adapt_delta)
        seconds = time.perf_counter() - started
    if args.save is not None:
        args.save.parent.mkdir(parents=True, exist_ok=True)
        write_netcdf(result, args.save)
    row = describe(result, data, seconds, settings)
    args.out.mkdir(parents=True, exist_ok=True)
    stem = OUTPUT_STEM[args.model]
    atomic_write_text(args.out / f"{stem}.json", json.dumps(row, indent=1) + "\n")
    atomic_write_text(args.out / f"{stem}.md", table(row))
    figure(result, data, args.out / f"{stem}.png", MODELS[args.model].name)
    print(table(row))
    return row


if __name__ == "__main__":
    main()
