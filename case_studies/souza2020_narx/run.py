"""Reproduce the free-simulation experiment of the Unscented GPLVM (de Souza 2020, Sec. 3.4.2, Table 3).

AirPassengers, GP-NARX with lag 12 on the first 48 lag vectors (targets 1950-01 to 1953-12), standardised
by the training targets; hyperparameters by type-II maximum likelihood (gpdsl's ``ml`` method, from the
notebook's initial values, at most 5000 L-BFGS iterations); then a free simulation over the 132 months
1950-01 to 1960-12 from the first window, scored on the 84 test months 1954-01 to 1960-12 in original
units. Rows: the naive GP-NARX (mean feedback) and the "GPLVM" predictor (Gaussian feedback, eqs. 40-41
with the training inputs as inducing inputs) with analytic (RBF+Linear only), Gauss-Hermite (2 nodes per
lag, 4096 points), unscented (24 points) and Monte Carlo (24, 200, 4096 draws; 10 seeds) Psi statistics,
each with the training-input variance of the thesis (the fitted noise variance) and of the code (1e-6).

Usage::

    python case_studies/souza2020_narx/run.py            # every row of Table 3, both variances
    python case_studies/souza2020_narx/run.py --quick    # a few rows, 2 Monte Carlo seeds (smoke test)
    python case_studies/souza2020_narx/run.py --render   # rewrite the table and figure from the JSON

Outputs (``*_quick.*`` from ``--quick``), written atomically to ``case_studies/souza2020_narx/results/``:
``table3.md`` (ours beside the paper's, the paper's claims checked, settings and wall times),
``table3.json`` (every run's metrics, the fits, the predictions of the deterministic rows) and
``free_simulation.png`` (the series with the NARX and UT predictive means +- 2 sd).

The fits go through the public API (``gpdsl.run``'s ``ml`` with ``keep_state=True`` for the fit,
``gpdsl.settings.MLSettings``, ``gpdsl.datasets.air_passengers``). Beyond it: the free simulations of a kept fit
(:mod:`gpdsl.inference.forecast`: ``narx_data``, ``narx_model_data``, ``ForecastSettings``, ``simulate_forecast``;
the command line's ``gpdsl forecast`` has no Python function) and atomic writes (:mod:`gpdsl.storage.atomic`).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import gpdsl  # noqa: E402,F401  (sets BLAS thread variables before numpy/jax load)

import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from case_studies.souza2020_narx import paper_tables  # noqa: E402
from case_studies.souza2020_narx.paper_tables import PERIODIC, RBF_LINEAR  # noqa: E402
from gpdsl import load_data, load_model, run  # noqa: E402
from gpdsl.storage.atomic import atomic_target, atomic_write_text  # noqa: E402
from gpdsl.datasets import air_passengers  # noqa: E402
from gpdsl.inference.forecast import ForecastSettings, narx_data, narx_model_data, simulate_forecast  # noqa: E402
from gpdsl.settings import MLSettings  # noqa: E402

RESULTS = HERE / "results"
LAG, TRAIN, MAX_ITERATIONS = 12, 48, 5000
MODELS = {RBF_LINEAR: ROOT / "models" / "gp_narx.gpm", PERIODIC: HERE / "gp_narx_periodic.gpm"}
VARIANCES = {"thesis": "noise", "code": 1e-6}
SETTINGS = {
    "full": {"mc_samples": (24, 200, 4096), "mc_seeds": 10, "gauss_hermite": True},
    "quick": {"mc_samples": (24,), "mc_seeds": 2, "gauss_hermite": False},
}
PSI = {"Analytic": "analytic", "GH": "gauss_hermite", "UT": "unscented", "MC": "monte_carlo"}


@dataclass(frozen=True)
class Row:
    """One row of Table 3."""

    method: str
    samples: int | None
    kernel: str

    @property
    def key(self) -> tuple:
        return (self.method, self.samples, self.kernel)

    def settings(self, variance) -> ForecastSettings:
        if self.method == "GP-NARX":
            return ForecastSettings(lag=LAG, train=TRAIN, feedback="mean")
        return ForecastSettings(lag=LAG, train=TRAIN, feedback="gaussian", psi=PSI[self.method], gh_nodes=2,
                                mc_samples=self.samples or 1, training_variance=variance)


def table_rows(cfg: dict) -> list[Row]:
    """The rows of Table 3 that ``cfg`` runs, in the paper's order."""
    rows = [Row("GP-NARX", None, RBF_LINEAR), Row("GP-NARX", None, PERIODIC), Row("Analytic", None, RBF_LINEAR)]
    if cfg["gauss_hermite"]:
        rows += [Row("GH", 2 ** LAG, RBF_LINEAR), Row("GH", 2 ** LAG, PERIODIC)]
    rows += [Row("UT", 2 * LAG, RBF_LINEAR), Row("UT", 2 * LAG, PERIODIC)]
    rows += [Row("MC", samples, kernel) for samples in cfg["mc_samples"] for kernel in (RBF_LINEAR, PERIODIC)]
    return rows


def initial_values(narx, kernel: str) -> dict:
    """The notebook's starting point (spec item 7), from the standardised training data."""
    X, y = narx.X[:narx.train], narx.y[:narx.train]
    values = {"rbf_variance": float(np.var(y)), "rbf_lengthscale": (10 * np.sqrt(np.var(X, axis=0))).tolist(),
              "linear_variance": [1e-2 * float(np.var(y)) / X.shape[1]] * X.shape[1],
              "noise": 0.01 * float(np.var(y))}
    if kernel == PERIODIC:
        values.update({"periodic_variance": float(np.var(y)), "periodic_lengthscale": 1.0, "period": 1.0})
    return values


def fit_kernel(kernel: str, narx) -> tuple:
    """The ``ml`` fit of one kernel's model file (``gpdsl.run``'s kept state) and its summary."""
    model = load_model(MODELS[kernel])
    data, _ = load_data(narx_model_data(model, narx), model)
    settings = MLSettings(initial_values=initial_values(narx, kernel), max_iterations=MAX_ITERATIONS)
    _, fit = run(model, data, "ml", settings, seed=0, keep_state=True)
    summary = {"model": str(MODELS[kernel].relative_to(ROOT)), "report": fit.report,
               "hyperparameters": {k: np.asarray(v).tolist() for k, v in fit.hyperparameters().items()}}
    return fit, summary


def run_row(fit, narx, row: Row, variance, seeds: int) -> dict:
    """Every run of one row at one training-input variance: metrics per run, wall times, first predictions."""
    settings = row.settings(variance)
    runs = seeds if row.method == "MC" else 2  # deterministic rows run twice: with and without compilation
    metrics, seconds, first = [], [], None
    for seed in range(runs):
        started = time.perf_counter()
        result = simulate_forecast(fit, narx, settings, seed=seed)
        seconds.append(time.perf_counter() - started)
        metrics.append(result.metrics)
        first = first or result
    if row.method != "MC":
        metrics = metrics[:1]
    nlpd = [m["nlpd"] for m in metrics]
    rmse = [m["rmse"] for m in metrics]
    return {"method": row.method, "samples": row.samples, "kernel": row.kernel, "training_variance": variance,
            "nlpd": nlpd, "rmse": rmse, "count": metrics[0]["count"], "first_call_seconds": seconds[0],
            "run_seconds": float(np.mean(seconds[1:])), "mean": first.mean.tolist(),
            "variance": first.variance.tolist(), "index": first.index.tolist()}


def mean_sd(values, digits: int = 2) -> str:
    """``mean ± sd`` over runs (sd with ddof 1, as the paper's pandas ``describe``), or the single value."""
    values = np.asarray(values, dtype=float)
    if values.size == 1:
        return f"{values[0]:.{digits}f}"
    return f"{values.mean():.{digits}f} ± {values.std(ddof=1):.{digits}f}"


def paper_cell(value, sd) -> str:
    return "-" if value is None else (f"{value:.2f}" if sd is None else f"{value:.2f} ± {sd:.2f}")


def render(results: dict, mode: str) -> str:
    """The Markdown report: the table beside the paper's, the paper's claims checked, the fits, settings."""
    runs = results["runs"]
    by = {(r["method"], r["samples"], r["kernel"], str(r["training_variance"])): r for r in runs}
    lines = [f"# de Souza (2020) Table 3, AirPassengers free simulation ({mode})", "",
             ("NLPD (nats per value) and RMSE (thousands of passengers) on the 84 test months 1954-01 to 1960-12, "
              "original units. Ours: v = the training-input variance of the GPLVM predictor, the fitted noise "
              "variance (thesis) or 1e-6 (code); GP-NARX does not use it. Monte Carlo: mean ± sd over "
              f"{results['settings']['mc_seeds']} seeds. Run time: one compiled free simulation of 132 steps "
              "(first call: with compilation or the compilation-cache load)."), "",
             ("| method | samples | kernel | paper NLPD | paper RMSE | NLPD (v = noise) | RMSE (v = noise) "
              "| NLPD (v = 1e-6) | RMSE (v = 1e-6) | run time, v = 1e-6 (s) | first call (s) |"),
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in results["rows"]:
        key = (row["method"], row["samples"], row["kernel"])
        paper = paper_tables.TABLE3.get(key, (None, None, None, None))
        thesis, code = by[(*key, "noise")], by[(*key, "1e-06")]
        samples = "-" if row["samples"] is None else str(row["samples"])
        lines.append(f"| {row['method']} | {samples} | {row['kernel']} | {paper_cell(paper[0], paper[1])} "
                     f"| {paper_cell(paper[2], paper[3])} | {mean_sd(thesis['nlpd'])} | {mean_sd(thesis['rmse'])} "
                     f"| {mean_sd(code['nlpd'])} | {mean_sd(code['rmse'])} | {code['run_seconds']:.3f} "
                     f"| {code['first_call_seconds']:.2f} |")
    lines += ["", "## The paper's claims, checked on our numbers", ""] + claims(by, results) + \
             ["", "## The fits (type-II maximum likelihood, gpdsl `ml`)", ""]
    for kernel, fit in results["fits"].items():
        report = fit["report"]
        noise = fit["hyperparameters"]["noise"]
        lines.append(f"- {kernel} (`{fit['model']}`): log marginal likelihood {report['log_marginal']:.4f}, noise "
                     f"variance {noise:.4g} (standardised units), {report['iterations']} iterations, "
                     f"{report['seconds']:.1f} s ({report['message']})")
    settings = results["settings"]
    lines += ["", "## Settings", "",
              (f"- lag {LAG}, {TRAIN} training lag vectors, standardised by the training targets "
               f"(mean {results['offset']:.4f}, sd {results['scale']:.4f}); L-BFGS at most {MAX_ITERATIONS} "
               "iterations from the notebook's initial values."),
              f"- Monte Carlo samples {list(settings['mc_samples'])}, {settings['mc_seeds']} seeds (0 to "
              f"{settings['mc_seeds'] - 1}); test statistics drawn afresh at each step, training statistics once "
              "per run; Gauss-Hermite " + ("2 nodes per lag (4096 points)." if settings["gauss_hermite"]
                                           else "not run in this mode."),
              f"- Total wall time {results['seconds']:.0f} s on {results['machine']}."]
    return "\n".join(lines) + "\n"


def claims(by: dict, results: dict) -> list[str]:
    """The derived claims of spec sheet D, Sec. 3.3, evaluated on our runs at both training-input variances."""
    out = []
    for label, variance in (("v = 1e-6", "1e-06"), ("v = noise", "noise")):
        for kernel in (RBF_LINEAR, PERIODIC):
            narx = by[("GP-NARX", None, kernel, variance)]
            better = [r for r in results["rows"] if r["kernel"] == kernel and r["method"] != "GP-NARX"]
            beaten = [f"{r['method']}{'' if r['samples'] is None else ' ' + str(r['samples'])}" for r in better
                      if np.mean(by[(r['method'], r['samples'], kernel, variance)]["nlpd"]) >= np.mean(narx["nlpd"])]
            verdict = "every GPLVM variant has a lower NLPD than GP-NARX" if not beaten else \
                f"not lower than GP-NARX's NLPD: {', '.join(beaten)}"
            out.append(f"- {label}, {kernel}: {verdict} ({np.mean(narx['nlpd']):.2f}).")
        key_ut, key_gh = ("UT", 2 * LAG, PERIODIC, variance), ("GH", 2 ** LAG, PERIODIC, variance)
        if key_gh in by:
            gain = np.mean(by[key_ut]["nlpd"]) - np.mean(by[key_gh]["nlpd"])
            out.append(f"- {label}: GH (4096 points, 170x the evaluations of UT) lowers the Per.+RBF+Lin. NLPD by "
                       f"{gain:.2f} (paper: 0.06).")
    return out


def plot(results: dict, series: np.ndarray, path: Path) -> None:
    """Series with the NARX and UT predictive means +- 2 sd, per kernel (rows) and training variance (columns)."""
    by = {(r["method"], r["kernel"], str(r["training_variance"])): r for r in results["runs"]}
    figure = Figure(figsize=(12, 6.5), layout="constrained")
    axes = figure.subplots(2, 2, sharex=True, sharey=True)
    years = 1949 + np.arange(series.size) / 12
    for i, kernel in enumerate((RBF_LINEAR, PERIODIC)):
        for j, (label, variance) in enumerate((("v = 1e-6 (code)", "1e-06"), ("v = noise variance (thesis)", "noise"))):
            ax = axes[i, j]
            ax.plot(years, series, color="black", lw=1.2, label="AirPassengers")
            for method, color in (("GP-NARX", "C0"), ("UT", "C1")):
                run = by[(method, kernel, variance)]
                t = 1949 + np.asarray(run["index"]) / 12
                mean, sd = np.asarray(run["mean"]), np.sqrt(np.asarray(run["variance"]))
                name = "GP-NARX" if method == "GP-NARX" else "GPLVM, UT (24 points)"
                ax.plot(t, mean, color=color, lw=1.2, label=f"{name}: NLPD {run['nlpd'][0]:.2f}, RMSE {run['rmse'][0]:.1f}")
                ax.fill_between(t, mean - 2 * sd, mean + 2 * sd, color=color, alpha=0.25)
            ax.axvline(1954, color="grey", ls=":", lw=1)
            ax.set_ylim(0, 750)
            ax.set_title(f"{kernel}, {label}", fontsize=10)
            ax.legend(loc="upper left", fontsize=8)
    for ax in axes[1]:
        ax.set_xlabel("year (test months from 1954, dotted line)")
    for ax in axes[:, 0]:
        ax.set_ylabel("passengers (thousands)")
    with atomic_target(path, "figure") as temporary:
        figure.savefig(temporary, format="png", dpi=110)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a few rows and 2 Monte Carlo seeds (smoke test)")
    parser.add_argument("--render", action="store_true", help="rewrite the table and figure from the JSON of a run")
    args = parser.parse_args(argv)
    mode = "quick" if args.quick else "full"
    cfg = SETTINGS[mode]
    suffix = "_quick" if args.quick else ""
    RESULTS.mkdir(exist_ok=True)
    started = time.perf_counter()
    series = air_passengers().y
    if args.render:
        results = json.loads((RESULTS / f"table3{suffix}.json").read_text())
        write_outputs(results, series, mode, suffix)
        return 0
    narx = narx_data(series, LAG, TRAIN)
    fits, summaries = {}, {}
    for kernel in (RBF_LINEAR, PERIODIC):
        fits[kernel], summaries[kernel] = fit_kernel(kernel, narx)
        print(f"fit {kernel}: log marginal likelihood {fits[kernel].log_marginal:.4f}", flush=True)
    rows, runs = table_rows(cfg), []
    for row in rows:
        for variance in VARIANCES.values():
            if row.method == "GP-NARX" and variance != "noise":
                runs.append({**runs[-1], "training_variance": variance})
                continue
            run = run_row(fits[row.kernel], narx, row, variance, cfg["mc_seeds"])
            runs.append(run)
            print(f"{row.method:8} {row.samples!s:>5} {row.kernel:14} v={variance!s:6} NLPD {mean_sd(run['nlpd'])} "
                  f"RMSE {mean_sd(run['rmse'])} ({run['run_seconds']:.3f} s per run)", flush=True)
    results = {"mode": mode, "settings": {**cfg, "lag": LAG, "train": TRAIN, "max_iterations": MAX_ITERATIONS},
               "rows": [{"method": r.method, "samples": r.samples, "kernel": r.kernel} for r in rows],
               "runs": runs, "fits": summaries, "offset": narx.offset, "scale": narx.scale,
               "seconds": time.perf_counter() - started,
               "machine": f"{platform.machine()}, {platform.system()}, gpdsl {gpdsl.__version__}"}
    atomic_write_text(RESULTS / f"table3{suffix}.json", json.dumps(results, indent=1) + "\n", "results")
    write_outputs(results, series, mode, suffix)
    print(f"wrote {RESULTS / f'table3{suffix}.md'} ({results['seconds']:.0f} s)")
    return 0


def write_outputs(results: dict, series: np.ndarray, mode: str, suffix: str) -> None:
    """The Markdown table and the figure of a run's results."""
    atomic_write_text(RESULTS / f"table3{suffix}.md", render(results, mode), "results table")
    plot(results, series, RESULTS / f"free_simulation{suffix}.png")


if __name__ == "__main__":
    sys.exit(main())
