"""Speed benchmark: minimum ESS per second of sampling, gpdsl's engines against PyStan NUTS.

On the same simulated data (Sec. 4.2 of Filippone & Girolami 2014, see ``simulate_data.py``;
``n = 50`` and ``n = 200``, ``d = 2``, the ARD model ``models/gp_classification.gpm``) it runs

- PM (LA, N_imp=1): pseudo-marginal MH with a Laplace importance distribution;
- PM (EP, N_imp=64): pseudo-marginal MH with an EP importance distribution, EP stopped at the paper's
  criterion (squared change of the posterior mean below ``n / 1e4``) and, as a second row, at a 100 times
  looser one, which the paper reports gives "similar efficiency with much lower computational cost"
  for ``N_imp = 64`` (Sec. 4.3);
- AA and SURR: ESS for ``f`` within Gibbs, with MH on ``theta`` (ancillary / surrogate augmentation);
- NUTS: PyStan, 4 chains of 1000 warmup + 1000 draws, ``adapt_delta = 0.95``;

and prints, for each, the minimum over the hyperparameters (``sigma``, ``tau[1]``, ``tau[2]``) of
ArviZ's ``ess_bulk`` divided by the seconds of sampling, and its ratio to NUTS's.

"Seconds of sampling" is the same notion for every method: post-compilation execution time of all
chains, warmup included: ``timings["warmup"] + timings["sampling"]`` of the results of
:func:`gpdsl.run` (gpdsl: the compiled segments' execution time; NUTS: the time PyStan's ``sample``
call takes, i.e. after the C++ build). Compilation times (``timings["compile"]``) are reported separately.
gpdsl runs its chains vectorised in one process; PyStan runs its chains in parallel processes.

Usage::

    python -m case_studies.filippone2014.bench            # full: n = 50 and 200
    python -m case_studies.filippone2014.bench --quick    # smoke run: n = 50, few iterations
    python -m case_studies.filippone2014.bench --sizes 50 --repeats 3   # three sampler seeds per method

ESS estimates from a few thousand draws vary by 10-30% between seeds (NUTS's most), so with
``--repeats`` every method runs with several sampler seeds on the same data and the ratios compare
mean min ESS per second.

The table is printed and written to ``bench_results.md`` next to this file (``--output`` to change).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import gpdsl  # noqa: E402,F401  (sets the BLAS thread variables before numpy/jax load BLAS)

import jax  # noqa: E402


import numpy as np  # noqa: E402

from case_studies.filippone2014.simulate_data import MODEL_PATH, simulate_classification  # noqa: E402
from gpdsl import load_model, run  # noqa: E402
from gpdsl.storage.atomic import atomic_write_text  # noqa: E402
from gpdsl.results import ess, groups, results_json, rhat  # noqa: E402
from gpdsl.settings import GibbsSettings, NUTSSettings, PseudoMarginalSettings  # noqa: E402

HYPERPARAMETERS = ("sigma", "tau")
TARGET_RATIO = 20.0

FULL = {"sizes": [50, 200], "chains": 4, "warmup": 1000, "draws": 5000,
        "nuts": {"chains": 4, "warmup": 1000, "draws": 1000, "adapt_delta": 0.95}}
QUICK = {"sizes": [50], "chains": 4, "warmup": 200, "draws": 500,
         "nuts": {"chains": 4, "warmup": 300, "draws": 300, "adapt_delta": 0.95}}

LOOSE_EP_TOLERANCE = 100  # the looser criterion: ||change in mu||^2 < n / 100 instead of n / 1e4

# label: (method, settings(n, run length)), run length = {"chains", "warmup", "draws"}
ENGINES = {
    "PM (LA, N_imp=1)": ("pm", lambda n, length: PseudoMarginalSettings(**length, approximation="laplace",
                                                                        num_importance=1)),
    "PM (EP, N_imp=64)": ("pm", lambda n, length: PseudoMarginalSettings(**length, approximation="ep",
                                                                         num_importance=64, ep_start="frozen")),
    f"PM (EP, N_imp=64, tol n/{LOOSE_EP_TOLERANCE})": (
        "pm", lambda n, length: PseudoMarginalSettings(**length, approximation="ep", num_importance=64,
                                                       tol=n / LOOSE_EP_TOLERANCE)),
    "AA": ("gibbs", lambda n, length: GibbsSettings(**length, theta_update="aa")),
    "SURR": ("gibbs", lambda n, length: GibbsSettings(**length, theta_update="surr")),
}


@dataclass
class Row:
    """One method's measurements on one data set."""

    method: str
    n: int
    seed: int
    iterations: str
    min_ess: float
    ess_by_parameter: dict
    max_rhat: float
    acceptance: float | None
    seconds: float
    compile_seconds: float
    load_before: float
    load_after: float

    @property
    def ess_per_second(self) -> float:
        """Minimum ESS per second of sampling."""
        return self.min_ess / self.seconds


def _ess_summary(results) -> tuple[float, dict, float]:
    posterior = groups(results)["posterior"]
    bulk = ess(posterior, HYPERPARAMETERS, method="bulk")
    r_hat = rhat(posterior, HYPERPARAMETERS)
    by_parameter = {}
    for name in HYPERPARAMETERS:
        values = np.atleast_1d(np.asarray(bulk[name].values, dtype=float))
        for index, value in enumerate(values):
            by_parameter[name if values.size == 1 else f"{name}[{index + 1}]"] = float(value)
    max_rhat = max(float(np.max(r_hat[name].values)) for name in HYPERPARAMETERS)
    return min(by_parameter.values()), by_parameter, max_rhat


def measure(label: str, results, seed: int, iterations: str, load_before: float, load_after: float) -> Row:
    """A row of the table from one run's results: min ESS over the hyperparameters per second of sampling."""
    timings = results_json(results, "timings")
    min_ess, by_parameter, max_rhat = _ess_summary(results)
    stats = groups(results).get("sample_stats", {})
    acceptance = float(stats["accepted"].mean()) if "accepted" in stats else None
    data = groups(results)["constant_data"]
    row = Row(label, int(data.sizes["N"]), seed, iterations, min_ess, by_parameter, max_rhat, acceptance,
              timings["warmup"] + timings["sampling"], timings["compile"], load_before, load_after)
    row.divergent = int(np.asarray(stats["diverging"]).sum()) if "diverging" in stats else 0
    return row


def run_engine(label: str, model, data: dict, config: dict, seed: int) -> Row:
    """Run one of gpdsl's engines and measure it."""
    method, settings = ENGINES[label]
    load_before = os.getloadavg()[0]
    length = {key: config[key] for key in ("chains", "warmup", "draws")}
    results = run(model, data, method, settings(data["N"], length), seed=seed)
    return measure(label, results, seed, f"{config['chains']} x ({config['warmup']} + {config['draws']})",
                   load_before, os.getloadavg()[0])


def run_nuts(model, data: dict, config: dict, seed: int) -> Row:
    """Run PyStan NUTS and measure it (sampling time excludes the C++ build: PyStan's sample call)."""
    nuts = config["nuts"]
    load_before = os.getloadavg()[0]
    settings = NUTSSettings(chains=nuts["chains"], warmup=nuts["warmup"], draws=nuts["draws"],
                            adapt_delta=nuts["adapt_delta"], backend="pystan")
    results = run(model, data, "nuts", settings, seed=seed)
    return measure(f"NUTS (PyStan, adapt_delta={nuts['adapt_delta']})", results, seed,
                   f"{nuts['chains']} x ({nuts['warmup']} + {nuts['draws']})", load_before, os.getloadavg()[0])


def format_table(rows: list[Row], nuts_rate: float) -> list[str]:
    """Markdown table of the runs on one data set, with ratios to NUTS's mean min ESS per second."""
    lines = ["| method | sampler seed | iterations | min ESS_bulk | ESS_bulk (sigma, tau[1], tau[2]) | max R-hat "
             "| accept. | sampling s | compile s | min ESS/s | ratio to NUTS | load (before/after) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        acceptance = f"{r.acceptance:.2f}" if r.acceptance is not None else "-"
        parameters = ", ".join(f"{v:.0f}" for v in r.ess_by_parameter.values())
        lines.append(f"| {r.method} | {r.seed} | {r.iterations} | {r.min_ess:.0f} | {parameters} | {r.max_rhat:.3f} "
                     f"| {acceptance} | {r.seconds:.1f} | {r.compile_seconds:.1f} | {r.ess_per_second:.1f} "
                     f"| {r.ess_per_second / nuts_rate:.1f} | {r.load_before:.1f} / {r.load_after:.1f} |")
    return lines


def summarise(rows: list[Row], nuts_rate: float) -> list[str]:
    """Per method: mean and spread of min ESS per second over the sampler seeds, and the ratio of means."""
    lines = ["| method | runs | min ESS/s, mean (min - max) | ratio of means to NUTS |", "|---|---|---|---|"]
    for method in dict.fromkeys(r.method for r in rows):
        rates = np.array([r.ess_per_second for r in rows if r.method == method])
        lines.append(f"| {method} | {rates.size} | {rates.mean():.1f} ({rates.min():.1f} - {rates.max():.1f}) "
                     f"| {rates.mean() / nuts_rate:.1f} |")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: n = 50 only, few iterations")
    parser.add_argument("--sizes", type=int, nargs="+", help="data sizes (default 50 200; 50 with --quick)")
    parser.add_argument("--methods", nargs="+", choices=["la", "ep", "ep-loose", "aa", "surr", "nuts"],
                        default=["la", "ep", "ep-loose", "aa", "surr", "nuts"],
                        help="methods to run (ep-loose: EP stopped at the looser criterion)")
    parser.add_argument("--seed", type=int, default=0, help="data seed (the samplers use seed + 1)")
    parser.add_argument("--repeats", type=int, default=1,
                        help="runs of every method, with sampler seeds seed + 1, seed + 2, ... (same data)")
    parser.add_argument("--output", type=Path, default=HERE / "bench_results.md", help="markdown output file")
    args = parser.parse_args(argv)
    config = dict(QUICK if args.quick else FULL)
    if args.sizes:
        config["sizes"] = args.sizes
    keys = {"la": "PM (LA, N_imp=1)", "ep": "PM (EP, N_imp=64)",
            "ep-loose": f"PM (EP, N_imp=64, tol n/{LOOSE_EP_TOLERANCE})", "aa": "AA", "surr": "SURR"}
    model = load_model(MODEL_PATH)
    started = datetime.datetime.now()
    lines = ["# Filippone & Girolami (2014) case study: min ESS per second, gpdsl engines vs NUTS", "",
             f"- date: {started:%Y-%m-%d %H:%M}; machine: {platform.machine()}, {os.cpu_count()} cores "
             f"(the 1-minute load average is shown before and after each run); "
             f"load at start: {', '.join(f'{v:.1f}' for v in os.getloadavg())}",
             f"- mode: {'quick' if args.quick else 'full'}; data: simulate_data.py, seed {args.seed}, d = 2, "
             f"balanced classes; model: models/gp_classification.gpm (ARD)",
             f"- gpdsl engines: {config['chains']} vectorised chains (vmap) in one process, split over "
             f"{len(jax.devices())} CPU device(s) (one per core), "
             f"{config['warmup']} warmup + {config['draws']} draws each, chains started from prior draws; "
             "NUTS: PyStan, chains in parallel processes",
             "- **seconds of sampling = post-compilation execution time of all chains, warmup included** "
             "(gpdsl: compiled segments' execution time; NUTS: PyStan's sample call after the build). "
             "Compile: gpdsl's XLA compilation; for NUTS the rest of the wall time (C++ build or cache "
             "lookup, process start-up)",
             "- min ESS = minimum over sigma, tau[1], tau[2] of ArviZ ess_bulk over all chains", ""]
    print("\n".join(lines), flush=True)
    for n in config["sizes"]:
        data, truth = simulate_classification(n, 2, seed=args.seed)
        header = [f"## n = {n}, d = 2 (true sigma = {truth['sigma']:.3f}, "
                  f"tau = {', '.join(f'{t:.3f}' for t in truth['tau'])})", ""]
        print("\n".join(header), flush=True)
        rows = []
        for method in args.methods:
            for repeat in range(args.repeats):
                tic = time.perf_counter()
                sampler_seed = args.seed + 1 + repeat
                if method == "nuts":
                    rows.append(run_nuts(model, data, config, sampler_seed))
                else:
                    rows.append(run_engine(keys[method], model, data, config, sampler_seed))
                r = rows[-1]
                print(f"  {r.method} (seed {sampler_seed}): min ESS {r.min_ess:.0f} in {r.seconds:.1f} s -> "
                      f"{r.ess_per_second:.1f}/s (compile {r.compile_seconds:.1f} s, "
                      f"wall {time.perf_counter() - tic:.0f} s)", flush=True)
        nuts_rows = [r for r in rows if r.method.startswith("NUTS")]
        nuts_rate = float(np.mean([r.ess_per_second for r in nuts_rows])) if nuts_rows else float("nan")
        table = format_table(rows, nuts_rate) + [""] + summarise(rows, nuts_rate)
        notes = []
        if nuts_rows:
            divergent = sum(getattr(r, "divergent", 0) for r in nuts_rows)
            notes.append(f"NUTS divergent transitions: {divergent}")
            for method in dict.fromkeys(r.method for r in rows if r.method.startswith("PM")):
                ratio = np.mean([r.ess_per_second for r in rows if r.method == method]) / nuts_rate
                notes.append(f"{method}: {ratio:.1f} x NUTS (target {TARGET_RATIO:.0f} x: "
                             f"{'met' if ratio >= TARGET_RATIO else 'not met'})")
        block = table + [""] + [f"- {note}" for note in notes] + [""]
        print("\n".join(block), flush=True)
        lines += header + block
    atomic_write_text(args.output, "\n".join(lines) + "\n", "benchmark results")
    print(f"written to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
