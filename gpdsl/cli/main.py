"""The ``gpdsl`` command line's commands: check, compile, sample, fit, resume, run, forecast, methods, summary, plot, compare,
data.

Exit status: 0 on success, 1 for a user error (bad model, data, options or usage; rendered with its location,
no traceback), 2 for an internal error (a bug in gpdsl, with a request to report it), 3 for a run that finished
and wrote its results but did not converge (:data:`EXIT_STATUS`).
"""

from __future__ import annotations

import argparse
import re
import sys
import traceback
from pathlib import Path

from gpdsl import __version__
from gpdsl.cli import options as cli_options
from gpdsl.cli.options import add_overwrite_flag
from gpdsl.errors import GpdslError
from gpdsl.source import printable

PLOT_KINDS = ("trace", "pair", "posterior", "predictions", "latent")
REPORT_URL = "https://github.com/gpdsl/gpdsl/issues"
EXIT_OK, EXIT_USER_ERROR, EXIT_INTERNAL_ERROR, EXIT_NOT_CONVERGED = 0, 1, 2, 3
USAGE_LINES = 3
"""A usage longer than this many lines is not printed before a usage error; ``--help`` shows it."""
EXIT_STATUS = ("exit status:\n  0  success\n  1  user error (model, data, options, usage), refused before anything "
               "runs; or chains that cannot start (a log density of -inf or NaN, a kernel that is not positive "
               "definite) or that all stayed stuck through warmup, stopped before sampling, with their values\n"
               "  2  internal error (a bug in gpdsl)\n  3  the run finished and wrote its results but did not "
               "converge: a fit's optimiser reached its iteration or evaluation limit or its line search failed, or "
               "some chains did not move in warmup (named on standard error and in the results); for gpdsl run, "
               "any of its runs")


def _warn(text) -> None:
    """Print a warning on standard error, its control characters escaped."""
    print(f"warning: {printable(str(text))}", file=sys.stderr)


def _for_each_checked_file(paths, report) -> int:
    """Check each model file: print a failure's rendered error, pass a success to ``report``.

    ``report(path, model, warnings)`` runs for every file that checks. Returns the exit status:
    1 if any file failed, else 0.
    """
    from gpdsl.api import check_file

    failed = 0
    for path in paths:
        try:
            model, warnings = check_file(path)
        except GpdslError as error:
            print(error.render(), file=sys.stderr)
            failed += 1
            continue
        report(path, model, warnings)
    return 1 if failed else 0


def _cmd_check(args) -> int:
    def report(path, model, warnings):
        for warning in warnings:
            print(warning.render(), file=sys.stderr)
        note = f" ({len(warnings)} warning{'s' if len(warnings) != 1 else ''})" if warnings else ""
        print(f"{path}: ok{note}")

    return _for_each_checked_file(args.files, report)


def _cmd_compile(args) -> int:
    from gpdsl.api import check_file
    from gpdsl.backends.stan.codegen import generate_stan
    from gpdsl.backends.stan.stanc import check_program

    if args.output:
        from gpdsl.storage.atomic import check_writable

        check_writable(args.output, "Stan program", inputs=[args.file], overwrite=args.overwrite)
    model, warnings = check_file(args.file)
    for warning in warnings:
        print(warning.render(), file=sys.stderr)
    program = generate_stan(model)
    for warning in getattr(program, "warnings", ()):
        _warn(warning)
    check_program(program.code, model.name)
    if args.output:
        from gpdsl.storage.atomic import atomic_write_text

        atomic_write_text(args.output, program.code, "Stan program")
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(program.code)
    return 0


def _cmd_run(args) -> int:
    """``gpdsl sample`` and ``gpdsl fit``: one path through :func:`gpdsl.api.run`."""
    from gpdsl.api import check_file, execute_here_or_on, new_inputs_from_file, prepare
    from gpdsl.registry import get_method

    if args.scheduler is not None:
        from gpdsl.scale_out import distributed

        distributed()
    entry = get_method(args.method)
    settings = cli_options.settings_from_args(entry, args)
    model, warnings = check_file(args.file)
    for warning in warnings:
        print(warning.render(), file=sys.stderr)
    inputs = (args.file, *([args.predict] if getattr(args, "predict", None) else []),
              *cli_options.file_arguments(args))
    new_inputs = new_inputs_from_file(args.predict, model, entry.name) if getattr(args, "predict", None) else None
    checkpoint = getattr(args, "checkpoint", None)
    resuming = checkpoint is not None and Path(checkpoint).exists()
    prepared = prepare(model, args.data, entry.name, settings, seed=args.seed, out=args.out, progress=not args.quiet,
                       checkpoint=checkpoint, new_inputs=new_inputs, inputs=inputs, command=args.argv,
                       on_warning=_warn, scheduler=args.scheduler,
                       chain_groups=getattr(args, "chain_groups", None), overwrite=args.overwrite,
                       allow_external=args.allow_external, predictive=getattr(args, "predictive", None),
                       device=args.device)
    if resuming:
        print(f"resuming from checkpoint {checkpoint} (seed {prepared.context.seed})", file=sys.stderr)
    elif args.seed is None:
        _say_drawn(prepared.context.seed)
    results = execute_here_or_on(prepared, args.scheduler)
    print(f"wrote {args.out}", file=sys.stderr)
    return _print_report(entry.run_report(results, model, settings), verbose=not args.quiet)


def _cmd_resume(args) -> int:
    """``gpdsl resume CHECKPOINT``: run again, from the directory it ran in, the command that wrote a checkpoint,
    with only the permissions this command line gives (``--allow-external``, ``--overwrite``): a file grants none."""
    import os

    from gpdsl.externals import ExternalRefused
    from gpdsl.storage.checkpoint import CheckpointError, recorded_command

    command, directory = recorded_command(args.checkpoint)
    recorded = _recorded_run(command, args.checkpoint)
    written = Path(directory, recorded.checkpoint or "")
    if not written.exists() or not os.path.samefile(written, args.checkpoint):
        raise CheckpointError(f"checkpoint {args.checkpoint} was written as {written}; move it back there to "
                              "resume (the recorded command names that path)")
    recorded.allow_external, recorded.overwrite, recorded.argv = args.allow_external, args.overwrite, command
    granted = [flag for flag, given in (("--allow-external", args.allow_external), ("--overwrite", args.overwrite))
               if given]
    shown = [*(argument for argument in command if not _grants(argument)), *granted]
    print(printable(f"gpdsl {' '.join(shown)}   (in {directory})"), file=sys.stderr)
    os.chdir(directory)
    try:
        return recorded.run(recorded)
    except ExternalRefused as refused:
        raise ExternalRefused(f"checkpoint {args.checkpoint} records a run of the external likelihood "
                              f"{refused.function}, which runs arbitrary Python code: gpdsl resume runs it only with "
                              "--allow-external on its own command line (a checkpoint grants no permission); give it "
                              "if you trust that code", refused.span) from None


RESUME_GRANTS = {"--allow-external", "--overwrite"}
"""The flags of a recorded command that ``gpdsl resume`` takes from its own command line, never from the file."""


def _grants(argument: str) -> bool:
    """Whether a recorded argument is (an abbreviation of) a flag in :data:`RESUME_GRANTS`."""
    flag = argument.split("=")[0]
    return flag.startswith("--") and len(flag) > 2 and any(grant.startswith(flag) for grant in RESUME_GRANTS)


def _recorded_run(command, checkpoint):
    """The parsed command a checkpoint records: a ``gpdsl sample`` or ``gpdsl fit`` with ``--checkpoint``."""
    import contextlib
    import io

    from gpdsl.storage.checkpoint import CheckpointError, damaged

    if not isinstance(command, list) or not all(isinstance(argument, str) for argument in command):
        raise CheckpointError(f"checkpoint {checkpoint} records a command that is not a list of arguments")
    if command[0] not in ("sample", "fit"):
        raise CheckpointError(f"checkpoint {checkpoint} records the command 'gpdsl {command[0]}', which writes no "
                              "checkpoint; only gpdsl sample and gpdsl fit do")
    messages = io.StringIO()
    try:
        with contextlib.redirect_stderr(messages):
            recorded = build_parser().parse_args(command)
    except SystemExit:
        reason = messages.getvalue().strip().splitlines()[-1:] or ["unreadable"]
        raise CheckpointError(f"checkpoint {checkpoint} records a command gpdsl cannot run ({reason[0]})") from None
    if getattr(recorded, "checkpoint", None) is None:
        raise damaged(checkpoint, f"it records 'gpdsl {' '.join(command)[:80]}', which writes no checkpoint")
    return recorded


def _seed(seed: int | None) -> int:
    """The seed given, checked, or one drawn (said on standard error by :func:`_say_drawn` once all is checked)."""
    from gpdsl.api import draw_seed, verify_seed

    return draw_seed() if seed is None else verify_seed(seed)


def _say_drawn(seed: int) -> None:
    """Say a drawn seed (recorded in the results too) as the run starts."""
    print(f"seed {seed} (drawn; give --seed {seed} to repeat this run)", file=sys.stderr)


def _print_report(report, verbose: bool) -> int:
    """Print a method's :class:`~gpdsl.results.report.RunReport`; returns the exit status,
    :data:`EXIT_NOT_CONVERGED` for a run that did not converge."""
    text = report.text(verbose)
    if text:
        print(text)
    for warning in report.warnings:
        _warn(warning)
    return EXIT_OK if report.converged else EXIT_NOT_CONVERGED


def _cmd_forecast(args) -> int:
    """``gpdsl forecast``: fit a GP-NARX model to a series by ``ml`` and free-simulate it."""
    from gpdsl.api import check_file
    from gpdsl.storage.atomic import claim_output
    from gpdsl.inference.forecast import ForecastSettings, forecast, narx_names
    from gpdsl.inference.methods.ml import MLSettings, ml_report
    from gpdsl.results.io import write_netcdf

    settings = cli_options.settings_from_flags(ForecastSettings, args)
    ml_settings = cli_options.settings_from_flags(MLSettings, args)
    claim_output(args.out, "results", inputs=[args.file, args.data], overwrite=args.overwrite)
    seed = _seed(args.seed)
    model, warnings = check_file(args.file)
    if not args.quiet:
        for warning in warnings:
            print(warning.render(), file=sys.stderr)
    narx_names(model)
    series = _series(args.data, settings.series)
    if args.seed is None:
        _say_drawn(seed)
    results, result, _ = forecast(model, series, settings, ml_settings, seed=seed)
    write_netcdf(results, args.out, replace=args.overwrite)
    print(f"wrote {args.out}", file=sys.stderr)
    status = _print_report(ml_report(results), verbose=not args.quiet)
    rule = "mean feedback (GP-NARX)" if settings.feedback == "mean" else \
        f"Gaussian feedback, {settings.psi.replace('_', '-')} Psi statistics"
    scores = result.metrics
    held_out = (f"held-out RMSE {scores['rmse']:.4g}, NLPD {scores['nlpd']:.4g} over {scores['count']} values"
                if scores.get("count") else "no held-out values in the series")
    print(f"free simulation: {result.mean.size} steps with {rule}; {held_out}")
    return status


def _series(path, name):
    """The series in a data file: its only variable, or the one called ``name``."""
    import numpy as np

    from gpdsl.data.io import read_data
    from gpdsl.errors import DataError

    values = read_data(path)
    if name is None:
        if len(values) != 1:
            raise DataError(f"{path} holds {', '.join(values)}; name the series with --series NAME")
        name = next(iter(values))
    if name not in values:
        raise DataError(f"{path} has no variable '{name}' (it has {', '.join(values)})")
    series = np.asarray(values[name], dtype=float)
    if series.ndim == 2 and 1 in series.shape:
        series = series.reshape(-1)
    if series.ndim != 1:
        raise DataError(f"the series '{name}' must be a vector; it has shape {series.shape}")
    return series


def _cmd_methods(args) -> int:
    from gpdsl.ir.families import classify
    from gpdsl.registry import methods

    def report(path, model, warnings):
        classification = classify(model)
        print(f"{path}: {classification.describe()}")
        width = max(len(name) for name in methods())
        for method in methods().values():
            reason = method.refusal(model, classification)
            others = method.choice_refusals(model, classification)
            runs_with = [flag for flag, refused in others.items() if refused is None]
            if reason is None:
                print(f"  yes  {method.name:<{width}} gpdsl {method.command} --method {method.name}: {method.summary}")
            elif runs_with:
                print(f"  yes  {method.name:<{width}} gpdsl {method.command} --method {method.name} {runs_with[0]}: "
                      f"{method.summary}")
                print(f"       {'':<{width}} not with its defaults: {reason}")
            else:
                print(f"  no   {method.name:<{width}} {reason}")
            for flag, refused in others.items():
                if refused is not None and reason is None:
                    print(f"       {'':<{width}} not with {flag}: {refused}")

    return _for_each_checked_file(args.files, report)


def _cmd_run_file(args) -> int:
    """``gpdsl run RUN.toml``: check every run of the file, then run them in order (and compare them)."""
    from gpdsl.cli.run_file import execute_plan, plan

    if args.scheduler is not None:
        from gpdsl.scale_out import check_scheduler_address, distributed

        check_scheduler_address(args.scheduler)
        distributed()
    run_plan = plan(args.file, progress=not args.quiet, on_warning=_warn, overwrite=args.overwrite,
                    allow_external=args.allow_external, device=args.device)
    if args.scheduler is not None:
        run_plan.scheduler = args.scheduler
    for spec, prepared in run_plan.runs:
        print(f"{spec.name}: {spec.method} on {spec.model} with {spec.data if isinstance(spec.data, Path) else 'inline data'}"
              f", seed {prepared.context.seed} -> {spec.out}", file=sys.stderr)
    if args.dry_run:
        print(f"{args.file}: {len(run_plan.runs)} run{'s' if len(run_plan.runs) != 1 else ''} checked; nothing run "
              "(--dry-run)")
        return 0
    comparison = execute_plan(run_plan, report=lambda line: print(line, file=sys.stderr))
    if comparison is not None:
        _report_comparison(comparison, run_plan.compare.get("table"), run_plan.compare.get("plot"))
    return _runs_status(spec for spec, _ in run_plan.runs)


def _runs_status(specs) -> int:
    """Say on standard error which runs of a run file did not converge; :data:`EXIT_NOT_CONVERGED` if any did not."""
    from gpdsl.results.io import read_netcdf
    from gpdsl.results.method_output import not_converged

    status = EXIT_OK
    for spec in specs:
        for reason in not_converged(read_netcdf(spec.out)):
            _warn(f"{spec.name} ({spec.out}): {reason}")
            status = EXIT_NOT_CONVERGED
    return status


def _cmd_compare(args) -> int:
    """``gpdsl compare``: results files side by side."""
    from gpdsl.storage.atomic import check_writable
    from gpdsl.results.compare import compare

    for path, what in ((args.output, "comparison table"), (args.plot, "forest plot")):
        if path:
            check_writable(path, what, inputs=[*args.fits, *([args.output] if path == args.plot else [])],
                           overwrite=args.overwrite)
    comparison = compare(*args.fits, reference=args.reference, var_names=args.vars, labels=args.labels)
    _report_comparison(comparison, args.output, args.plot)
    return 0


def _report_comparison(comparison, table, png) -> None:
    text = comparison.to_markdown()
    sys.stdout.write(text)
    if table:
        from gpdsl.storage.atomic import atomic_write_text

        atomic_write_text(table, text, "comparison table")
        print(f"wrote {table}", file=sys.stderr)
    if png:
        from gpdsl.results.plots import plot_forest

        print(f"wrote {plot_forest(comparison, png)}", file=sys.stderr)


def _cmd_data(args) -> int:
    """``gpdsl data``: list the packaged datasets, or write one in the format the models read."""
    from gpdsl.datasets.model_data import Simulator, load, loaders, model_data, simulated_data, write_data_json
    from gpdsl.errors import DataError

    if args.list:
        for name, loader in loaders().items():
            print(f"{name:<24} {loader.description}")
        return 0
    if not args.name or not args.output:
        raise DataError("give a dataset NAME and -o FILE.json (or --list)")
    from gpdsl.storage.atomic import check_writable

    simulated = isinstance(loaders().get(args.name), Simulator)
    table_flags = {"--as": args.form is not None, "--offset": args.offset != 0, "--columns": args.columns,
                   "--standardize": args.standardize, "--latent-dims": args.latent_dims is not None,
                   "--with-target": args.with_target, "--time": args.time, "--inputs": args.inputs}
    given = [flag for flag, used in table_flags.items() if used] if simulated else \
        [flag for flag, value in (("--steps", args.steps), ("--seed", args.seed)) if value is not None]
    if given:
        kind = "a simulated dataset: it takes --steps, --rows and --seed" if simulated else \
            "a table: --steps and --seed are for simulated datasets (--list)"
        raise DataError(f"{given[0]} does not apply to {args.name}, {kind}")
    check_writable(args.output, "data", overwrite=args.overwrite)
    if Path(args.output).suffix.lower() != ".json":
        raise DataError(f"-o {args.output}: gpdsl data writes JSON; give a file name ending in .json",
                        hint="convert it afterwards if you need CSV or NetCDF (docs/data.md)")
    if simulated:
        data = simulated_data(args.name, steps=args.steps, rows=args.rows, seed=args.seed)
        how = "simulated"
    else:
        form = args.form or "xy"
        data = model_data(load(args.name), form, rows=args.rows, offset=args.offset, columns=args.columns,
                          standardize=args.standardize, latent_dims=args.latent_dims, with_target=args.with_target,
                          time=args.time, inputs=args.inputs)
        how = f"as {form}"
    write_data_json(data, args.output)
    shapes = ", ".join(f"{k} {'x'.join(map(str, getattr(v, 'shape', ()))) or v}" for k, v in data.items()
                       if "__" not in k)
    scaled = sorted({k.split("__")[0] for k in data if "__" in k})
    recorded = f"; the centre and scale of {', '.join(scaled)} are written beside them" if scaled else ""
    print(f"wrote {args.output}: {args.name} {how} ({shapes}){recorded}", file=sys.stderr)
    return 0


def _cmd_summary(args) -> int:
    from gpdsl.results.io import read_netcdf
    from gpdsl.results.original_units import units_note
    from gpdsl.results.summary import format_summary, sampler_warnings, summarize

    results = read_netcdf(args.fit)
    table = summarize(results, var_names=args.vars, group=args.group, original_units=not args.standardized)
    warnings = sampler_warnings(results) if args.group == "posterior" else []
    print(format_summary(table, warnings, args.group), end="")
    note = units_note(results, args.group, table.attrs["original_units"], args.standardized)
    print(note if note else "", end="\n" if note else "")
    return 0


def _cmd_plot(args) -> int:
    from gpdsl.storage.atomic import check_writable

    check_writable(args.output, "figure", inputs=[args.fit, *([args.labels.split(":")[0]] if args.labels else [])],
                   overwrite=args.overwrite)
    from gpdsl.results.io import read_netcdf
    from gpdsl.results.plots import plot

    results = read_netcdf(args.fit)
    if args.kind == "latent":
        path = _plot_latent(results, args)
    else:
        path = plot(results, args.kind, args.output, var_names=args.vars)
    print(f"wrote {path}", file=sys.stderr)
    return 0


def _plot_latent(results, args):
    from gpdsl.errors import DataError, GpdslError
    from gpdsl.inference.predict.gplvm import latent_variance_grid, most_relevant_dims
    from gpdsl.registry import methods
    from gpdsl.results.arviz_compat import root_attrs
    from gpdsl.results.latent_plot import class_labels, plot_latent

    method = methods().get(str(root_attrs(results).get("method")))
    if method is None or method.latent_fit is None:
        plotted = ", ".join(m.name for m in methods().values() if m.latent_fit is not None)
        raise GpdslError(f"these results ({root_attrs(results).get('method', 'no method')}) hold no variational fit "
                         f"of latent inputs to plot; --kind latent plots the results of {plotted}")
    try:
        _, fit = method.latent_fit(results)
    except GpdslError as error:
        error.message = f"results file {args.fit}: {error.message}"
        raise
    latent_dims = fit.mean.shape[1]
    if args.dims and not all(1 <= d <= latent_dims for d in args.dims):
        raise DataError(f"--dims {args.dims[0]} {args.dims[1]}: the latent dimensions are 1 to {latent_dims}")
    dims = [d - 1 for d in args.dims] if args.dims else list(most_relevant_dims(fit, 2))
    labels = class_labels(_labels(args.labels), fit.mean.shape[0]) if args.labels else None
    background = latent_variance_grid(fit, dims)
    points = fit.mean[:, dims]
    shown = [d + 1 for d in dims]
    order = "" if args.dims else " (most relevant first)"
    return plot_latent(points, args.output, labels=labels, background=background, dims=shown,
                       title=f"{fit.problem.latent}: dimensions {shown[0]} and {shown[1]}{order}")


def _labels(spec):
    """Labels from ``FILE`` (its only variable or column) or ``FILE:NAME``."""
    import numpy as np

    from gpdsl.data.io import read_data
    from gpdsl.errors import DataError

    path, _, name = spec.partition(":") if not Path(spec).exists() else (spec, "", "")
    values = read_data(path)
    if not name:
        if len(values) != 1:
            raise DataError(f"{path} holds {', '.join(values)}; name the labels with {path}:NAME")
        name = next(iter(values))
    if name not in values:
        raise DataError(f"{path} has no variable '{name}' (it has {', '.join(values)})")
    return np.asarray(values[name])


EXAMPLES = {
    "check": "gpdsl check models/*.gpm",
    "compile": "gpdsl compile models/gp_classification.gpm -o probit.stan",
    "sample": "gpdsl sample models/gp_classification.gpm --data data.json --method pm --approximation ep "
              "--chains 4 --seed 1 --out pm.nc\n  gpdsl sample models/gp_classification.gpm --data data.json "
              "--method pm --chains 8 --seed 1 --scheduler tcp://host:8786 --out pm.nc",
    "fit": "gpdsl fit models/bayesian_gplvm.gpm --data oil.json --num-inducing 30 --seed 0 --out bgplvm.nc",
    "resume": "gpdsl sample models/gp_classification.gpm --data data.json --method gibbs --checkpoint pm.npz "
              "--seed 1 --out pm.nc   # killed\n  gpdsl resume pm.npz   # or the same command again",
    "run": "gpdsl run runs.toml --dry-run\n\na run file (paths relative to it; top-level keys are every run's defaults):\n"
           "  model = \"models/gp_classification.gpm\"\n  data = \"data.json\"\n  seed = 1\n\n  [[run]]\n"
           "  method = \"pm\"\n  out = \"pm_{approximation}.nc\"\n  settings = { chains = 4, num_importance = 16 }\n"
           "  grid = { approximation = [\"ep\", \"laplace\"] }\n\n  [compare]\n  table = \"table.md\"\n\n"
           "on Dask (gpdsl[dask]), each run a task on the scheduler's workers:\n"
           "  gpdsl run runs.toml --scheduler tcp://host:8786",
    "methods": "gpdsl methods models/gp_classification.gpm",
    "summary": "gpdsl summary pm.nc --vars sigma tau",
    "plot": "gpdsl plot pm.nc --kind trace -o trace.png\n  gpdsl plot bgplvm.nc --kind latent --dims 1 2 "
            "--labels labels.json -o latent.png",
    "compare": "gpdsl compare nuts.nc pm.nc --reference nuts.nc -o table.md --plot forest.png",
    "data": "gpdsl data --list\n  gpdsl data pima_tr --rows 100 --columns glu bmi ped --standardize -o data.json\n"
            "  gpdsl data tegner_sequential --steps 5 --rows 40 --seed 2018 -o seq.json",
    "forecast": "gpdsl forecast models/gp_narx.gpm --data series.json --lag 12 --train 48 --out fc.nc",
}


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Help that shows each option's default (unless its text already says it) and keeps examples' lines."""

    def _get_help_string(self, action):
        text = action.help or ""
        hidden = action.default is None or action.default is False or action.default is argparse.SUPPRESS
        if action.option_strings and not hidden and "default" not in text:
            text += " (default: %(default)s)"
        return text


class _Parser(argparse.ArgumentParser):
    """argparse with usage errors as user errors (exit status 1) and a suggestion for a misspelt name."""

    def error(self, message, hint=None):
        hint = hint or _choice_hint(message)
        usage = self.format_usage()
        if usage.count("\n") > USAGE_LINES:
            usage = f"usage: {self.prog} ... ('{self.prog} --help' lists the options)\n"
        sys.stderr.write(usage)
        self.exit(1, f"{self.prog}: error: {message}\n" + (f"  hint: {hint}\n" if hint else ""))

    def parse_args(self, args=None, namespace=None):
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            command = getattr(self, "commands", {}).get(getattr(parsed, "command", None), self)
            options = [o for action in command._actions for o in action.option_strings]
            flag = next((e.split("=")[0] for e in extras if e.startswith("-")), None)
            from gpdsl.suggest import did_you_mean

            hint = did_you_mean(flag, options) if flag else None
            command.error(f"unrecognized arguments: {' '.join(extras)}", hint)
        return parsed


def _choice_hint(message: str) -> str | None:
    found = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
    if not found:
        return None
    from gpdsl.registry import methods
    from gpdsl.suggest import did_you_mean

    method = methods().get(found.group(1))
    if method is not None and message.startswith("argument --method"):
        return f"{method.name} is a method of 'gpdsl {method.command}': gpdsl {method.command} FILE --method {method.name}"
    return did_you_mean(found.group(1), re.findall(r"'([^']*)'", found.group(2)))


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``gpdsl`` command."""
    from importlib import import_module

    from gpdsl.registry import methods

    parser = _Parser(prog="gpdsl", description="Gaussian-process models: check, compile, sample, fit, run, "
                     "forecast, summarise, plot, compare; write packaged datasets.", formatter_class=_HelpFormatter,
                     epilog="example:\n  gpdsl data pima_tr --rows 100 --columns glu bmi ped --standardize -o data.json"
                            "\n  gpdsl sample models/gp_classification.gpm --data data.json --method pm --out pm.nc"
                            f"\n\n{EXIT_STATUS}")
    parser.add_argument("--version", action="version", version=f"gpdsl {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)

    check = sub.add_parser("check", help="parse and check model files")
    check.add_argument("files", nargs="+", metavar="FILE")
    check.set_defaults(run=_cmd_check)

    compile_ = sub.add_parser("compile", help="compile a model to another language")
    compile_.add_argument("file", metavar="FILE")
    compile_.add_argument("--target", choices=("stan",), default="stan", help="the language to compile to")
    compile_.add_argument("-o", "--output", metavar="OUT", help="write here instead of standard output")
    add_overwrite_flag(compile_)
    compile_.set_defaults(run=_cmd_compile)

    for command, text in (("sample", "run a sampler (or point estimate) and write the results as NetCDF"),
                          ("fit", "fit a model by an optimiser or variational method and write the results")):
        cli_options.add_method_command(sub, command, text, _cmd_run)

    text = ("run again the command that wrote a checkpoint (--checkpoint), from where it stopped; the draws are "
            "bit for bit those of an uninterrupted run")
    resume = sub.add_parser("resume", help=text, description=text)
    resume.add_argument("checkpoint", metavar="CHECKPOINT.npz")
    resume.add_argument("--allow-external", action="store_true",
                        help="run the model's external(...) likelihoods (arbitrary Python code): needed again here "
                             "when the recorded run had one; a checkpoint grants no permission")
    add_overwrite_flag(resume, "replace an existing output file (the recorded command's --overwrite is not used)")
    resume.set_defaults(run=_cmd_resume)

    listing = sub.add_parser("methods", help="list the methods that fit each model, and why the others do not")
    listing.add_argument("files", nargs="+", metavar="FILE")
    listing.set_defaults(run=_cmd_methods)

    summary = sub.add_parser("summary", help="posterior summary and sampler warnings of a results file")
    summary.add_argument("fit", metavar="FIT.nc")
    summary.add_argument("--vars", nargs="+", default=None, metavar="NAME",
                         help="variables to summarise (default: every posterior variable)")
    summary.add_argument("--group", default="posterior", choices=("posterior", "predictions", "posterior_predictive"),
                         help="the group to summarise (default: posterior)")
    summary.add_argument("--standardized", action="store_true",
                         help="show a standardised outcome's predictions as the model saw them, not in the data's "
                              "original units")
    summary.set_defaults(run=_cmd_summary)

    plot = sub.add_parser("plot", help="plot a results file to PNG")
    plot.add_argument("fit", metavar="FIT.nc")
    plot.add_argument("--kind", choices=PLOT_KINDS, default="trace", help="what to draw")
    plot.add_argument("-o", "--output", required=True, metavar="OUT.png")
    add_overwrite_flag(plot)
    plot.add_argument("--vars", nargs="+", default=None, metavar="NAME",
                      help="variables to draw (default: every posterior variable)")
    plot.add_argument("--labels", default=None, metavar="FILE[:NAME]",
                      help="latent: class of each point, from a data file")
    plot.add_argument("--dims", type=int, nargs=2, default=None, metavar="Q",
                      help="latent: the two latent dimensions, from 1 as X[, 1] in the model (default: the two "
                           "most relevant)")
    plot.set_defaults(run=_cmd_plot)

    text = "run the runs of a run file (TOML: model, data, method, settings, out; [[run]] tables, grids, [compare])"
    run_file = sub.add_parser("run", help=text, description=text)
    run_file.add_argument("file", metavar="RUN.toml")
    run_file.add_argument("--dry-run", action="store_true", help="check every run and list them; run nothing")
    run_file.add_argument("--quiet", action="store_true", help="no progress")
    add_overwrite_flag(run_file, "replace existing output files (each run's out, the comparison's table and plot)")
    run_file.add_argument("--allow-external", action="store_true",
                          help="run the models' external(...) likelihoods (arbitrary Python code); a run file "
                               "cannot allow them")
    cli_options.add_device_flag(run_file)
    cli_options.add_scheduler_flag(run_file, "each run as one task (overrides the file's scheduler key)")
    run_file.set_defaults(run=_cmd_run_file)

    text = ("results files side by side: per parameter mean, sd, MCSE, ESS and R-hat of each fit; per fit the "
            "times, min ESS per second and its ratio to the reference; z-scores of the means; elpd_loo")
    compare = sub.add_parser("compare", help=text, description=text)
    compare.add_argument("fits", nargs="+", metavar="FIT.nc")
    compare.add_argument("--reference", default=None, metavar="FIT.nc", help="the fit the others are measured "
                         "against (default: the first)")
    compare.add_argument("--vars", nargs="+", default=None, metavar="NAME",
                         help="variables to compare (default: the model's parameters)")
    compare.add_argument("--labels", nargs="+", default=None, metavar="LABEL",
                         help="names of the fits (default: the file names)")
    compare.add_argument("-o", "--output", default=None, metavar="TABLE.md", help="also write the tables here")
    compare.add_argument("--plot", default=None, metavar="FOREST.png", help="forest plot of the means and 90%% "
                         "intervals")
    add_overwrite_flag(compare)
    compare.set_defaults(run=_cmd_compare)

    from gpdsl.datasets.model_data import FORMS

    text = "write a packaged dataset as data a model reads (JSON), or list the datasets"
    data = sub.add_parser("data", help=text, description=text)
    data.add_argument("name", nargs="?", default=None, metavar="NAME", help="a dataset of --list")
    data.add_argument("-o", "--output", default=None, metavar="FILE.json")
    add_overwrite_flag(data)
    data.add_argument("--list", action="store_true", help="list the datasets")
    data.add_argument("--as", dest="form", choices=FORMS, default=None,
                      help="xy (default): N, D, X, y (regression, classification); inputs: X (for --predict); "
                           "labels; series: y (forecast); gplvm: N, D, Q, centred Y (with --time also t); times: t; "
                           "timeseries: N, t (the one --columns NAME), y")
    data.add_argument("--rows", type=int, default=None, help="rows to keep (default: all from --offset); of a "
                      "simulated dataset, rows per step N (default: its own)")
    data.add_argument("--steps", type=int, default=None, metavar="T",
                      help="simulated dataset: time steps T (default: its own)")
    data.add_argument("--seed", type=int, default=None,
                      help="simulated dataset: seed of the draw, the same seed the same data (default: its own)")
    data.add_argument("--offset", type=int, default=0, help="rows to skip first")
    data.add_argument("--columns", nargs="+", default=None, metavar="NAME", help="input columns, in this order "
                      "(default: all)")
    data.add_argument("--standardize", action="store_true",
                      help="centre and scale the inputs and a regression target by their mean and sd over the whole "
                           "dataset, gplvm outputs Y over the rows kept; the centre and scale are written beside them")
    data.add_argument("--latent-dims", type=int, default=None, metavar="Q", help="gplvm: latent dimensions Q")
    data.add_argument("--with-target", action="store_true", help="gplvm: the target as the first column of Y")
    data.add_argument("--time", action="store_true", help="gplvm: also t, each row's position (from 1)")
    data.add_argument("--inputs", nargs="+", default=None, metavar="NAME",
                      help="gplvm: these columns as observed inputs X (N x k), not outputs (supervised GPLVM)")
    data.set_defaults(run=_cmd_data)

    for method in methods().values():
        for path in method.tools:
            tool = import_module(path)
            command = sub.add_parser(tool.NAME, help=tool.HELP, description=tool.HELP)
            tool.add_arguments(command)
            command.set_defaults(run=tool.run)
            EXAMPLES[tool.NAME] = tool.EXAMPLE

    text = "fit a GP-NARX model file to a series (--method ml) and free-simulate it, with or without uncertainty " \
           "propagation; write the fit and the predictions as NetCDF"
    forecast = sub.add_parser("forecast", help=text, description=text)
    forecast.add_argument("file", metavar="FILE", help="GP regression on a lag matrix (e.g. models/gp_narx.gpm)")
    forecast.add_argument("--data", required=True, metavar="DATA", help=".json, .csv or .nc file holding the series")
    forecast.add_argument("--seed", type=int, default=None, help="seed of Monte Carlo draws (default: drawn, recorded)")
    forecast.add_argument("--out", required=True, metavar="OUT.nc", help="results file (NetCDF), written atomically")
    forecast.add_argument("--quiet", action="store_true", help="no warnings and no hyperparameter listing")
    add_overwrite_flag(forecast)
    from gpdsl.inference.forecast import ForecastSettings
    from gpdsl.inference.methods.ml import MLSettings

    cli_options.add_settings_flags(forecast, ForecastSettings, "forecast", "forecast")
    cli_options.add_settings_flags(forecast, MLSettings, "the hyperparameter fit (as gpdsl fit --method ml)", "ml")
    forecast.set_defaults(run=_cmd_forecast)
    for name, command in sub.choices.items():
        command.formatter_class = _HelpFormatter
        command.epilog = f"example:\n  {EXAMPLES[name]}\n\n{EXIT_STATUS}"
    parser.commands = sub.choices
    return parser


PATH_ERRORS = ("ENAMETOOLONG", "ELOOP", "ENOTDIR")
"""``errno`` names of an operating-system error that says a path the user gave cannot be used as written."""


def _unusable_path(error: OSError) -> bool:
    import errno

    return error.filename is not None and error.errno in {getattr(errno, name) for name in PATH_ERRORS}


def _out_of_memory(error: Exception) -> bool:
    """An allocation XLA could not make (``RESOURCE_EXHAUSTED``), or NumPy's: too large for the memory, which
    the checks before the run estimate but cannot bound exactly."""
    text = str(error)
    return isinstance(error, MemoryError) or (type(error).__name__ in ("JaxRuntimeError", "XlaRuntimeError")
                                              and (text.startswith("RESOURCE_EXHAUSTED")
                                                   or "Out of memory allocating" in text))


def _shortened_path(path, width: int = 120) -> str:
    text = str(path)
    return text if len(text) <= width else f"{text[:width // 2]}...{text[-width // 2:]} ({len(text)} characters)"


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return args.run(args)
    except GpdslError as error:
        print(error.render(), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 1
    except BrokenPipeError:
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as error:
        if isinstance(error, OSError) and _unusable_path(error):
            print(f"error: {_shortened_path(error.filename)}: {error.strerror}", file=sys.stderr)
            return 1
        if _out_of_memory(error):
            print(f"error: the run ran out of memory ({str(error).splitlines()[0][:200]})\n  hint: lower the sizes "
                  "in the data or the settings (chains, draws, inducing inputs, importance draws)", file=sys.stderr)
            return 1
        traceback.print_exc()
        print(f"\ninternal error: this is a bug in gpdsl {__version__}; please report it with the "
              f"output above at {REPORT_URL}", file=sys.stderr)
        return 2
