"""Everyday GP models on real data, gpdsl's engines beside NUTS, model choices by elpd_loo.

Each part is one data set and a pair of models a statistician would choose between; each model runs on
Stan's NUTS and on a gpdsl engine that its family allows, through the public API (``gpdsl.sample``), and
``gpdsl.compare`` tables the fits (convergence, ESS per second, elpd_loo):

- ``counts``: pscl's ``bioChemists``, Poisson against zero-inflated Poisson (:mod:`counts`);
- ``survival``: survival's ``veteran``, Weibull against log-normal times with right censoring (:mod:`survival`);
- ``multiclass``: UCI's glass, one shared length-scale against one per input (:mod:`multiclass`);
- ``multi_output``: airquality's ozone and temperature, independent against coregionalised (:mod:`multi_output`).

Usage::

    python case_studies/everyday_models/run.py                  # every part at its full size
    python case_studies/everyday_models/run.py --quick          # small data and short chains (smoke test)
    python case_studies/everyday_models/run.py --parts counts   # some parts
    python case_studies/everyday_models/run.py --reuse nuts     # NUTS from its results files, the others afresh

Outputs, written atomically to ``case_studies/everyday_models/results/`` (``*_quick.*`` from ``--quick``):
per part, ``<part>_<model>_<method>.nc`` (the results), ``<part>.md`` (the comparison tables and the
settings), ``<part>.json`` (the fits table) and ``<part>.png`` (the fit).
"""

from __future__ import annotations

import argparse
import dataclasses
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

from case_studies.everyday_models import counts, multi_output, multiclass, survival  # noqa: E402
from gpdsl.registry import get_method  # noqa: E402
from gpdsl.results import results_json, root_attrs  # noqa: E402
from gpdsl.storage.atomic import atomic_target, atomic_write_text  # noqa: E402

RESULTS = HERE / "results"
PARTS = {"counts": counts, "survival": survival, "multiclass": multiclass, "multi_output": multi_output}


@dataclass(frozen=True)
class Size:
    """How long the chains are: their number, and warmup and draws of each engine."""

    chains: int
    iterations: dict
    quick: bool = False

    def lengths(self, part) -> dict:
        """Warmup and draws per engine: the size's, or a full-size part's own where it declares ``ITERATIONS``."""
        return self.iterations if self.quick else {**self.iterations, **getattr(part, "ITERATIONS", {})}


SIZES = {"full": Size(chains=4, iterations={"nuts": (1000, 1000), "gibbs": (2000, 10000), "pm": (1000, 12000)}),
         "quick": Size(chains=2, iterations={"nuts": (100, 100), "gibbs": (200, 400), "pm": (100, 200)}, quick=True)}


def run_part(name: str, size: Size, suffix: str, seed: int, reuse: tuple[str, ...] = ()) -> dict:
    """Run every model of a part on every engine (reading the results files of the engines in ``reuse`` where they
    exist), write the results files, the tables and the figure."""
    part = PARTS[name]
    data = part.data(suffix == "_quick", seed)
    fits, paths, seconds = {}, {}, {}
    for model_name, model_path in part.MODELS.items():
        for engine, settings in part.ENGINES.items():
            label = f"{model_name} / {engine}"
            warmup, draws = size.lengths(part)[engine]
            path = RESULTS / f"{name}_{model_name}_{engine}{suffix}.nc"
            started = time.perf_counter()
            if engine in reuse and path.exists():
                fits[label] = gpdsl.read_results(path)
                seconds[label] = results_json(fits[label], "timings")["total"]
            else:
                fits[label] = gpdsl.sample(model_path, data, engine, seed=seed, out=path, overwrite=True,
                                           chains=size.chains, warmup=warmup, draws=draws, **settings)
                seconds[label] = time.perf_counter() - started
            paths[label] = path
            print(f"{name}: {label} in {seconds[label]:.0f} s", file=sys.stderr)
    comparison = gpdsl.compare({label: str(path) for label, path in paths.items()})
    by_model = {model_name: gpdsl.compare({f"{model_name} / {engine}": str(paths[f'{model_name} / {engine}'])
                                           for engine in part.ENGINES})
                for model_name in part.MODELS}
    write_report(name, part, comparison, by_model, fits, seed, seconds, suffix)
    figure = Figure(figsize=(6.5, 4.2), layout="constrained")
    part.plot(figure.subplots(), fits)
    with atomic_target(RESULTS / f"{name}{suffix}.png", "figure") as temporary:
        figure.savefig(temporary, format="png", dpi=110)
    return {"fits": json.loads(comparison.fits.to_json(orient="index")), "seconds": seconds}


def _settings_line(results) -> str:
    """The chains, warmup and draws of a fit and the settings it changed from the method's defaults."""
    method = get_method(root_attrs(results)["method"])
    settings = results_json(results, "settings")
    defaults = dataclasses.asdict(method.settings())
    changed = [f"{key} {value}" for key, value in settings.items()
               if key not in ("chains", "warmup", "draws") and defaults.get(key) != value]
    return (f"{settings['chains']} x ({settings['warmup']} + {settings['draws']})"
            + (f", {', '.join(changed)}" if changed else ""))


def write_report(name, part, comparison, by_model, fits, seed, seconds, suffix) -> None:
    """``<part>.md``: the models' fits side by side (elpd_loo), each model's engines against NUTS, settings."""
    lines = [f"# {part.TITLE}", "", part.__doc__.strip().split("\n\n")[1].replace("\n", " "), "",
             "## Every fit (the model choice: elpd_loo)", "", comparison.to_markdown(), ""]
    others = " and ".join(engine for engine in part.ENGINES if engine != "nuts")
    for model_name, model_comparison in by_model.items():
        lines += [f"## {model_name}: {others} against NUTS", "", model_comparison.to_markdown(), ""]
    lines += ["## Settings", "",
              f"- Data: {part.data.__doc__.strip()} Seed {seed}.",
              "- Each fit's settings, as its results file records them: " + "; ".join(
                  f"{label}: {_settings_line(results)}" for label, results in fits.items()) + ".",
              "- Wall times (s): " + ", ".join(f"{label} {value:.0f}" for label, value in seconds.items()) + ".",
              f"- Machine: {platform.platform()}, Python {platform.python_version()}."]
    atomic_write_text(RESULTS / f"{name}{suffix}.md", "\n".join(lines) + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small data and short chains (smoke test)")
    parser.add_argument("--parts", nargs="+", choices=sorted(PARTS), default=sorted(PARTS))
    parser.add_argument("--seed", type=int, default=1990)
    parser.add_argument("--reuse", nargs="+", default=(), choices=("nuts", "gibbs", "pm"),
                        help="read these engines' results files where they exist instead of running them again")
    args = parser.parse_args(argv)
    mode = "quick" if args.quick else "full"
    suffix = "_quick" if args.quick else ""
    RESULTS.mkdir(exist_ok=True)
    summary = {name: run_part(name, SIZES[mode], suffix, args.seed, tuple(args.reuse)) for name in args.parts}
    atomic_write_text(RESULTS / f"summary{suffix}.json", json.dumps(summary, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
