"""Every command block of README.md and docs/inference.md, run in order as a user would from a fresh folder.

Each command must exit 0 and print no warning that is not gpdsl's own (as tests/test_demo.py tells them
apart, with a first run's cache); each run it makes must have converged
(R-hat <= 1.01 for every parameter of a sampler's run and no divergent transition, the optimiser's own convergence
for a fit: exit 0) and be sane (a Gaussian likelihood's noise variance below the outputs' variance). docs/extending.md's
commands need the toy method that tests/test_extending.py registers, which runs them.
"""

from __future__ import annotations

import glob
import itertools
import os
import re
import shlex
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import numpy as np
import pytest

from tests.test_demo import RUN_MODULE, first_run_cache, third_party_warnings

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow

SKIPPED = ("...", "HOST", "--scheduler")
"""Placeholders, and runs on a Dask cluster (the same runs; tests/test_dask.py runs them on one)."""

NOISE_VARIANCE = {
    "gp_regression": lambda p: p["noise"] ** 2,
    "dynamical_gplvm": lambda p: p["noise"],
    "supervised_gplvm": lambda p: p["noise"],
    "bayesian_gplvm": lambda p: p["noise"],
    "gp_narx": lambda p: p["noise"],
}
"""A model's noise variance from its parameters' posterior means (the models say it as an sd or a variance)."""


def command_blocks(text: str) -> list[list[str]]:
    """The gpdsl commands of the document's ``sh`` blocks, in order, continuation lines joined."""
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.DOTALL):
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            for part in line.split("#")[0].split("&&"):
                argv = shlex.split(part)
                if argv and argv[0] == "gpdsl" and not any(marker in part for marker in SKIPPED):
                    commands.append(argv[1:])
    return commands


def run_files(text: str) -> str | None:
    """The document's run file (its ``toml`` block)."""
    found = re.findall(r"```toml\n(.*?)```", text, re.DOTALL)
    return found[0] if found else None


def outputs(argv: list[str], folder: Path) -> list[Path]:
    """The results files a command writes."""
    if "--out" in argv:
        return [folder / argv[argv.index("--out") + 1]]
    if argv[0] == "run":
        paths = []
        for run in tomllib.loads((folder / argv[1]).read_text())["run"]:
            grid = run.get("grid", {})
            paths += [folder / run["out"].format(**dict(zip(grid, combination)))
                      for combination in itertools.product(*grid.values())]
        return paths
    return []


def converged_and_sane(path: Path, data_path: Path | None) -> list[str]:
    """What is wrong with a run's results: R-hat above 1.01, divergences, or noise above the outputs' variance."""
    import gpdsl
    from gpdsl.data.io import read_data
    from gpdsl.results import arviz_compat
    from gpdsl.results.arviz_compat import root_attrs
    from gpdsl.results.original_units import stored_model
    from gpdsl.results.summary import divergent_transitions, summarize

    results = gpdsl.read_results(path)
    model = stored_model(results)
    parameters = [name for name in model.parameters if name in results.posterior]
    table = summarize(results, var_names=parameters)
    problems = [f"{path.name}: r_hat {label} = {value:.3f}" for label, value in table["r_hat"].items()
                if np.isfinite(value) and value > 1.01]
    divergences = divergent_transitions(arviz_compat.groups(results).get("sample_stats"))
    if divergences:
        problems.append(f"{path.name}: {divergences} divergent transitions")
    noise = NOISE_VARIANCE.get(model.name)
    if noise is not None and data_path is not None:
        means = {name: float(results.posterior[name].mean()) for name in parameters}
        outcome = next(s.target.name for s in model.likelihoods())
        values = np.asarray(read_data(data_path)[outcome], dtype=float)
        spread = float(np.nanmean(np.nanvar(values.reshape(len(values), -1), axis=0)))
        if not noise(means) < spread:
            problems.append(f"{path.name}: noise variance {noise(means):.4g} not below the outputs' {spread:.4g}"
                            f" ({root_attrs(results).get('method')})")
    return problems


def run_document(name: str, folder: Path) -> list[str]:
    text = (ROOT / name).read_text()
    (folder / "models").symlink_to(ROOT / "models")
    if run_files(text):
        (folder / "runs.toml").write_text(run_files(text))
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
                   "XDG_CACHE_HOME": str(first_run_cache(folder / ".cache"))}
    environment.pop("PYTHONWARNINGS", None)
    problems = []
    killed = None
    commands = command_blocks(text)
    for number, argv in enumerate(commands):
        argv = [part for arg in argv for part in _expanded(arg, folder)]
        started = time.perf_counter()
        if number + 1 < len(commands) and commands[number + 1][0] == "resume":
            killed_once_checkpointed(argv, folder, environment)
            killed = argv
            continue
        done = subprocess.run([sys.executable, "-c", RUN_MODULE, "gpdsl.cli", *argv], cwd=folder, capture_output=True,
                              text=True, env=environment, check=False)
        shown = " ".join(argv)
        print(f"{time.perf_counter() - started:7.1f} s  exit {done.returncode}  gpdsl {shown}", flush=True)
        if done.returncode != 0:
            problems.append(f"gpdsl {shown}: exit {done.returncode}\n{done.stderr[-2000:]}")
            continue
        problems += [f"gpdsl {shown}: {line}" for line in third_party_warnings(done.stdout + "\n" + done.stderr)]
        source = killed if argv[0] == "resume" else argv
        data = folder / source[source.index("--data") + 1] if "--data" in source else None
        if argv[0] == "run":
            data = folder / tomllib.loads((folder / argv[1]).read_text())["data"]
        for path in outputs(source, folder):
            problems += converged_and_sane(path, data if argv[0] != "forecast" else None)
    return problems


def killed_once_checkpointed(argv: list[str], folder: Path, environment) -> None:
    """Start a command that checkpoints and kill it once its first checkpoint is written, as README's reader does."""
    checkpoint = folder / argv[argv.index("--checkpoint") + 1]
    process = subprocess.Popen([sys.executable, "-c", RUN_MODULE, "gpdsl.cli", *argv], cwd=folder, env=environment,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while process.poll() is None and not checkpoint.exists():
        time.sleep(0.1)
    process.kill()
    process.wait()
    assert checkpoint.exists() and not (folder / argv[argv.index("--out") + 1]).exists(), "the run ended unkilled"


def _expanded(arg: str, folder: Path) -> list[str]:
    """A shell's expansion of a glob pattern (the argument itself when nothing matches)."""
    return sorted(glob.glob(arg, root_dir=folder)) or [arg] if "*" in arg else [arg]


@pytest.mark.parametrize("document", ["README.md", "docs/inference.md"])
def test_every_command_block_runs_converges_and_is_sane(document, tmp_path):
    problems = run_document(document, tmp_path)
    assert not problems, "\n".join(problems)
