"""``gpdsl pm-variance``: the spread of pm-gplvm's estimate of ``log p(Y | X, xi)`` at one ``xi`` against the number
of importance draws (Gadd et al. 2021, Fig. 4), from a results file's settings and one of its draws.

A tool of the ``pm-gplvm`` method (its registry entry names this module in ``tools``).
"""

from __future__ import annotations

import sys

from gpdsl.cli.options import add_overwrite_flag

NAME = "pm-variance"
HELP = "the spread of pm-gplvm's estimate of log p(Y | X, xi) at one xi, against the number of importance draws"
EXAMPLE = "gpdsl pm-variance models/supervised_gplvm.gpm --data data.json --from pm.nc --draw 1 820"


def add_arguments(parser) -> None:
    """The command's arguments."""
    parser.add_argument("file", metavar="FILE")
    parser.add_argument("--data", required=True, metavar="DATA")
    parser.add_argument("--from", dest="results", default=None, metavar="FIT.nc",
                        help="a pm-gplvm results file: its settings and seed (default: pm-gplvm's defaults)")
    parser.add_argument("--draw", type=int, nargs=2, default=None, metavar=("CHAIN", "DRAW"),
                        help="the hyperparameters of this kept draw of --from (from 1; default: the variational "
                             "estimate the chains started from)")
    parser.add_argument("--replicates", type=int, default=1000, help="independent estimates (default 1000)")
    parser.add_argument("--num-importance", type=int, default=None, metavar="Q",
                        help="importance draws per estimate (default: the run's)")
    parser.add_argument("--seed", type=int, default=None, help="seed without --from (default: drawn)")
    parser.add_argument("--png", default=None, metavar="OUT.png", help="also plot the running summaries")
    add_overwrite_flag(parser)


def run(args) -> int:
    """Run ``gpdsl pm-variance``: print the spread of the log estimate and plot it (``--png``); returns 0."""
    import numpy as np

    from gpdsl.api import check_file, draw_seed, verify_seed
    from gpdsl.data.io import load_data
    from gpdsl.errors import DataError
    from gpdsl.inference.methods.gplvm_chains import estimate_spread_at
    from gpdsl.results.arviz_compat import groups, root_attrs
    from gpdsl.results.io import read_netcdf
    from gpdsl.errors import GpdslError
    from gpdsl.settings import PMGPLVMSettings, require_positive_int
    from gpdsl.settings.recorded import recorded_settings

    require_positive_int("--replicates", args.replicates)
    if args.num_importance is not None:
        require_positive_int("--num-importance", args.num_importance)
    if args.png:
        from gpdsl.storage.atomic import check_writable

        check_writable(args.png, "figure", inputs=[args.file, args.data, args.results], overwrite=args.overwrite)
    model, _ = check_file(args.file)
    data, _ = load_data(args.data, model)
    settings, seed, values = PMGPLVMSettings(), None, None
    if args.results:
        results = read_netcdf(args.results)
        if root_attrs(results).get("method") != "pm-gplvm":
            raise DataError(f"{args.results} holds a {root_attrs(results).get('method')} run, not pm-gplvm")
        try:
            settings = recorded_settings(PMGPLVMSettings, results)
        except GpdslError as error:
            raise GpdslError(f"results file {args.results}: {error.message}") from None
        if "seed" not in root_attrs(results):
            raise DataError(f"results file {args.results} records no seed")
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
    else:
        seed = draw_seed() if args.seed is None else verify_seed(args.seed)
        if args.seed is None:
            print(f"seed {seed} (drawn; give --seed {seed} to repeat this run)", file=sys.stderr)
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
