"""Issue 38's benchmark table: each engine's seconds on one device (``--device cpu|gpu``), same seeds and sizes.

Every benchmark is one ``gpdsl.run`` (the public API) at a fixed, small number of iterations of the issue's size,
so that CPU and GPU do the same work; the table gives the seconds per unit of work, without compilation: a
chain iteration of all chains (``timings``' ``warmup + sampling`` over the iterations), an evaluation of a fit's
objective (L-BFGS's or an Adam step: the difference of two fits of different lengths over the difference of their
evaluations, see :func:`fit_run`), a step t >= 2 of the sequential sampler; with each run's seconds and its
compile seconds.

=============  ==========================================================================================
pm-200         ``models/gp_classification.gpm``, n = 200 (2 inputs), pm (EP, 8 importance draws), 4 chains
pm-2000        the same at n = 2000
gibbs          ``models/gp_classification.gpm``, n = 1000, gibbs (ESS of f, SURR), 4 chains
vem-oil        ``models/bayesian_gplvm.gpm`` on oil flow (N = 1000, D = 12, Q = 10), vem, 20 inducing inputs, L-BFGS
svi-gplvm      the minibatch GPLVM (``svi-gplvm``) on 100,000 synthetic points (D = 20, Q = 5), batches of 1000
sgpr           SGPR on 10,000 points (3 inputs), 100 inducing inputs, L-BFGS
pm-gplvm       the air-quality supervised GPLVM (Gadd et al. 2021, N = 116), Q = 1000 importance draws, 4 chains
sequential     the sequential sampler (Tegner et al. 2018), N = 200, M = 1000 states; steps 2..4 timed, the
               seconds per step times 19 give steps 2..20 (each step's cost does not grow with t: window 1)
=============  ==========================================================================================

``--quick`` runs every benchmark at a small size (a smoke test of the script on a CPU). Results are appended as
JSON lines to ``--out`` as each benchmark ends (a run stopped by its time limit keeps the finished ones);
``--table CPU.jsonl GPU.jsonl`` writes the markdown table of two such files.

Run: ``python benchmarks/gpu/bench.py --device gpu --out gpu.jsonl [--quick] [--only pm-200 gibbs]``.
Data: oil flow and air quality from ``gpdsl.datasets`` (``GPDSL_DATA_MIRROR``: ``benchmarks/gpu/prepare.sh`` puts
a copy in ``.gpu/data`` for a machine without network); the others are simulated from fixed seeds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import gpdsl  # noqa: E402  (sets XLA's CPU flags before JAX loads)

import numpy as np  # noqa: E402

SEED = 38
SGPR_MODEL = """
data { int N; int D; matrix[N, D] X; vector[N] y; }
parameters { real<lower=0> variance; vector<lower=0>[D] lengthscale; real<lower=0> noise; }
model {
  f ~ gp(X, variance * rbf(lengthscale = lengthscale));
  y ~ normal(f, noise);
}
"""


def classification(n: int) -> dict:
    rng = np.random.default_rng(SEED)
    X = rng.normal(size=(n, 2))
    latent = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1]
    return {"N": n, "D": 2, "X": X, "y": (latent + 0.3 * rng.normal(size=n) > 0).astype(int)}


def chain_run(model, data, method, settings, device):
    results = gpdsl.run(model, data, method, settings, seed=SEED, device=device)
    timings = json.loads(results.attrs["timings"])
    iterations = settings.warmup + settings.draws
    seconds = timings["warmup"] + timings["sampling"]
    return results, {"run_s": seconds, "compile_s": timings["compile"], "units": iterations, "unit": "iteration",
                     "per_unit_s": seconds / iterations}


def cache_every_program() -> None:
    """Keep every compiled program in the persistent cache, however quickly it compiles, so that the timed runs of
    :func:`fit_run` load all of theirs rather than compile the small ones again."""
    import jax

    from gpdsl.storage import compilation_cache

    compilation_cache.enable()
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


def fit_run(model, data, method, settings_for, device, short: int, long: int):
    """A fit's seconds per evaluation of its objective (an L-BFGS evaluation, an Adam step): the difference of the
    optimiser's seconds (``timings``' ``sampling``) of a ``long`` and a ``short`` run over the difference of their
    evaluations, both after a first ``short`` run that compiled (later runs load the compiled programs from the
    cache, in both timed runs alike)."""
    def timed(iterations):
        results = gpdsl.run(model, data, method, settings_for(iterations), seed=SEED, device=device)
        report, timings = json.loads(results.attrs["report"]), json.loads(results.attrs["timings"])
        return timings["sampling"] or timings["total"], report.get("optimizer", report)["evaluations"]

    cache_every_program()
    first, _ = timed(short)
    seconds_short, evaluations_short = timed(short)
    seconds_long, evaluations_long = timed(long)
    units = evaluations_long - evaluations_short
    return {"run_s": seconds_long, "compile_s": first - seconds_short, "units": units, "unit": "evaluation",
            "per_unit_s": (seconds_long - seconds_short) / units if units > 0 else float("nan")}


def pm_classification(n: int):
    def run(device, quick):
        from gpdsl.settings import PseudoMarginalSettings

        size = max(30, n // 20) if quick else n
        long = size >= 1000
        settings = PseudoMarginalSettings(chains=4, warmup=1 if long else 5, draws=3 if long else 20,
                                          segment_size=4 if long else 25, num_importance=8)
        return {"size": f"n = {size}", **chain_run(str(REPO / "models/gp_classification.gpm"),
                                                    classification(size), "pm", settings, device)[1]}
    return run


def gibbs(device, quick):
    from gpdsl.settings import GibbsSettings

    size = 60 if quick else 1000
    settings = GibbsSettings(chains=4, warmup=10, draws=40, segment_size=50)
    return {"size": f"n = {size}", **chain_run(str(REPO / "models/gp_classification.gpm"), classification(size),
                                                "gibbs", settings, device)[1]}


def vem_oil(device, quick):
    from gpdsl.datasets import oil_flow
    from gpdsl.settings import VEMSettings

    table = oil_flow()
    rows, latent = (100, 3) if quick else (1000, 10)
    Y = table.X[:rows]
    Y = (Y - Y.mean(axis=0)) / Y.std(axis=0)
    short, long = (5, 25) if quick else (10, 110)

    def settings_for(iterations):
        return VEMSettings(max_iterations=iterations, warmup_iterations=min(5, iterations), restarts=0, ftol=0.0,
                           gtol=0.0, num_inducing=20)

    data = {"N": rows, "D": Y.shape[1], "Q": latent, "Y": Y}
    return {"size": f"N = {rows}, Q = {latent}", **fit_run(str(REPO / "models/bayesian_gplvm.gpm"), data, "vem",
                                                            settings_for, device, short, long)}


def svi_gplvm(device, quick):
    from gpdsl.settings import SVIGPLVMSettings

    rows = 2000 if quick else 100_000
    rng = np.random.default_rng(SEED)
    latent = rng.normal(size=(rows, 5))
    Y = np.tanh(latent @ rng.normal(size=(5, 20))) + 0.1 * rng.normal(size=(rows, 20))
    short, long = (20, 60) if quick else (100, 600)

    def settings_for(steps):
        return SVIGPLVMSettings(steps=steps, noise_fixed_steps=0, chunk=short // 2,
                                batch_size=100 if quick else 1000, num_inducing=50)

    data = {"N": rows, "D": 20, "Q": 5, "Y": Y}
    return {"size": f"N = {rows:,}", **fit_run(str(REPO / "models/bayesian_gplvm.gpm"), data, "svi-gplvm",
                                                settings_for, device, short, long)}


def sgpr(device, quick):
    from gpdsl.settings import SGPRSettings

    rows = 500 if quick else 10_000
    rng = np.random.default_rng(SEED)
    X = rng.uniform(-3, 3, size=(rows, 3))
    y = np.sin(X[:, 0]) * np.cos(X[:, 1]) + 0.2 * X[:, 2] + 0.1 * rng.normal(size=rows)
    short, long = (5, 25) if quick else (10, 110)

    def settings_for(iterations):
        return SGPRSettings(max_iterations=iterations, restarts=0, ftol=0.0, gtol=0.0,
                            num_inducing=20 if quick else 100, inducing_init="random")

    return {"size": f"N = {rows:,}", **fit_run(SGPR_MODEL, {"N": rows, "D": 3, "X": X, "y": y}, "sgpr",
                                                settings_for, device, short, long)}


def pm_gplvm(device, quick):
    from gpdsl.datasets import airquality
    from gpdsl.settings import PMGPLVMSettings

    table = airquality()
    names = list(table.feature_names)
    keep = ~np.isnan(table.y)
    month, temp = table.X[:, names.index("Month")], table.X[:, names.index("Temp")]
    X = np.column_stack([np.arange(len(month), dtype=float), month])[keep]
    Y = np.column_stack([np.log(table.y[keep]), temp[keep]])
    Y = (Y - Y.mean(axis=0)) / Y.std(axis=0)
    draws = 20 if quick else 1000
    settings = PMGPLVMSettings(chains=2 if quick else 4, warmup=2, draws=4, segment_size=2, num_importance=draws,
                               latent_sweeps=2, vem_starts=1, e_step_iterations=50 if quick else 200)
    data = {"N": int(keep.sum()), "Q": 1, "D": 2, "X": X, "Y": Y}
    model = str(REPO / "case_studies/gadd2021_sgplvm/sgplvm_airquality.gpm")
    return {"size": f"N = {data['N']}, Q = {draws} draws", **chain_run(model, data, "pm-gplvm", settings, device)[1]}


def sequential(device, quick):
    from gpdsl.datasets import tegner_sequential
    from gpdsl.datasets.synthetic import TEGNER_SIGMA_Y
    from gpdsl.settings import SequentialSettings

    steps, rows, states = (3, 30, 20) if quick else (4, 200, 1000)
    data, _ = tegner_sequential(steps, rows, seed=SEED)
    settings = SequentialSettings(states=states, burn_in=20 if quick else 100, thin=1, window=1, initial_repeat_f=3,
                                  repeat_f=5, surrogate_variance=TEGNER_SIGMA_Y ** 2)
    results = gpdsl.run(str(REPO / "models/sequential_latent_gp.gpm"), data, "sequential", settings, seed=SEED,
                        device=device)
    per_step = float(np.mean(json.loads(results.attrs["report"])["seconds_per_step"][1:]))
    return {"size": f"N = {rows}, M = {states}", "run_s": per_step * 19, "compile_s": float("nan"),
            "units": steps - 1, "unit": "step t >= 2 (x 19 for T = 20)", "per_unit_s": per_step}


BENCHMARKS = {
    "pm-2000": pm_classification(2000), "pm-gplvm": pm_gplvm, "sequential": sequential, "pm-200": pm_classification(200),
    "gibbs": gibbs, "vem-oil": vem_oil, "sgpr": sgpr, "svi-gplvm": svi_gplvm,
}
"""The issue's three targets (at least 20x on a GPU) first: a run stopped by its time limit keeps them."""


def measure(names, device: str, quick: bool, out: Path) -> None:
    from gpdsl.numerics.devices import device_attributes, resolve_device

    platform = resolve_device(device)
    attributes = device_attributes(platform)
    for name in names:
        started = time.perf_counter()
        try:
            row = BENCHMARKS[name](device, quick)
            row["status"] = "ok"
        except Exception as error:  # one benchmark's failure is a row of the table, not the end of the others
            row = {"status": f"failed: {type(error).__name__}: {str(error)[:200]}"}
        row.update(name=name, device=platform, device_name=attributes["device_name"], quick=quick,
                   wall_s=time.perf_counter() - started, jax=__import__("jax").__version__)
        with open(out, "a") as stream:
            stream.write(json.dumps(row) + "\n")
        print(f"{name} on {platform}: {row['status']}, {row['wall_s']:.1f} s wall", file=sys.stderr, flush=True)


def read_rows(path) -> dict:
    rows = {}
    if path and Path(path).exists():
        for line in Path(path).read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                rows[row["name"]] = row
    return rows


def seconds(row, key) -> str:
    if not row or row.get("status") != "ok":
        return "-" if not row else row["status"].split(":")[0]
    value = row.get(key)
    if key == "per_unit_s" and value is not None and value <= 0:
        return "below noise"  # a fit's difference of two runs smaller than their timing noise
    return "-" if value is None or value != value else f"{value:.3g}"


def table(cpu_path, gpu_path) -> str:
    cpu, gpu = read_rows(cpu_path), read_rows(gpu_path)
    anyone = next(iter({**cpu, **gpu}.values()), {})
    lines = [f"CPU: {next(iter(cpu.values()), {}).get('device_name', '-')}; GPU: "
             f"{next(iter(gpu.values()), {}).get('device_name', '-')}; jax {anyone.get('jax', '-')}"
             f"{'; --quick sizes' if anyone.get('quick') else ''}. Seconds without compilation; ratio = CPU / GPU "
             "seconds per unit.", "",
             "| benchmark | size | unit | CPU s per unit | GPU s per unit | CPU / GPU | CPU run s | GPU run s | "
             "CPU compile s | GPU compile s |", "|" + "---|" * 10]
    for name in BENCHMARKS:
        c, g = cpu.get(name), gpu.get(name)
        if c is None and g is None:
            continue
        ok = c and g and c.get("status") == "ok" and g.get("status") == "ok" and c["per_unit_s"] > 0
        ratio = f"{c['per_unit_s'] / g['per_unit_s']:.2f}" if ok and g["per_unit_s"] > 0 else "-"
        size = (c or g).get("size", "-")
        unit = (c or g).get("unit", "-")
        lines.append(f"| {name} | {size} | {unit} | {seconds(c, 'per_unit_s')} | {seconds(g, 'per_unit_s')} | {ratio} "
                     f"| {seconds(c, 'run_s')} | {seconds(g, 'run_s')} | {seconds(c, 'compile_s')} | "
                     f"{seconds(g, 'compile_s')} |")
    failures = [f"- {row['device']} {row['name']}: {row['status']}" for rows in (cpu, gpu) for row in rows.values()
                if row.get("status") != "ok"]
    return "\n".join(lines + ([""] + failures if failures else [])) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("auto", "cpu", "gpu"), default="auto")
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke test of the script")
    parser.add_argument("--only", nargs="+", choices=list(BENCHMARKS), default=list(BENCHMARKS))
    parser.add_argument("--out", default=None, metavar="ROWS.jsonl", help="append one JSON line per benchmark")
    parser.add_argument("--table", nargs=2, default=None, metavar=("CPU.jsonl", "GPU.jsonl"),
                        help="print the markdown table of two files of rows, and measure nothing")
    args = parser.parse_args(argv)
    if args.table:
        print(table(*args.table), end="")
        return 0
    if args.out is None:
        parser.error("--out is needed to measure")
    measure(args.only, args.device, args.quick, Path(args.out))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
