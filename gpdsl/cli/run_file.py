"""Run files: ``gpdsl run RUN.toml`` runs one or more (model, data, method, settings, outputs) at once.

A run file is TOML. Top-level keys are the defaults of every run; each ``[[run]]`` table is one run (with
no ``[[run]]`` table the top level is the one run); a ``grid`` table expands a run into one run per
combination of its values; an optional ``[compare]`` table compares the runs' results when they are done::

    model = "models/gp_classification.gpm"    # paths are relative to the run file
    data = "data.json"
    seed = 1

    [[run]]
    method = "nuts"
    out = "nuts.nc"
    settings = { chains = 4, warmup = 500, draws = 750 }

    [[run]]
    method = "pm"
    out = "pm_{approximation}.nc"             # names every grid key, so each run has its own file
    settings = { chains = 4, num_importance = 16 }
    grid = { approximation = ["ep", "laplace"] }

    [compare]
    reference = "nuts.nc"
    table = "table.md"
    plot = "forest.png"

A top-level ``scheduler = "tcp://host:8786"`` (or ``"local"``; ``gpdsl run --scheduler`` overrides it) runs
each run as one Dask task (:mod:`gpdsl.scale_out`); the files equal those of a run without it. A run's
``chain_groups = K`` advances its chains in K groups (:mod:`gpdsl.inference.chain_groups`); its ``predict = "NEW.json"``
and ``predictive = "joint"`` (or ``"marginal"``) are the flags ``--predict`` and ``--predictive``. A run whose model
has an ``external(...)`` likelihood runs only with ``gpdsl run --allow-external``: a file grants no permission to
run code, and a run file that tries (``allow_external = true``) is refused.

``out`` and ``checkpoint`` are patterns: ``{key}`` is replaced by the run's value of a grid key, its ``method`` or
its ``seed`` (``{{`` and ``}}`` are literal braces). Every run is checked (model, data, method, settings through the
method's settings class, exactly as the command-line flags are, that its output can be written, and that no two
runs share a results file or a checkpoint) before the first one starts (:mod:`gpdsl.cli.run_file_checks`).
"""

from __future__ import annotations

import itertools
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from gpdsl.cli.run_file_checks import (MAX_RUNS, PATTERN_KEYS, PATTERN_NAMES, check_compare_types, check_compare_vars,
                                       check_distinct_files, check_grid_size, check_run_types, pattern_fields)
from gpdsl.errors import GpdslError

RUN_KEYS = ("name", "model", "data", "method", "seed", "settings", "grid", "out", "predict", "predictive",
            "checkpoint", "chain_groups")
TOP_KEYS = (*RUN_KEYS, "run", "compare", "scheduler")
COMPARE_KEYS = ("reference", "table", "plot", "vars")
PATH_KEYS = ("model", "out", "predict", "checkpoint")
GRANTS = {"allow_external": "--allow-external"}
"""Permissions a run file cannot give, with the command-line flag that does."""


@dataclass(frozen=True)
class RunSpec:
    """One run of a run file, its paths resolved and its grid values filled in.

    Attributes
    ----------
    name : str
        ``run 2`` or the run's ``name``, with its grid values (``run 2 [approximation=ep]``).
    model, out : pathlib.Path
    data : pathlib.Path or dict
        A data file, or the values given inline.
    method : str
    settings : dict
        As written (validated by :func:`plan`).
    seed : int, optional
    predict, checkpoint : pathlib.Path, optional
    predictive : {"joint", "marginal"}, optional
        Draws at the ``predict`` inputs (``--predictive``).
    chain_groups : int, optional
    """

    name: str
    model: Path
    data: Any
    method: str
    settings: dict
    out: Path
    seed: int | None = None
    predict: Path | None = None
    checkpoint: Path | None = None
    chain_groups: int | None = None
    predictive: str | None = None


@dataclass
class RunPlan:
    """A run file whose every run was checked: the runs with their prepared form, the comparison to make, and
    the Dask scheduler that runs them (None: here, in order)."""

    path: Path
    runs: list
    compare: dict | None = None
    scheduler: str | None = None


def read_run_file(path: str | os.PathLike) -> tuple[list[RunSpec], dict | None, str | None]:
    """The runs of a run file, its ``[compare]`` table and its ``scheduler`` (``"local"``, an address, or None).

    Raises
    ------
    GpdslError
        The file is missing or not TOML, a key is unknown (with a suggestion), a required key is missing,
        a grid is malformed, two runs write the same file, or the scheduler is not a string or needs
        ``dask.distributed``, which is not installed.
    """
    import tomllib

    source = Path(path)
    if not source.is_file():
        raise GpdslError(f"no such run file: {source}")
    try:
        content = tomllib.loads(source.read_text())
    except tomllib.TOMLDecodeError as error:
        raise GpdslError(f"{source} is not valid TOML: {error}") from None
    _known_keys(content, TOP_KEYS, f"{source}")
    tables = content.get("run", [{}])
    if not isinstance(tables, list) or not tables or not all(isinstance(t, dict) for t in tables):
        raise GpdslError(f"{source}: 'run' must be an array of tables ([[run]])" + ("; it is empty" if tables == []
                                                                                     else ""))
    defaults = {key: value for key, value in content.items() if key not in ("run", "compare", "scheduler")}
    specs = []
    for number, table in enumerate(tables, 1):
        where = f"{source}, run {number}" if "run" in content else str(source)
        _known_keys(table, RUN_KEYS, where)
        settings = [defaults.get("settings", {}), table.get("settings", {})]
        if not all(isinstance(part, dict) for part in settings):
            raise GpdslError(f"{where}: settings must be a table (settings = {{ chains = 4 }})")
        merged = {**defaults, **table, "settings": {**settings[0], **settings[1]}}
        check_run_types(merged, where)
        specs.extend(_expanded(merged, source.parent, table.get("name", f"run {number}"), where))
    if len(specs) > MAX_RUNS:
        raise GpdslError(f"{source}: {len(specs)} runs; a run file runs at most {MAX_RUNS}")
    compare = content.get("compare")
    if compare is not None:
        if not isinstance(compare, dict):
            raise GpdslError(f"{source}: 'compare' must be a table ([compare])")
        _known_keys(compare, COMPARE_KEYS, f"{source}, [compare]")
        check_compare_types(compare, f"{source}, [compare]")
        compare = {key: (str(source.parent / value) if key in ("table", "plot", "reference") else value)
                   for key, value in compare.items()}
    check_distinct_files(specs, compare, source)
    return specs, compare, _scheduler(content.get("scheduler"), source)


def _scheduler(scheduler, source: Path) -> str | None:
    if scheduler is None:
        return None
    if not isinstance(scheduler, str) or not scheduler:
        raise GpdslError(f"{source}: scheduler must be \"local\" or an address such as \"tcp://host:8786\"")
    from gpdsl.scale_out import check_scheduler_address, distributed

    check_scheduler_address(scheduler)
    distributed()
    return scheduler


def plan(path: str | os.PathLike, progress: bool = False, on_warning: Callable | None = None,
         overwrite: bool = False, allow_external: bool = False, device: str = "auto") -> RunPlan:
    """Read a run file and check every run as :func:`gpdsl.api.prepare` does, running nothing.

    Every output (each run's ``out``, the comparison's ``table`` and ``plot``) must be writable and new,
    unless ``overwrite``, and none may be an input of any run or the run file itself. ``allow_external`` (the
    command line's ``--allow-external``) lets the runs run their models' external likelihoods; ``device`` (its
    ``--device``) is where every run's JAX engine runs.

    Returns
    -------
    RunPlan

    Raises
    ------
    GpdslError
        Naming the run and what is wrong.
    """
    from gpdsl.api import check_file, new_inputs_from_file, prepare
    from gpdsl.storage.atomic import check_writable
    from gpdsl.cli.options import settings_from_mapping
    from gpdsl.registry import get_method

    specs, compare, scheduler = read_run_file(path)
    inputs = [path, *{p for spec in specs for p in (spec.model, spec.data, spec.predict)
                      if isinstance(p, Path)}]
    runs = []
    for spec in specs:
        try:
            entry = get_method(spec.method)
            settings = settings_from_mapping(entry, spec.settings, "settings")
            model, _ = check_file(spec.model)
            new_inputs = new_inputs_from_file(spec.predict, model, entry.name) if spec.predict else None
            prepared = prepare(model, spec.data, entry.name, settings, seed=spec.seed, out=spec.out,
                               progress=progress, checkpoint=spec.checkpoint, new_inputs=new_inputs,
                               inputs=inputs, on_warning=on_warning, chain_groups=spec.chain_groups,
                               overwrite=overwrite, allow_external=allow_external, predictive=spec.predictive,
                               device=device)
        except GpdslError as error:
            error.message = f"{spec.name}: {error.message}"
            raise
        runs.append((spec, prepared))
    if compare is not None:
        reference = compare.get("reference")
        outs = [Path(spec.out).resolve() for spec, _ in runs]
        if reference is not None and Path(reference).resolve() not in outs:
            raise GpdslError(f"{path}, [compare]: the reference {reference} is not the out of any run")
        check_compare_vars(compare.get("vars"), runs, Path(path))
        checkpoints = [spec.checkpoint for spec, _ in runs if spec.checkpoint is not None]
        for key, what in (("table", "comparison table"), ("plot", "forest plot")):
            if compare.get(key) is not None:
                check_writable(compare[key], what, inputs=[*inputs, *(spec.out for spec, _ in runs), *checkpoints],
                               overwrite=overwrite)
    return RunPlan(Path(path), runs, compare, scheduler)


def execute_plan(run_plan: RunPlan, report: Callable[[str], None] = print):
    """Run every run of a plan, in order here or as Dask tasks on ``run_plan.scheduler``, then the comparison;
    returns the comparison (or None)."""
    total = len(run_plan.runs)
    if run_plan.scheduler is None:
        from gpdsl.api import execute

        for number, (spec, prepared) in enumerate(run_plan.runs, 1):
            started = time.perf_counter()
            execute(prepared)
            report(f"{number}/{total} {spec.name}: {spec.method} -> {spec.out} "
                   f"({time.perf_counter() - started:.1f} s)")
    else:
        from gpdsl.scale_out import run_all

        finished = run_all(run_plan.scheduler, [prepared for _, prepared in run_plan.runs])
        for number, (index, seconds) in enumerate(finished, 1):
            spec = run_plan.runs[index][0]
            report(f"{number}/{total} {spec.name}: {spec.method} -> {spec.out} ({seconds:.1f} s since the runs "
                   f"were sent to {run_plan.scheduler})")
    if run_plan.compare is None:
        return None
    from gpdsl.results.compare import compare

    options = run_plan.compare
    comparison = compare(*[spec.out for spec, _ in run_plan.runs], reference=options.get("reference"),
                         var_names=options.get("vars"))
    return comparison


def _known_keys(table: dict, known, where: str) -> None:
    from gpdsl.suggest import unknown_name_hint

    for key in table:
        if key in GRANTS:
            raise GpdslError(f"{where}: a run file cannot set {key}: only the command line allows running external "
                             f"code (gpdsl run {GRANTS[key]})")
        if key not in known:
            raise GpdslError(f"{where}: unknown key '{key}'", hint=unknown_name_hint(key, known, "keys"))


def _expanded(table: dict, base: Path, name: str, where: str) -> list[RunSpec]:
    for key in ("model", "data", "method", "out"):
        if key not in table:
            raise GpdslError(f"{where}: no '{key}' (give it in the run or at the top of the file)")
    grid = table.get("grid", {})
    if not isinstance(grid, dict) or not all(isinstance(v, list) and v for v in grid.values()):
        raise GpdslError(f"{where}: grid must be a table of non-empty lists (grid = {{ chains = [2, 4] }})")
    check_grid_size(grid, where)
    names = [*grid, *(n for n in PATTERN_NAMES if n not in grid)]
    used = {key: pattern_fields(table[key], names, f"{where}: {key}") for key in PATTERN_KEYS if key in table}
    missing = [key for key in grid if key not in used["out"]]
    if missing:
        raise GpdslError(f"{where}: out '{table['out']}' does not name the grid key '{missing[0]}'",
                         hint=f"put {{{missing[0]}}} in out so that every run writes its own file")
    specs = []
    for values in itertools.product(*grid.values()) if grid else [()]:
        chosen = dict(zip(grid, values))
        run = {**table, "settings": dict(table["settings"])}
        for key, value in chosen.items():
            if key in ("method", "seed", "data", "model"):
                run[key] = value
            else:
                run["settings"][key] = value
        label = name + (f" [{', '.join(f'{k}={v}' for k, v in chosen.items())}]" if chosen else "")
        fields = {"method": run["method"], "seed": run.get("seed"), **chosen}
        paths = {key: (base / str(run[key]) if run.get(key) is not None else None) for key in PATH_KEYS}
        for key in PATTERN_KEYS:
            if table.get(key) is not None:
                paths[key] = base / table[key].format(**fields)
        data = run["data"] if isinstance(run["data"], dict) else base / str(run["data"])
        specs.append(RunSpec(label, paths["model"], data, str(run["method"]), run["settings"], paths["out"],
                             run.get("seed"), paths["predict"], paths["checkpoint"], run.get("chain_groups"),
                             run.get("predictive")))
    return specs
