"""P5 of issue 17: pseudo-marginal MCMC of the supervised GPLVM on sinusoid case 1 against NUTS on the same file.

Target: 4 chains x 5000 iterations (1000 of them burn-in) with Q = 1000 importance draws and the proposal found afresh
at every block proposal take at most 10 minutes on a 2-core machine. Printed: the wall time of each method,
R-hat and the smallest bulk ESS over the hyperparameters, and ESS per second (of the whole run: compilation,
the variational start and warmup included), with their ratio. NUTS runs through PyStan (or CmdStan) on the
Stan program compiled from ``models/supervised_gplvm.gpm``; its build is cached after the first run and the
build time is excluded.

Run: ``python benchmarks/pm_gplvm.py [--iterations 5000] [--burn-in 1000] [--num-importance 1000]
[--nuts-warmup 1000] [--nuts-draws 1000] [--skip-nuts] [--chain-groups K [--scheduler local]]``: the last two
run the chains in ``K`` groups, in worker processes with ``--scheduler local`` (one process per core) instead of
one process over one XLA host device per core.

Everything goes through the public API: ``gpdsl.run``, ``gpdsl.settings``, ``gpdsl.summarize``, ``gpdsl.results``
and the sinusoids of ``gpdsl.datasets``.
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

import numpy as np  # noqa: E402

from gpdsl import load_model, run, summarize  # noqa: E402
from gpdsl.datasets import sinusoids  # noqa: E402
from gpdsl.results import results_json, root_attrs  # noqa: E402

HYPERPARAMETERS = ["s1", "theta", "theta_S", "noise"]


def measured(results, wall: float, exclude: float = 0.0) -> dict:
    summary = summarize(results, var_names=HYPERPARAMETERS)
    seconds = wall - exclude
    ess = float(np.nanmin(summary["ess_bulk"]))
    return {"seconds": seconds, "max_r_hat": float(np.nanmax(summary["r_hat"])), "min_ess_bulk": ess,
            "ess_per_second": ess / seconds, "timings": json.loads(root_attrs(results)["timings"])}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=5000)
    parser.add_argument("--burn-in", type=int, default=1000)
    parser.add_argument("--num-importance", type=int, default=1000)
    parser.add_argument("--nuts-warmup", type=int, default=1000)
    parser.add_argument("--nuts-draws", type=int, default=1000)
    parser.add_argument("--skip-nuts", action="store_true")
    parser.add_argument("--chain-groups", type=int, default=None)
    parser.add_argument("--scheduler", default=None)
    parser.add_argument("--delayed-acceptance", action="store_true",
                        help="screen the proposals by the proposal's surrogate before estimating (exact)")
    parser.add_argument("--proposal", default="laplace", choices=["laplace", "variational"],
                        help="importance proposal (variational: the paper's E-step q)")
    args = parser.parse_args(argv)

    from gpdsl.settings import NUTSSettings, PMGPLVMSettings

    x, Y, _ = sinusoids(30)
    model = load_model(REPO / "models" / "supervised_gplvm.gpm")
    data = {"N": 30, "Q": 2, "D": 6, "X": x[:, None], "Y": Y - Y.mean(0)}
    settings = PMGPLVMSettings(chains=4, warmup=args.burn_in, draws=args.iterations - args.burn_in,
                               num_importance=args.num_importance, blocks=[["s1", "theta"], ["theta_S", "noise"]],
                               delayed_acceptance=args.delayed_acceptance, proposal=args.proposal)
    started = time.perf_counter()
    pm_results = run(model, data, "pm-gplvm", settings, seed=1, scheduler=args.scheduler,
                     chain_groups=args.chain_groups)
    pm = measured(pm_results, time.perf_counter() - started)
    iterations = np.asarray(pm_results.sample_stats["proposal_iterations"])
    pm["proposal_iterations"] = {"mean": float(iterations.mean()), "p90": float(np.percentile(iterations, 90)),
                               "max": int(iterations.max())}
    report = results_json(pm_results, "report")
    pm["latent_seconds"] = report.get("latent_seconds")
    pm["block_acceptance"], pm["block_screen_pass"] = report.get("block_acceptance"), report.get("block_screen_pass")
    rows = {"pm-gplvm": pm}
    if not args.skip_nuts:
        nuts_settings = NUTSSettings(chains=4, warmup=args.nuts_warmup, draws=args.nuts_draws, adapt_delta=0.9)
        run(model, data, "nuts", NUTSSettings(chains=1, warmup=10, draws=10), seed=1)  # the build, not timed
        started = time.perf_counter()
        nuts_results = run(model, data, "nuts", nuts_settings, seed=1)
        rows["nuts"] = measured(nuts_results, time.perf_counter() - started)
    where = (f"{args.chain_groups} chain groups" + (f" on scheduler {args.scheduler}" if args.scheduler else "")
             if args.chain_groups else "one process")
    print(f"sinusoid case 1, N = 30, Q_z = 2; pm-gplvm: 4 chains x {args.iterations} iterations (burn-in "
          f"{args.burn_in}), {args.num_importance} importance draws, {args.proposal} proposal at every block "
          f"proposal, {where}"
          f"{', delayed acceptance' if args.delayed_acceptance else ''}; "
          f"NUTS: 4 chains x ({args.nuts_warmup} + {args.nuts_draws})")
    print(f"{'method':<10} {'seconds':>9} {'max R-hat':>10} {'min ESS':>9} {'ESS/s':>8}")
    for name, row in rows.items():
        print(f"{name:<10} {row['seconds']:>9.1f} {row['max_r_hat']:>10.3f} {row['min_ess_bulk']:>9.1f} "
              f"{row['ess_per_second']:>8.3f}")
    print(f"pm-gplvm wall time {pm['seconds'] / 60:.1f} min (target at most 10 min: "
          f"{'met' if pm['seconds'] <= 600 else 'NOT met'})")
    if "nuts" in rows:
        print(f"ESS per second, pm-gplvm / NUTS: {pm['ess_per_second'] / rows['nuts']['ess_per_second']:.3f}")
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
