"""The ``gpdsl`` command line: check, compile, sample, fit, summary, plot.

Exit status: 0 on success, 1 for a user error (rendered with its location, no traceback), 2 for an
internal error (a bug in gpdsl, with a request to report it).
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

from gpdsl import __version__
from gpdsl.errors import GpdslError

METHODS = ("nuts", "pm", "mcmc-ep", "gibbs", "ep-ml")
PLOT_KINDS = ("trace", "pair", "posterior", "latent")
PSI_METHODS = ("analytic", "unscented", "gauss-hermite", "monte-carlo")
REPORT_URL = "https://github.com/gpdsl/gpdsl/issues"


def _cmd_check(args) -> int:
    from gpdsl.api import check_file

    failed = 0
    for path in args.files:
        try:
            model, warnings = check_file(path)
        except GpdslError as error:
            print(error.render(), file=sys.stderr)
            failed += 1
            continue
        for warning in warnings:
            print(warning.render(), file=sys.stderr)
        note = f" ({len(warnings)} warning{'s' if len(warnings) != 1 else ''})" if warnings else ""
        print(f"{path}: ok{note}")
    return 1 if failed else 0


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


def _cmd_sample(args) -> int:
    from gpdsl.api import check_file
    from gpdsl.backends.stan.nuts import sample_nuts
    from gpdsl.data_io import load_data
    from gpdsl.results.io import write_netcdf
    from gpdsl.results.summary import format_summary, sampler_warnings, summarize

    model, warnings = check_file(args.file)
    for warning in warnings:
        print(warning.render(), file=sys.stderr)
    data, data_warnings = load_data(args.data, model)
    for warning in data_warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if args.method == "nuts":
        results = sample_nuts(model, data, backend=args.backend, chains=args.chains, warmup=args.warmup,
                              draws=args.draws, seed=args.seed, adapt_delta=args.adapt_delta,
                              max_depth=args.max_depth, progress=not args.quiet)
    else:
        from gpdsl.inference.run import (
            EngineSettings,
            adapted_proposal_covariance,
            sample_engine,
        )
        from gpdsl.results.io import read_netcdf

        proposal = adapted_proposal_covariance(read_netcdf(args.proposal_from)) if args.proposal_from else None
        settings = EngineSettings(
            approximation=args.approximation, num_importance=args.num_importance,
            target_acceptance=args.target_acceptance, sample_latent=args.sample_latent,
            theta_update=args.theta_update.replace("-", "_"), repeat_f=args.repeat_f,
            repeat_theta=args.repeat_theta, surrogate_variance=args.surrogate_variance, tol=args.tol,
            proposal_covariance=proposal)
        new_inputs = _new_inputs(args.predict, model) if args.predict else None
        results = sample_engine(model, data, args.method, settings, chains=args.chains, warmup=args.warmup,
                                draws=args.draws, seed=args.seed, progress=not args.quiet,
                                checkpoint_path=args.checkpoint, new_inputs=new_inputs)
    path = write_netcdf(results, args.out)
    print(f"wrote {path}", file=sys.stderr)
    if not args.quiet:
        print(format_summary(summarize(results, var_names=list(model.parameters)), sampler_warnings(results)))
    return 0


def _cmd_fit(args) -> int:
    from gpdsl.api import check_file
    from gpdsl.data_io import load_data
    from gpdsl.inference.variational.vem import VEMSettings
    from gpdsl.inference.vem_run import fit_model
    from gpdsl.results.io import write_netcdf

    model, warnings = check_file(args.file)
    for warning in warnings:
        print(warning.render(), file=sys.stderr)
    outputs = [s.target.name for s in model.likelihoods()
               if s.target.name in model.data and model.data[s.target.name].type.base == "real"]
    data, data_warnings = load_data(args.data, model, allow_missing=outputs)
    for warning in data_warnings:
        print(f"warning: {warning}", file=sys.stderr)
    settings = VEMSettings(
        psi=args.psi.replace("-", "_"), gh_nodes=args.gh_nodes, mc_samples=args.mc_samples,
        num_inducing=args.num_inducing, init=args.init, init_variance=args.init_variance,
        ard_heuristic=not args.no_ard_heuristic, initial_values=_initial_values(args.init_value),
        max_iterations=args.max_iterations, seed=args.seed)
    results, fit = fit_model(model, data, settings, progress=not args.quiet)
    path = write_netcdf(results, args.out)
    print(f"wrote {path}", file=sys.stderr)
    report = fit.report
    print(f"variational EM ({settings.psi} Psi statistics, M = {settings.num_inducing}): "
          f"{'converged' if report['converged'] else 'NOT converged'} after {report['iterations']} iterations "
          f"({report['evaluations']} evaluations, {report['seconds']:.1f} s): {report['message']}")
    print(f"final bound {report['bound']:.6g}, gradient norm {report['gradient_norm']:.3g}")
    if "hint" in report:
        print(f"hint: {report['hint']}")
    if not args.quiet:
        import numpy as np

        for name, value in fit.hyperparameters().items():
            print(f"  {name} = {np.array2string(np.asarray(value), precision=4)}")
    return 0


def _initial_values(items) -> dict:
    from gpdsl.errors import MethodError

    values = {}
    for item in items or ():
        name, sep, text = item.partition("=")
        try:
            values[name.strip()] = [float(v) for v in text.split(",")] if "," in text else float(text)
        except ValueError:
            sep = ""
        if not sep:
            raise MethodError(f"--init-value expects name=value or name=v1,v2,...; got '{item}'")
    return values


def _new_inputs(path, model):
    """The GP input variable's values in a prediction data file (same name as in the model)."""
    from gpdsl.data_io import read_data
    from gpdsl.errors import DataError
    from gpdsl.ir.structure import gp_nodes

    values = read_data(path)
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
    import numpy as np

    from gpdsl.inference.predict.gplvm import latent_variance_grid, most_relevant_dims
    from gpdsl.inference.vem_run import fit_from_results
    from gpdsl.results.latent_plot import plot_latent

    _, fit = fit_from_results(results)
    dims = args.dims if args.dims else most_relevant_dims(fit, 2)
    labels = _labels(args.labels) if args.labels else None
    background = latent_variance_grid(fit, dims)
    points = np.asarray(fit.params.mean)[:, dims]
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


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``gpdsl`` command."""
    parser = argparse.ArgumentParser(prog="gpdsl", description="Gaussian-process models: check, compile, "
                                     "sample, summarise and plot.")
    parser.add_argument("--version", action="version", version=f"gpdsl {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    check = sub.add_parser("check", help="parse and check model files")
    check.add_argument("files", nargs="+", metavar="FILE")
    check.set_defaults(run=_cmd_check)

    compile_ = sub.add_parser("compile", help="compile a model to another language")
    compile_.add_argument("file", metavar="FILE")
    compile_.add_argument("--target", choices=("stan",), default="stan")
    compile_.add_argument("-o", "--output", metavar="OUT", help="write here instead of standard output")
    compile_.set_defaults(run=_cmd_compile)

    sample = sub.add_parser("sample", help="run inference and write the results as NetCDF")
    sample.add_argument("file", metavar="FILE")
    sample.add_argument("--data", required=True, metavar="DATA", help=".json, .csv or .nc data file")
    sample.add_argument("--method", choices=METHODS, default="nuts",
                        help="nuts (Stan); pm (pseudo-marginal MH); mcmc-ep (MH on the EP marginal); "
                             "gibbs (ESS for f with SA/AA/SURR for theta); ep-ml (type-II ML on EP)")
    sample.add_argument("--backend", choices=("auto", "pystan", "cmdstanpy"), default="auto",
                        help="Stan interface for NUTS (auto: CmdStan when installed, else PyStan)")
    sample.add_argument("--chains", type=int, default=4)
    sample.add_argument("--warmup", type=int, default=1000)
    sample.add_argument("--draws", type=int, default=1000)
    sample.add_argument("--seed", type=int, default=None)
    sample.add_argument("--adapt-delta", type=float, default=0.8)
    sample.add_argument("--max-depth", type=int, default=10)
    engines = sample.add_argument_group("options of gpdsl's engines (pm, mcmc-ep, gibbs, ep-ml)")
    engines.add_argument("--approximation", choices=("ep", "laplace"), default="ep",
                         help="pm: the Gaussian approximation used as importance distribution")
    engines.add_argument("--num-importance", type=int, default=1, metavar="N_IMP",
                         help="pm: importance samples per marginal-likelihood estimate")
    engines.add_argument("--target-acceptance", type=float, default=0.25,
                         help="acceptance rate the proposal scale is tuned towards during warmup")
    engines.add_argument("--sample-latent", action="store_true",
                         help="pm, mcmc-ep: also sample the latent f by ESS (stored in the posterior)")
    engines.add_argument("--theta-update", choices=("sa", "aa", "surr", "surr-slice"), default="surr",
                         help="gibbs: the hyperparameter update given f")
    engines.add_argument("--repeat-f", type=int, default=1, help="gibbs: ESS updates of f per iteration")
    engines.add_argument("--repeat-theta", type=int, default=1, help="gibbs: theta updates per iteration")
    engines.add_argument("--surrogate-variance", type=float, default=1.0, help="gibbs with SURR: noise S")
    engines.add_argument("--proposal-from", default=None, metavar="FIT.nc",
                         help="pm, mcmc-ep: reuse the random-walk covariance an earlier pm/mcmc-ep run adapted "
                              "(averaged over its chains); nothing is adapted, warmup only burns in")
    engines.add_argument("--tol", type=float, default=None,
                         help="Laplace/EP convergence: change in squared norm of f (default n/1e4)")
    engines.add_argument("--predict", default=None, metavar="NEW.json",
                         help="new inputs (under the model's input name) for a predictions group")
    engines.add_argument("--checkpoint", default=None, metavar="FILE.npz",
                         help="write the draws so far after each compiled segment")
    sample.add_argument("--out", required=True, metavar="FIT.nc")
    sample.add_argument("--quiet", action="store_true", help="no progress and no summary")
    sample.set_defaults(run=_cmd_sample)

    fit = sub.add_parser("fit", help="fit a Bayesian GPLVM by variational EM and write the results as NetCDF")
    fit.add_argument("file", metavar="FILE")
    fit.add_argument("--data", required=True, metavar="DATA", help=".json, .csv or .nc data file (NaN = missing)")
    fit.add_argument("--psi", choices=PSI_METHODS, default="analytic",
                     help="Psi statistics: analytic (rbf, linear, sums), or the unscented transform, "
                          "Gauss-Hermite or Monte Carlo for any kernel")
    fit.add_argument("--gh-nodes", type=int, default=2, help="Gauss-Hermite nodes per latent dimension")
    fit.add_argument("--mc-samples", type=int, default=10, help="Monte Carlo draws per point (fixed per fit)")
    fit.add_argument("--num-inducing", type=int, default=20, metavar="M")
    fit.add_argument("--init", choices=("pca", "random"), default="pca", help="initial latent means")
    fit.add_argument("--init-variance", type=float, default=0.5, help="initial latent variances")
    fit.add_argument("--no-ard-heuristic", action="store_true",
                     help="do not initialise ARD weights from the spread of the initial means")
    fit.add_argument("--init-value", action="append", metavar="NAME=VALUE",
                     help="initial value of a hyperparameter (repeatable; vectors as v1,v2,...)")
    fit.add_argument("--max-iterations", type=int, default=1000, help="L-BFGS-B iterations")
    fit.add_argument("--seed", type=int, default=0)
    fit.add_argument("--out", required=True, metavar="FIT.nc")
    fit.add_argument("--quiet", action="store_true", help="no progress and no parameter listing")
    fit.set_defaults(run=_cmd_fit)

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
