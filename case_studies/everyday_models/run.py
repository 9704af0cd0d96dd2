"""Everyday GP models on real data, gpdsl's engines beside NUTS, model choices by elpd_loo.

Each part is one data set and a pair of models a statistician would choose between; each model runs on
Stan's NUTS and on a gpdsl engine that its family allows, through the public API (``gpdsl.sample``), and
``gpdsl.compare`` tables the fits (convergence, ESS per second, elpd_loo):

- ``counts``: pscl's ``bioChemists``, Poisson against zero-inflated Poisson (:mod:`counts`).

Usage::

    python case_studies/everyday_models/run.py                  # every part at its full size
    python case_studies/everyday_models/run.py --quick          # small data and short chains (smoke test)
    python case_studies/everyday_models/run.py --parts counts   # some parts

Outputs, written atomically to ``case_studies/everyday_models/results/`` (``*_quick.*`` from ``--quick``):
per part, ``<part>_<model>_<method>.nc`` (the results), ``<part>.md`` (the comparison tables and the
settings), ``<part>.json`` (the fits table) and ``<part>.png`` (the fit).
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

import gpdsl  # noqa: E402  (sets BLAS thread variables before numpy/jax load)

from matplotlib.figure import Figure  # noqa: E402

from case_studies.everyday_models import counts  # noqa: E402
from gpdsl.storage.atomic import atomic_target, atomic_write_text  # noqa: E402

RESULTS = HERE / "results"
PARTS = {"counts": counts}


@dataclass(frozen=True)
class Size:
    """How big a run is: rows of data, and chains, warmup and draws per sampler."""

    rows: int
    chains: int
    nuts: tuple[int, int]
    gibbs: tuple[int, int]


SIZES = {"full": Size(rows=150, chains=4, nuts=(1000, 1000), gibbs=(2000, 5000)),
         "quick": Size(rows=40, chains=2, nuts=(100, 100), gibbs=(100, 200))}
ENGINES = ("nuts", "gibbs")


def run_part(name: str, size: Size, suffix: str, seed: int) -> dict:
    """Run every model of a part on every engine, write the results files, the tables and the figure."""
    part = PARTS[name]
    data = part.data(size.rows, seed)
    fits, paths, seconds = {}, {}, {}
    for model_name, model_path in part.MODELS.items():
        for engine in ENGINES:
            label = f"{model_name} / {engine}"
            warmup, draws = getattr(size, engine)
            path = RESULTS / f"{name}_{model_name}_{engine}{suffix}.nc"
            started = time.perf_counter()
            fits[label] = gpdsl.sample(model_path, data, engine, seed=seed, out=path, overwrite=True,
                                       chains=size.chains, warmup=warmup, draws=draws)
            seconds[label] = time.perf_counter() - started
            paths[label] = path
            print(f"{name}: {label} in {seconds[label]:.0f} s", file=sys.stderr)
    comparison = gpdsl.compare({label: str(path) for label, path in paths.items()})
    by_model = {model_name: gpdsl.compare({f"{model_name} / {engine}": str(paths[f'{model_name} / {engine}'])
                                           for engine in ENGINES})
                for model_name in part.MODELS}
    write_report(name, part, comparison, by_model, size, seed, seconds, suffix)
    figure = Figure(figsize=(6.5, 4.2), layout="constrained")
    part.plot(figure.subplots(), fits)
    with atomic_target(RESULTS / f"{name}{suffix}.png", "figure") as temporary:
        figure.savefig(temporary, format="png", dpi=110)
    return {"fits": json.loads(comparison.fits.to_json(orient="index")), "seconds": seconds}


def write_report(name, part, comparison, by_model, size, seed, seconds, suffix) -> None:
    """``<part>.md``: the models' fits side by side (elpd_loo), each model's engines against NUTS, settings."""
    lines = [f"# {part.TITLE}", "", part.__doc__.strip().split("\n\n")[1].replace("\n", " "), "",
             "## Every fit (the model choice: elpd_loo)", "", comparison.to_markdown(), ""]
    for model_name, model_comparison in by_model.items():
        lines += [f"## {model_name}: gibbs against NUTS", "", model_comparison.to_markdown(), ""]
    lines += ["## Settings", "",
              f"- {size.rows} rows (seed {seed}); {size.chains} chains; NUTS warmup {size.nuts[0]}, draws "
              f"{size.nuts[1]}; gibbs warmup {size.gibbs[0]}, draws {size.gibbs[1]}.",
              "- Wall times (s): " + ", ".join(f"{label} {value:.0f}" for label, value in seconds.items()) + ".",
              f"- Machine: {platform.platform()}, Python {platform.python_version()}."]
    atomic_write_text(RESULTS / f"{name}{suffix}.md", "\n".join(lines) + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small data and short chains (smoke test)")
    parser.add_argument("--parts", nargs="+", choices=sorted(PARTS), default=sorted(PARTS))
    parser.add_argument("--seed", type=int, default=1990)
    args = parser.parse_args(argv)
    mode = "quick" if args.quick else "full"
    suffix = "_quick" if args.quick else ""
    RESULTS.mkdir(exist_ok=True)
    summary = {name: run_part(name, SIZES[mode], suffix, args.seed) for name in args.parts}
    atomic_write_text(RESULTS / f"summary{suffix}.json", json.dumps(summary, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
