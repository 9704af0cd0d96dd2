"""Issue 38: pm-gplvm on air quality with and without refreshes of the importance draws' variates at fixed xi.

The air-quality chains at the paper's size (Q = 1000) held single states for up to 1133 iterations: a lucky estimate
that the correlated proposals (rho = 0.99) inherit. ``noise_refreshes`` adds elliptical slice updates of the
variates alone before each iteration (exact). Both runs here start from the same seed and settings (those of the case
study's ``CONFIG["paper"]`` and its data, shortened; no latent sweeps); printed for each: seconds, seconds per iteration, acceptance per block, the
longest hold of a block (consecutive kept draws where it did not move, summed over chains' worst), the largest
R-hat and the smallest bulk ESS over the hyperparameters, and ESS per second, with the ratio of the last.

Run: ``python benchmarks/pm_gplvm_noise_refresh.py [--warmup 300] [--draws 900] [--refreshes 2]`` (about 25
minutes for the plain run at the defaults on a 2-core machine); the data come from ``GPDSL_DATA_MIRROR`` or
``../shared/data`` where set, else from the loader's source.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import gpdsl  # noqa: E402,F401  (sets the XLA device count before JAX loads)

from dataclasses import replace  # noqa: E402

import numpy as np  # noqa: E402

from case_studies.gadd2021_sgplvm import run as study  # noqa: E402
from gpdsl import load_model, run, summarize  # noqa: E402
from gpdsl.settings import PMGPLVMSettings  # noqa: E402

HYPERPARAMETERS = list(study.HYPERPARAMETERS)


def longest_hold(values: np.ndarray) -> int:
    """The longest run of equal consecutive values in one chain's draws."""
    moves = np.flatnonzero(np.any(np.diff(values, axis=0) != 0, axis=tuple(range(1, values.ndim))))
    return int(np.diff(np.r_[-1, moves, len(values) - 1]).max())


def measure(model, data, settings: PMGPLVMSettings, seed: int) -> dict:
    started = time.perf_counter()
    results = run(model, data, "pm-gplvm", settings, seed=seed, progress=False)
    seconds = time.perf_counter() - started
    summary = summarize(results, var_names=HYPERPARAMETERS)
    ess = float(np.nanmin(summary["ess_bulk"]))
    s1 = np.asarray(results.posterior["s1"])
    accepted = np.asarray(results.sample_stats["block_accepted"])
    return {"seconds": seconds, "seconds_per_iteration": seconds / (settings.warmup + settings.draws),
            "acceptance": accepted.mean(axis=(0, 1)).round(3).tolist(),
            "longest_hold": max(longest_hold(chain) for chain in s1),
            "max_r_hat": float(np.nanmax(summary["r_hat"])), "min_ess_bulk": ess, "ess_per_second": ess / seconds,
            "summary": {name: {"mean": float(row["mean"]), "r_hat": float(row["r_hat"]),
                               "ess_bulk": float(row["ess_bulk"])} for name, row in summary.iterrows()}}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--draws", type=int, default=900)
    parser.add_argument("--refreshes", type=int, default=2)
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    args = parser.parse_args(argv)

    part = study.CONFIG["paper"]["airquality"]
    model, data = load_model(study.AIRQUALITY_MODEL), study.airquality_fit_data(part)
    paper = replace(study.pm_settings(part["pm"]), warmup=args.warmup, draws=args.draws, latent_sweeps=0)
    rows = {}
    for name, refreshes in (("plain", 0), (f"refresh x{args.refreshes}", args.refreshes)):
        rows[name] = measure(model, data, replace(paper, noise_refreshes=refreshes), args.seed)
        print(f"{name}: {json.dumps({k: v for k, v in rows[name].items() if k != 'summary'})}", flush=True)
    print(f"air quality, N = {data['N']}, pm-gplvm 4 chains x ({args.warmup} + {args.draws}), Q = "
          f"{paper.num_importance}, blocks {study.BLOCKS}, correlation {paper.correlation}, delayed acceptance "
          f"{paper.delayed_acceptance}, {paper.proposal} proposal (gtol {paper.laplace_gtol})")
    print(f"{'run':<14}{'seconds':>9}{'s/it':>7}{'acceptance':>16}{'hold':>6}{'R-hat':>7}{'min ESS':>9}{'ESS/s':>8}")
    for name, r in rows.items():
        print(f"{name:<14}{r['seconds']:>9.0f}{r['seconds_per_iteration']:>7.2f}{str(r['acceptance']):>16}"
              f"{r['longest_hold']:>6}{r['max_r_hat']:>7.2f}{r['min_ess_bulk']:>9.1f}{r['ess_per_second']:>8.4f}")
    plain, refreshed = rows.values()
    print(f"ESS per second, refreshed / plain: {refreshed['ess_per_second'] / plain['ess_per_second']:.2f}; "
          f"seconds per iteration: {refreshed['seconds_per_iteration'] / plain['seconds_per_iteration']:.2f}")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
