"""P4: the sequential sampler's wall time, and its speed-up over the full-sampling baseline (Tegner et al. 2018).

1. The whole sequential run on the 3-D GP regression data (``--steps`` T, ``--n`` N, ``--states`` M; the paper's
   settings by default: T = 20, N = 200, M = 1000, step-1 chain of 1000 + 5 * 1000 iterations, 5 + 5 ESS updates
   of f_t per state). Target: at most 5 minutes on the 2-core machine. Run once per ``--pass-chains`` value (1: the
   paper's single chain threaded through the M states; 2: two chains through halves of them, one per core).
2. At ``--full-steps`` T, ``--full-n`` N: the sequential run, and the full baseline (the step-1 chain on f_1:t, the
   same number of iterations, at every t) for as many steps t = 1, 2, ... as fit in ``--full-budget`` seconds.
   The full baseline's later steps are extrapolated from the measured ones by a least-squares fit of
   ``seconds(t) = a + b t^3`` (its cost per evaluation is cubic in t N; the fit is printed, and the measured
   growth exponent beside it). Target: sequential at least 50x faster over the T steps.
   With ``--full-sampled K`` every step t = 1..T of the full baseline is measured instead, each by a chain of K
   iterations (K >= 200) in compiled segments of 100: the segments after the first give the seconds per iteration
   at that t, the first the fixed cost (compilation), and the step's time is the fixed cost plus the chain's
   iterations at that rate. No extrapolation in t; only the chain's length is scaled.

Run: ``python benchmarks/sequential.py`` (long: about 20 minutes at the default settings), or ``--quick`` for
a small check of the script. Prints one table; exit status 1 if a target is missed at the paper's settings.

The whole runs go through ``gpdsl.run``; the full baseline's steps are timed one at a time, so this benchmark
calls the engine's public functions directly: the step chain
(:func:`gpdsl.inference.methods.sequential.step_chain`) on the model's sequential view
(:func:`gpdsl.inference.families.sequential.sequential_view`, ``gpdsl.ir.families.classify``) and z-space prior
(:func:`gpdsl.inference.mcmc.z_space.z_prior`). The data are the tegner2018_sequential case study's
(:func:`gpdsl.datasets.tegner_sequential`).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from gpdsl.datasets import tegner_sequential as simulate  # noqa: E402
from gpdsl.datasets.synthetic import TEGNER_SIGMA_Y as SIGMA_Y  # noqa: E402

MODEL = REPO / "models" / "sequential_latent_gp.gpm"


def settings(args, **changes):
    from gpdsl.settings import SequentialSettings

    values = {"states": args.states, "burn_in": args.burn_in, "thin": args.thin, "window": 1, "initial_repeat_f": 3,
              "repeat_f": 5, "surrogate_variance": SIGMA_Y ** 2}
    return SequentialSettings(**{**values, **changes})


def sequential_run(args, steps, n, pass_chains=1):
    import json

    import gpdsl

    data, _ = simulate(steps, n, seed=args.seed)
    started = time.perf_counter()
    fit = gpdsl.run(str(MODEL), data, "sequential", settings(args, pass_chains=pass_chains), seed=args.seed)
    total = time.perf_counter() - started
    return total, json.loads(fit.attrs["report"])["seconds_per_step"]


def full_view(args, steps, n):
    """The sequential view of the simulated data and the hyperparameters' z-space prior."""
    import gpdsl
    from gpdsl.inference.families.sequential import sequential_view
    from gpdsl.inference.mcmc.z_space import z_prior
    from gpdsl.ir.families import SEQUENTIAL_LATENT_GP, classify

    data, _ = simulate(steps, n, seed=args.seed)
    model, _ = gpdsl.check(MODEL)
    view = sequential_view(model, data, classify(model).facts[SEQUENTIAL_LATENT_GP])
    return view, z_prior(view, "benchmark")


def full_steps(args, steps, n, budget):
    """Seconds of the full baseline's step t = 1, 2, ... until the budget is spent."""
    import jax

    from gpdsl.inference.methods.sequential import step_chain

    view, prior = full_view(args, steps, n)
    seconds, spent = [], 0.0
    for t in range(1, steps + 1):
        started = time.perf_counter()
        step_chain(view, t, settings(args, scheme="full"), jax.random.PRNGKey(t), prior, progress=False)
        seconds.append(time.perf_counter() - started)
        spent += seconds[-1]
        print(f"  full baseline step {t}: {seconds[-1]:.1f} s", flush=True)
        if spent + seconds[-1] * ((t + 1) / t) ** 3 > budget:
            break
    return seconds


def full_steps_sampled(args, steps, n, iterations):
    """Every step's seconds of the full baseline from a chain of ``iterations`` iterations at each t, in compiled
    segments of 100: the rate of the segments after the first (compiled by then) and the fixed cost (compilation,
    setup) of the first. Returns ``(estimated seconds per step, seconds per iteration, fixed seconds)``."""
    import jax

    from gpdsl.inference.methods.sequential import step_chain

    view, prior = full_view(args, steps, n)
    chain_length = args.burn_in + args.thin * args.states
    estimates, rates, fixed = [], [], []
    for t in range(1, steps + 1):
        stamps = []
        started = time.perf_counter()
        step_chain(view, t, settings(args, scheme="full", burn_in=0, thin=1, states=iterations),
                   jax.random.PRNGKey(t), prior, progress=False,
                   on_segment=lambda iteration, phase: stamps.append((iteration, time.perf_counter())))
        (first_iteration, first), (last_iteration, last) = stamps[0], stamps[-1]
        rates.append((last - first) / (last_iteration - first_iteration))
        fixed.append(max(first - started - first_iteration * rates[-1], 0.0))
        estimates.append(fixed[-1] + chain_length * rates[-1])
        print(f"  full baseline step {t}: {1e3 * rates[-1]:.1f} ms per iteration over iterations "
              f"{first_iteration}..{last_iteration}, {fixed[-1]:.1f} s fixed; {chain_length} iterations "
              f"{estimates[-1]:.0f} s", flush=True)
    return estimates, rates, fixed


def extrapolate(seconds, steps):
    """``a + b t^3`` fitted to the measured steps, evaluated at every step; and the log-log growth exponent."""
    t = np.arange(1, len(seconds) + 1, dtype=float)
    if len(seconds) < 2:
        return np.full(steps, seconds[0]) * np.arange(1, steps + 1) ** 3, float("nan"), (0.0, seconds[0])
    design = np.stack([np.ones_like(t), t ** 3], axis=1)
    (a, b), *_ = np.linalg.lstsq(design, np.asarray(seconds), rcond=None)
    exponent = np.polyfit(np.log(t[1:]), np.log(np.asarray(seconds[1:])), 1)[0] if len(seconds) > 2 else float("nan")
    every = np.arange(1, steps + 1, dtype=float)
    fitted = np.maximum(a + b * every ** 3, 0)
    fitted[:len(seconds)] = seconds
    return fitted, exponent, (a, b)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--states", type=int, default=1000)
    parser.add_argument("--burn-in", type=int, default=1000)
    parser.add_argument("--thin", type=int, default=5)
    parser.add_argument("--full-steps", type=int, default=10)
    parser.add_argument("--full-n", type=int, default=100)
    parser.add_argument("--full-budget", type=float, default=1200.0, help="seconds for the full baseline")
    parser.add_argument("--full-sampled", type=int, default=0, metavar="K",
                        help="measure every step of the full baseline by a chain of K >= 200 iterations")
    parser.add_argument("--seed", type=int, default=2018)
    parser.add_argument("--quick", action="store_true", help="T = 4, N = 50, M = 100, full budget 60 s")
    parser.add_argument("--skip-p4", action="store_true", help="only the full-against-sequential comparison")
    parser.add_argument("--pass-chains", type=int, nargs="+", default=[1, 2],
                        help="the P4 run with each of these numbers of chains per step")
    parser.add_argument("--skip-full", action="store_true", help="only P4")
    args = parser.parse_args(argv)
    if args.full_sampled and args.full_sampled < 200:
        parser.error("--full-sampled needs at least 200 iterations (two compiled segments of 100)")
    if args.quick:
        args.steps, args.n, args.states, args.burn_in, args.thin = 4, 50, 100, 100, 1
        args.full_steps, args.full_n, args.full_budget = 4, 50, 60.0
    missed = False
    print(f"sequential sampler, M = {args.states}, step-1 chain {args.burn_in} + {args.thin} x {args.states}")
    for chains in ([] if args.skip_p4 else args.pass_chains):
        total, per_step = sequential_run(args, args.steps, args.n, chains)
        later = per_step[1:]
        print(f"P4 run T = {args.steps}, N = {args.n}, {chains} pass chain(s): total {total:.1f} s (step 1 "
              f"{per_step[0]:.1f} s, steps 2..T {sum(later):.1f} s, {np.mean(later):.2f} s per step); target 300 s",
              flush=True)
        missed |= total > 300 and not args.quick and chains == min(args.pass_chains)
    if args.skip_full:
        return int(missed)
    total, per_step = sequential_run(args, args.full_steps, args.full_n)
    print(f"sequential, T = {args.full_steps}, N = {args.full_n}: {total:.1f} s (per step "
          f"{', '.join(f'{s:.1f}' for s in per_step)})", flush=True)
    if args.full_sampled:
        estimates, _, _ = full_steps_sampled(args, args.full_steps, args.full_n, args.full_sampled)
        ratio = sum(estimates) / total
        print(f"T = {args.full_steps}, N = {args.full_n}: sequential {total:.1f} s; full baseline, every step "
              f"measured by a chain of {args.full_sampled} iterations and scaled to "
              f"{args.burn_in + args.thin * args.states}: {sum(estimates):.0f} s; full / sequential = {ratio:.1f}x; "
              f"target 50x")
        return int(missed or (ratio < 50 and not args.quick))
    full = full_steps(args, args.full_steps, args.full_n, args.full_budget)
    fitted, exponent, (a, b) = extrapolate(full, args.full_steps)
    ratio = fitted.sum() / total
    print(f"T = {args.full_steps}, N = {args.full_n}: sequential {total:.1f} s; full baseline measured for "
          f"t = 1..{len(full)} ({sum(full):.1f} s), fitted seconds(t) = {a:.2f} + {b:.3f} t^3 "
          f"(measured growth exponent {exponent:.2f}), all {args.full_steps} steps {fitted.sum():.0f} s "
          f"(extrapolated); full / sequential = {ratio:.1f}x; target 50x")
    missed |= ratio < 50 and not args.quick
    return int(missed)


if __name__ == "__main__":
    sys.exit(main())
