"""The ``gpdsl`` command line: check, compile, sample, fit, forecast, methods, summary, plot.

Exit status: 0 on success, 1 for a user error (rendered with its location, no traceback), 2 for an
internal error (a bug in gpdsl, with a request to report it).
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

from gpdsl import __version__
from gpdsl import cli_options
from gpdsl.errors import GpdslError

PLOT_KINDS = ("trace", "pair", "posterior", "latent")
REPORT_URL = "https://github.com/gpdsl/gpdsl/issues"


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

    model, warnings = check_file(args.file)
    for warning in warnings:
        print(warning.render(), file=sys.stderr)
    program = generate_stan(model)
    for warning in getattr(program, "warnings", ()):
        print(f"warning: {warning}", file=sys.stderr)
    check_program(program.code, model.name)
    if args.output:
        from gpdsl.atomic import atomic_write_text

        atomic_write_text(args.output, program.code, "Stan program")
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(program.code)
    return 0


def _cmd_run(args) -> int:
    """``gpdsl sample`` and ``gpdsl fit``: one path through :func:`gpdsl.api.run`."""
    from gpdsl.api import check_file, run
    from gpdsl.registry import get_method

    entry = get_method(args.method)
    settings = cli_options.settings_from_args(entry, args)
    model, warnings = check_file(args.file)
    for warning in warnings:
        print(warning.render(), file=sys.stderr)
    new_inputs = _new_inputs(args.predict, model, entry.name) if getattr(args, "predict", None) else None
    results = run(model, args.data, entry.name, settings, seed=args.seed, out=args.out, progress=not args.quiet,
                  checkpoint=getattr(args, "checkpoint", None), new_inputs=new_inputs,
                  inputs=(args.file,), on_warning=lambda text: print(f"warning: {text}", file=sys.stderr))
    print(f"wrote {args.out}", file=sys.stderr)
    if entry.command == "fit":
        _print_fit_report(results, verbose=not args.quiet)
    elif not args.quiet:
        from gpdsl.results.summary import format_summary, sampler_warnings, summarize

        print(format_summary(summarize(results, var_names=list(model.parameters)), sampler_warnings(results)))
    return 0


def _print_fit_report(results, verbose: bool) -> None:
    import numpy as np

    from gpdsl.results.arviz_compat import groups, root_attrs
    from gpdsl.results.method_output import results_json

    report = results_json(results, "report").get("optimizer", {})
    settings = results_json(results, "settings")
    if root_attrs(results).get("method") == "vem":
        heading = f"variational EM ({settings.get('psi')} Psi statistics, M = {settings.get('num_inducing')})"
        final = f"final bound {report.get('bound', float('nan')):.6g}"
    else:
        heading = "type-II maximum likelihood (MAP where there are priors)"
        final = (f"log marginal likelihood {report.get('log_marginal', float('nan')):.6g}, objective "
                 f"{report.get('log_posterior', float('nan')):.6g}")
    print(f"{heading}: {'converged' if report.get('converged') else 'NOT converged'} after "
          f"{report.get('iterations')} iterations ({report.get('evaluations')} evaluations, "
          f"{report.get('seconds', 0):.1f} s): {report.get('message')}")
    print(f"{final}, gradient norm {report.get('gradient_norm', float('nan')):.3g}")
    if "hint" in report:
        print(f"hint: {report['hint']}")
    if verbose:
        latent = root_attrs(results).get("latent")
        skip = {latent, f"{latent}_variance", "inducing_inputs"}
        posterior = groups(results)["posterior"]
        for name in posterior.data_vars:
            if name not in skip:
                print(f"  {name} = {np.array2string(np.asarray(posterior[name])[0, 0], precision=4)}")


def _cmd_forecast(args) -> int:
    """``gpdsl forecast``: fit a GP-NARX model to a series by ``ml`` and free-simulate it."""
    from gpdsl.api import check_file, draw_seed, verify_seed
    from gpdsl.atomic import check_writable
    from gpdsl.inference.forecast import ForecastSettings, forecast, narx_names
    from gpdsl.inference.methods.ml import MLSettings
    from gpdsl.results.io import write_netcdf

    settings = cli_options.settings_from_flags(ForecastSettings, args)
    ml_settings = cli_options.settings_from_flags(MLSettings, args)
    seed = draw_seed() if args.seed is None else verify_seed(args.seed)
    model, warnings = check_file(args.file)
    if not args.quiet:
        for warning in warnings:
            print(warning.render(), file=sys.stderr)
    narx_names(model)
    check_writable(args.out, "results", inputs=[args.file, args.data])
    series = _series(args.data, settings.series)
    results, result, _ = forecast(model, series, settings, ml_settings, seed=seed)
    write_netcdf(results, args.out)
    print(f"wrote {args.out}", file=sys.stderr)
    _print_fit_report(results, verbose=not args.quiet)
    rule = "mean feedback (GP-NARX)" if settings.feedback == "mean" else \
        f"Gaussian feedback, {settings.psi.replace('_', '-')} Psi statistics"
    scores = result.metrics
    held_out = (f"held-out RMSE {scores['rmse']:.4g}, NLPD {scores['nlpd']:.4g} over {scores['count']} values"
                if scores.get("count") else "no held-out values in the series")
    print(f"free simulation: {result.mean.size} steps with {rule}; {held_out}")
    return 0


def _cmd_pm_variance(args) -> int:
    """``gpdsl pm-variance``: the spread of pm-gplvm's log estimate at one hyperparameter value (Fig. 4)."""
    import numpy as np

    from gpdsl.api import check_file, draw_seed, verify_seed
    from gpdsl.data_io import load_data
    from gpdsl.errors import DataError
    from gpdsl.inference.methods.gplvm_chains import estimate_spread_at
    from gpdsl.inference.methods.pm_gplvm import PMGPLVMSettings
    from gpdsl.results.arviz_compat import groups, root_attrs
    from gpdsl.results.io import read_netcdf
    from gpdsl.results.method_output import results_json
    from gpdsl.settings import require_positive_int

    require_positive_int("replicates", args.replicates)
    if args.num_importance is not None:
        require_positive_int("num_importance", args.num_importance)
    model, _ = check_file(args.file)
    data, _ = load_data(args.data, model)
    settings, seed, values = PMGPLVMSettings(), draw_seed() if args.seed is None else verify_seed(args.seed), None
    if args.png:
        from gpdsl.atomic import check_writable

        check_writable(args.png, "figure", inputs=[args.file, args.data])
    if args.results:
        results = read_netcdf(args.results)
        if root_attrs(results).get("method") != "pm-gplvm":
            raise DataError(f"{args.results} holds a {root_attrs(results).get('method')} run, not pm-gplvm")
        settings = PMGPLVMSettings(**results_json(results, "settings"))
        seed = int(root_attrs(results)["seed"])
        if args.draw is not None:
            posterior = groups(results)["posterior"]
            chain, draw = args.draw
            chains, draws = posterior.sizes["chain"], posterior.sizes["draw"]
            if not (1 <= chain <= chains and 1 <= draw <= draws):
                raise DataError(f"--draw {chain} {draw} is outside the {chains} chains of {draws} draws "
                                f"(both count from 1)")
            values = {name: np.asarray(posterior[name])[chain - 1, draw - 1] for name in model.parameters}
    elif args.draw is not None:
        raise DataError("--draw needs --from RESULTS.nc")
    spread, at = estimate_spread_at(model, data, settings, seed, values, args.replicates, args.num_importance)
    where = ", ".join(f"{k} = {np.array2string(np.asarray(v), precision=4)}" for k, v in at.items())
    print(f"log p_hat(Y | X, xi) at {where}: {args.replicates} replicates")
    print(f"{'draws':>7} {'mean':>12} {'sd':>8} {'variance':>9} {'p10':>12} {'median':>12} {'p90':>12}")
    for q in sorted({1, 10, 100, 1000, spread.draws[-1]} & set(spread.draws.tolist())):
        i = q - 1
        print(f"{q:>7} {spread.mean[i]:>12.4f} {spread.sd[i]:>8.4f} {spread.variance[i]:>9.4f} {spread.p10[i]:>12.4f} "
              f"{spread.median[i]:>12.4f} {spread.p90[i]:>12.4f}")
    verdict = "below" if spread.variance[-1] < 2 else "ABOVE"
    print(f"variance of the log estimate with {spread.draws[-1]} draws: {spread.variance[-1]:.3f} ({verdict} the "
          "about 2 that Doucet et al. 2015 recommend)")
    if args.png:
        from gpdsl.results.plots import plot_estimate_spread

        print(f"wrote {plot_estimate_spread(spread, args.png)}", file=sys.stderr)
    return 0


def _series(path, name):
    """The series in a data file: its only variable, or the one called ``name``."""
    import numpy as np

    from gpdsl.data_io import read_data
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
        for method in methods().values():
            reason = method.refusal(model, classification)
            if reason is None:
                print(f"  yes  {method.name:<8} gpdsl {method.command} --method {method.name}: {method.summary}")
            else:
                print(f"  no   {method.name:<8} {reason}")

    return _for_each_checked_file(args.files, report)


def _new_inputs(path, model, method: str):
    """The GP input variable's values in a prediction data file (same name as in the model).

    For the GPLVM methods every variable of the file, by name: the new inputs of the latent inputs' GP prior
    and new (partially observed) outputs, which the method picks from.
    """
    from gpdsl.data_io import read_data
    from gpdsl.errors import DataError
    from gpdsl.ir.families import BAYESIAN_GPLVM, GP_PRIOR_GPLVM
    from gpdsl.ir.structure import gp_nodes
    from gpdsl.registry import get_method

    values = read_data(path)
    if {BAYESIAN_GPLVM, GP_PRIOR_GPLVM} & set(get_method(method).families):
        return values
    names = {name for node in gp_nodes(model) for name in node.statement.inputs.names if name}
    found = [name for name in names if name in values]
    if len(found) != 1:
        raise DataError(f"{path} must hold the new inputs under the model's input name "
                        f"({' or '.join(sorted(names)) or 'none'})")
    return values[found[0]]


def _cmd_summary(args) -> int:
    from gpdsl.results.io import read_netcdf
    from gpdsl.results.summary import format_summary, sampler_warnings, summarize

    results = read_netcdf(args.fit)
    print(format_summary(summarize(results, var_names=args.vars), sampler_warnings(results)))
    return 0


def _cmd_plot(args) -> int:
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
    from gpdsl.inference.predict.gplvm import latent_variance_grid, most_relevant_dims
    from gpdsl.inference.methods.vem import fit_from_results
    from gpdsl.results.latent_plot import plot_latent

    _, fit = fit_from_results(results)
    dims = args.dims if args.dims else most_relevant_dims(fit, 2)
    labels = _labels(args.labels) if args.labels else None
    background = latent_variance_grid(fit, dims)
    points = fit.mean[:, dims]
    return plot_latent(points, args.output, labels=labels, background=background, dims=dims,
                       title=f"{fit.problem.latent}: dimensions {dims[0]} and {dims[1]} (most relevant first)")


def _labels(spec):
    """Labels from ``FILE`` (its only variable or column) or ``FILE:NAME``."""
    import numpy as np

    from gpdsl.data_io import read_data
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


class _Parser(argparse.ArgumentParser):
    """argparse with usage errors as user errors (exit status 1, like every other user error)."""

    def error(self, message):
        self.print_usage(sys.stderr)
        self.exit(1, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``gpdsl`` command."""
    parser = _Parser(prog="gpdsl", description="Gaussian-process models: check, compile, sample, fit, forecast, "
                     "summarise and plot.")
    parser.add_argument("--version", action="version", version=f"gpdsl {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)

    check = sub.add_parser("check", help="parse and check model files")
    check.add_argument("files", nargs="+", metavar="FILE")
    check.set_defaults(run=_cmd_check)

    compile_ = sub.add_parser("compile", help="compile a model to another language")
    compile_.add_argument("file", metavar="FILE")
    compile_.add_argument("--target", choices=("stan",), default="stan")
    compile_.add_argument("-o", "--output", metavar="OUT", help="write here instead of standard output")
    compile_.set_defaults(run=_cmd_compile)

    for command, text in (("sample", "run a sampler (or point estimate) and write the results as NetCDF"),
                          ("fit", "fit a model by an optimiser or variational method and write the results")):
        cli_options.add_method_command(sub, command, text, _cmd_run)

    methods = sub.add_parser("methods", help="list the methods that fit each model, and why the others do not")
    methods.add_argument("files", nargs="+", metavar="FILE")
    methods.set_defaults(run=_cmd_methods)

    summary = sub.add_parser("summary", help="posterior summary and sampler warnings of a results file")
    summary.add_argument("fit", metavar="FIT.nc")
    summary.add_argument("--vars", nargs="+", default=None, metavar="NAME")
    summary.set_defaults(run=_cmd_summary)

    plot = sub.add_parser("plot", help="plot a results file to PNG")
    plot.add_argument("fit", metavar="FIT.nc")
    plot.add_argument("--kind", choices=PLOT_KINDS, default="trace")
    plot.add_argument("-o", "--output", required=True, metavar="OUT.png")
    plot.add_argument("--vars", nargs="+", default=None, metavar="NAME")
    plot.add_argument("--labels", default=None, metavar="FILE[:NAME]",
                      help="latent: class of each point, from a data file")
    plot.add_argument("--dims", type=int, nargs=2, default=None, metavar="Q",
                      help="latent: the two latent dimensions (0-based; default the two most relevant)")
    plot.set_defaults(run=_cmd_plot)

    text = "the spread of pm-gplvm's estimate of log p(Y | X, xi) at one xi, against the number of importance draws"
    spread = sub.add_parser("pm-variance", help=text, description=text)
    spread.add_argument("file", metavar="FILE")
    spread.add_argument("--data", required=True, metavar="DATA")
    spread.add_argument("--from", dest="results", default=None, metavar="FIT.nc",
                        help="a pm-gplvm results file: its settings and seed (default: pm-gplvm's defaults)")
    spread.add_argument("--draw", type=int, nargs=2, default=None, metavar=("CHAIN", "DRAW"),
                        help="the hyperparameters of this kept draw of --from (from 1; default: the variational "
                             "estimate the chains started from)")
    spread.add_argument("--replicates", type=int, default=1000, help="independent estimates (default 1000)")
    spread.add_argument("--num-importance", type=int, default=None, metavar="Q",
                        help="importance draws per estimate (default: the run's)")
    spread.add_argument("--seed", type=int, default=None, help="seed without --from (default: drawn)")
    spread.add_argument("--png", default=None, metavar="OUT.png", help="also plot the running summaries")
    spread.set_defaults(run=_cmd_pm_variance)

    text = "fit a GP-NARX model file to a series (--method ml) and free-simulate it, with or without uncertainty " \
           "propagation; write the fit and the predictions as NetCDF"
    forecast = sub.add_parser("forecast", help=text, description=text)
    forecast.add_argument("file", metavar="FILE", help="GP regression on a lag matrix (e.g. models/gp_narx.gpm)")
    forecast.add_argument("--data", required=True, metavar="DATA", help=".json, .csv or .nc file holding the series")
    forecast.add_argument("--seed", type=int, default=None, help="seed of Monte Carlo draws (default: drawn, recorded)")
    forecast.add_argument("--out", required=True, metavar="OUT.nc", help="results file (NetCDF), written atomically")
    forecast.add_argument("--quiet", action="store_true", help="no warnings and no hyperparameter listing")
    from gpdsl.inference.forecast import ForecastSettings
    from gpdsl.inference.methods.ml import MLSettings

    cli_options.add_settings_flags(forecast, ForecastSettings, "forecast", "forecast")
    cli_options.add_settings_flags(forecast, MLSettings, "the hyperparameter fit (as gpdsl fit --method ml)", "ml")
    forecast.set_defaults(run=_cmd_forecast)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except GpdslError as error:
        print(error.render(), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 1
    except Exception:
        traceback.print_exc()
        print(f"\ninternal error: this is a bug in gpdsl {__version__}; please report it with the "
              f"output above at {REPORT_URL}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
