"""Hilbert-space approximate GP classification (Bernoulli-logit) and Poisson regression: min bulk ESS per second
over the hyperparameters of gpdsl's engines on the HSGP model against NUTS on the same HSGP program (gpdsl's
``nuts``, Stan through PyStan) and against PyMC's ``pm.gp.HSGP`` under its default sampler; and the time of one
gradient of the HSGP log density against N.

The model (``f ~ gp(x, square(sigma) * matern32(lengthscale = ell), approx = hsgp(m = 30, c = 1.5))``,
``sigma ~ half_normal(1)``, ``ell ~ inv_gamma(5, 5)``; the Poisson one adds ``mu ~ normal(0, 2)`` as the GP's mean)
is written once in gpdsl's language and once in PyMC (``HSGP(m=[30], c=1.5)``, the same priors, ``mu`` added to the
log rate). The simulated inputs (seeded) are symmetric about their midpoint, so gpdsl's box (centred at the
midpoint) and PyMC's (centred at the mean) are the same box and the two programs the same basis. In 2-D (``--dims 1
2``) the kernel has one length-scale per input (``matrix[N, 2] x``, ``vector<lower=0>[2] ell``) and ``m = 15`` per input (225 basis
functions).

Every engine runs in its own subprocess of this script (``--worker``), two chains, and reports the min over the
hyperparameters of ArviZ's bulk ESS, divided by its warmup plus sampling seconds (compilation excluded: gpdsl's
``timings``, PyStan's warmup and sampling, PyMC's ``sampling_time``). gpdsl's engines are ``gibbs`` (elliptical
slice sampling of the basis weights, SURR hyperparameter updates), ``gibbs-sa`` (the same with SA, which keeps the
basis coefficients ``sqrt(S) .* z`` fixed as the hyperparameters move) and ``pm`` (pseudo-marginal MH with the Laplace
approximation of the weights); the ratio column divides the best of them, among those whose largest split R-hat
is at most 1.05, by each NUTS's ESS/s.

PyMC is a peer, not a dependency: install it in the benchmark's own place, e.g. ``python3.11 -m venv
/tmp/bench-pymc && /tmp/bench-pymc/bin/pip install pymc``, and pass ``--pymc-python /tmp/bench-pymc/bin/python``
(the default); without it the PyMC rows are skipped with a line saying so. PyStan comes with gpdsl's ``stan`` extra.

Run: ``PYTHONPATH=. python benchmarks/hsgp_peers.py [--sizes 1000 10000 100000] [--dims 1] [--budget 300]``.
A run whose warmup and sampling would exceed ``--budget`` seconds (extrapolated linearly in N from the engine's
run at the size before) gets fewer iterations, down to ``--fewest``; below that it is skipped with a line; and a run that takes longer than ``--budget`` plus ``--overhead``
seconds is stopped. Draws per chain are cut so that a run holds at most ``--memory-gb`` of recorded ``f``
(gpdsl records f, its pointwise log-likelihood and replicates; PyMC is asked for the hyperparameters only).
Wall times on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
BASIS = {1: 30, 2: 15}
C = 1.5
CHAINS = 2
GPDSL_ENGINES = ("gibbs", "gibbs-sa", "pm")
ENGINES = GPDSL_ENGINES + ("nuts", "pymc")
CONVERGED = 1.05  # the largest split R-hat of a gpdsl run the ratio counts


def simulate(likelihood: str, n: int, dim: int, seed: int = 0):
    """Inputs in ``[0, 10]^dim`` symmetric about 5 (each point and its reflection), and 0/1 or count outcomes."""
    rng = np.random.default_rng([seed, n, dim, likelihood == "poisson"])
    half = rng.uniform(0.0, 5.0, size=(n // 2, dim))
    x = np.concatenate([half, 10.0 - half])
    signal = np.sin(x).sum(axis=1) + 0.5 * np.cos(0.7 * x).sum(axis=1)
    if likelihood == "bernoulli":
        y = rng.binomial(1, 1.0 / (1.0 + np.exp(-1.5 * signal)))
    else:
        y = rng.poisson(np.exp(0.5 + 0.8 * signal))
    return x, y.astype(int)


def gpdsl_model(likelihood: str, dim: int) -> str:
    inputs = "vector[N] x;" if dim == 1 else f"matrix[N, {dim}] x;"  # an HSGP needs its columns as a number
    scale = "real<lower=0> ell ~ inv_gamma(5, 5);" if dim == 1 else f"vector<lower=0>[{dim}] ell ~ inv_gamma(5, 5);"
    m = BASIS[dim] if dim == 1 else "[" + ", ".join([str(BASIS[dim])] * dim) + "]"
    outcome = "array[N] int<lower=0, upper=1> y;" if likelihood == "bernoulli" else "array[N] int<lower=0> y;"
    mean = ", mean = mu" if likelihood == "poisson" else ""
    mu = "real mu ~ normal(0, 2);\n  " if likelihood == "poisson" else ""
    observe = "y ~ bernoulli_logit(f);" if likelihood == "bernoulli" else "y ~ poisson_log(f);"
    return (f"data {{\n  int N;\n  {inputs}\n  {outcome}\n}}\n"
            f"parameters {{\n  {mu}real<lower=0> sigma ~ half_normal(1);\n  {scale}\n}}\n"
            f"model {{\n  f ~ gp(x, square(sigma) * matern32(lengthscale = ell){mean}, approx = hsgp(m = {m}, c = {C}));\n"
            f"  {observe}\n}}\n")


def hyperparameters(likelihood: str) -> list[str]:
    return (["mu"] if likelihood == "poisson" else []) + ["sigma", "ell"]


def gpdsl_data(likelihood: str, n: int, dim: int) -> dict:
    x, y = simulate(likelihood, n, dim)
    return {"N": n, "x": x[:, 0] if dim == 1 else x, "y": y}


def summary(posterior, names, seconds, compile_seconds, az):
    ess = az.ess(posterior[names], method="bulk")
    rhat = az.rhat(posterior[names])
    return {"ess": float(min(float(ess[v].min()) for v in names)),
            "rhat": float(max(float(rhat[v].max()) for v in names)),
            "seconds": seconds, "compile": compile_seconds}


def run_gpdsl(args) -> dict:
    sys.path.insert(0, ROOT)
    import arviz as az

    from gpdsl.api import check, run
    from gpdsl.settings import GibbsSettings, NUTSSettings, PseudoMarginalSettings

    model = check(gpdsl_model(args.likelihood, args.dim))[0]
    settings = {"gibbs": lambda: GibbsSettings(chains=CHAINS, warmup=args.warmup, draws=args.draws),
                "gibbs-sa": lambda: GibbsSettings(chains=CHAINS, warmup=args.warmup, draws=args.draws,
                                                  theta_update="sa"),
                "pm": lambda: PseudoMarginalSettings(chains=CHAINS, warmup=args.warmup, draws=args.draws,
                                                     approximation="laplace"),
                "nuts": lambda: NUTSSettings(chains=CHAINS, warmup=args.warmup, draws=args.draws,
                                             backend="pystan")}[args.worker]()
    method = args.worker.split("-")[0]
    results = run(model, gpdsl_data(args.likelihood, args.n, args.dim), method, settings, seed=args.seed)
    timings = json.loads(results.posterior.attrs["timings"])
    return summary(results.posterior, hyperparameters(args.likelihood), timings["warmup"] + timings["sampling"],
                   timings.get("compile", float("nan")), az)


def pymc_model(likelihood: str, n: int, dim: int):
    import pymc as pm

    x, y = simulate(likelihood, n, dim)
    with pm.Model() as model:
        sigma = pm.HalfNormal("sigma", sigma=1.0)
        ell = pm.InverseGamma("ell", alpha=5.0, beta=5.0, shape=() if dim == 1 else (dim,))
        gp = pm.gp.HSGP(m=[BASIS[dim]] * dim, c=C, cov_func=sigma ** 2 * pm.gp.cov.Matern32(dim, ls=ell))
        f = gp.prior("f", X=x)
        if likelihood == "bernoulli":
            pm.Bernoulli("y", logit_p=f, observed=y)
        else:
            mu = pm.Normal("mu", mu=0.0, sigma=2.0)
            pm.Poisson("y", mu=pm.math.exp(mu + f), observed=y)
    return model


def run_pymc(args) -> dict:
    import arviz as az
    import pymc as pm

    names = hyperparameters(args.likelihood)
    with pymc_model(args.likelihood, args.n, args.dim):
        started = time.perf_counter()
        idata = pm.sample(draws=args.draws, tune=args.warmup, chains=CHAINS, cores=CHAINS, random_seed=args.seed,
                          progressbar=False, compute_convergence_checks=False, var_names=names)
        total = time.perf_counter() - started
    seconds = float(idata.posterior.attrs["sampling_time"])
    return summary(idata.posterior, names, seconds, total - seconds, az)


def gradient_times(args) -> dict:
    """Median seconds of one gradient of the log density (unconstrained space) at each size."""
    out = {}
    for n in args.sizes:
        if args.worker == "gpdsl-gradient":
            function, point = gpdsl_gradient(args.likelihood, n, args.dim)
        else:
            function, point = pymc_gradient(args.likelihood, n, args.dim)
        function(point)
        seconds = []
        while len(seconds) < args.repeats or sum(seconds) < 1.0:
            started = time.perf_counter()
            function(point)
            seconds.append(time.perf_counter() - started)
        out[str(n)] = statistics.median(seconds)
    return out


def gpdsl_gradient(likelihood, n, dim):
    sys.path.insert(0, ROOT)
    import jax
    import jax.numpy as jnp

    from gpdsl.api import check
    from gpdsl.backends.jax.lowering import lower
    from gpdsl.data.io import load_data

    model = check(gpdsl_model(likelihood, dim))[0]
    lowered = lower(model, load_data(gpdsl_data(likelihood, n, dim), model)[0])
    gradient = jax.jit(jax.grad(lowered.log_density))
    point = jnp.asarray(np.random.default_rng(1).normal(scale=0.3, size=lowered.dim))
    return (lambda z: jax.block_until_ready(gradient(z))), point


def pymc_gradient(likelihood, n, dim):
    model = pymc_model(likelihood, n, dim)
    dlogp = model.compile_dlogp()
    point = model.initial_point()
    return dlogp, point


def worker(args):
    if args.worker in ("gpdsl-gradient", "pymc-gradient"):
        result = gradient_times(args)
    elif args.worker == "pymc":
        result = run_pymc(args)
    else:
        result = run_gpdsl(args)
    print("RESULT " + json.dumps(result), flush=True)


def launch(python, arguments, timeout):
    """Run this script as a worker; its RESULT line, or a short reason it gave none."""
    command = ["nice", "-n", "5", python, os.path.abspath(__file__), *arguments]
    environment = dict(os.environ, PYTHONPATH=ROOT)
    # its own session, so that a stopped worker takes its children (PyMC's chain processes) with it
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment,
                               start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return None, f"stopped after {timeout:.0f} s"
    for line in stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):]), None
    tail = (stderr.strip().splitlines() or ["no output"])[-1]
    return None, f"failed (exit {process.returncode}): {tail[:160]}"


def schedule(engine, args):
    """Warmup and draws per chain of an engine."""
    return {"gibbs": args.gibbs, "gibbs-sa": args.gibbs, "pm": args.pm, "nuts": args.nuts, "pymc": args.nuts}[engine]


def ratio_cell(table, key, engine):
    ours = [table[key + (e,)]["ess"] / table[key + (e,)]["seconds"] for e in GPDSL_ENGINES
            if key + (e,) in table and table[key + (e,)]["rhat"] <= CONVERGED]
    if not ours or key + (engine,) not in table:
        return "-"
    theirs = table[key + (engine,)]["ess"] / table[key + (engine,)]["seconds"]
    return f"{max(ours) / theirs:.2f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--dims", type=int, nargs="+", default=[1], choices=sorted(BASIS))
    parser.add_argument("--likelihoods", nargs="+", default=["bernoulli", "poisson"], choices=["bernoulli", "poisson"])
    parser.add_argument("--engines", nargs="+", default=list(ENGINES), choices=ENGINES)
    parser.add_argument("--gibbs", type=int, nargs=2, default=[1000, 4000], metavar=("WARMUP", "DRAWS"))
    parser.add_argument("--pm", type=int, nargs=2, default=[500, 1500], metavar=("WARMUP", "DRAWS"))
    parser.add_argument("--nuts", type=int, nargs=2, default=[500, 500], metavar=("WARMUP", "DRAWS"),
                        help="warmup and draws of both NUTS (Stan's and PyMC's)")
    parser.add_argument("--budget", type=float, default=300.0, help="seconds of warmup and sampling a run may take")
    parser.add_argument("--fewest", type=int, default=300, help="fewest warmup + draw iterations of a run: an engine's "
                        "iterations are cut to fit the budget, down to these, before its size is skipped")
    parser.add_argument("--overhead", type=float, default=240.0, help="seconds a run may add (start, compile)")
    parser.add_argument("--memory-gb", type=float, default=3.0, help="most recorded f draws a run may hold")
    parser.add_argument("--repeats", type=int, default=10, help="fewest gradient calls timed per size")
    parser.add_argument("--pymc-python", default="/tmp/bench-pymc/bin/python")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--worker", choices=ENGINES + ("gpdsl-gradient", "pymc-gradient"), help=argparse.SUPPRESS)
    parser.add_argument("--likelihood", help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--dim", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--warmup", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--draws", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)

    have_pymc = os.path.exists(args.pymc_python)
    pythons = {e: sys.executable for e in ENGINES}
    pythons["pymc"] = args.pymc_python
    engines = [e for e in args.engines if e != "pymc" or have_pymc]
    print(f"{CHAINS} chains each; min bulk ESS over the hyperparameters per second of warmup + sampling; ratio = "
          f"gpdsl's better engine's ESS/s over the peer's; m = {BASIS}, c = {C}; budget {args.budget:g} s per run")
    if not have_pymc:
        print(f"pymc: no interpreter at {args.pymc_python!r}; its rows are skipped")
    table = {}
    header = (f"{'likelihood':<10}{'D':>2}{'N':>8}  {'engine':<6}{'warmup+draws':>13}{'s':>9}{'compile s':>10}"
              f"{'min ESS':>9}{'max R^':>7}{'ESS/s':>9}{'gpdsl/this':>11}")
    print(header, flush=True)
    for likelihood in args.likelihoods:
        for dim in args.dims:
            previous = {}
            for n in args.sizes:
                key = (likelihood, dim, n)
                for engine in engines:
                    warmup, draws = schedule(engine, args)
                    if engine != "pymc":
                        draws = min(draws, max(100, int(args.memory_gb * 1e9 / (3 * 8 * n * CHAINS))))
                    label = f"{likelihood:<10}{dim:>2}{n:>8}  {engine:<6}{f'{warmup}+{draws}':>13}"
                    if engine in previous:
                        was_n, was_seconds, was_iterations = previous[engine]
                        per_iteration = was_seconds * n / was_n / was_iterations
                        if per_iteration * args.fewest > args.budget:
                            print(f"{label}  skipped: {args.fewest} iterations would take about "
                                  f"{per_iteration * args.fewest:.0f} s > --budget {args.budget:g}", flush=True)
                            continue
                        cut = min(1.0, args.budget / (per_iteration * (warmup + draws)))
                        warmup, draws = max(args.fewest // 2, int(warmup * cut)), max(args.fewest // 2, int(draws * cut))
                        label = f"{likelihood:<10}{dim:>2}{n:>8}  {engine:<6}{f'{warmup}+{draws}':>13}"
                    result, why = launch(pythons[engine], [
                        "--worker", engine, "--likelihood", likelihood, "--n", str(n), "--dim", str(dim),
                        "--warmup", str(warmup), "--draws", str(draws), "--seed", str(args.seed)],
                        args.budget + args.overhead)
                    if result is None:
                        print(f"{label}  {why}", flush=True)
                        previous[engine] = (n, args.budget + 1.0, warmup + draws)
                        continue
                    previous[engine] = (n, result["seconds"], warmup + draws)
                    table[key + (engine,)] = result
                    print(f"{label}{result['seconds']:>9.1f}{result['compile']:>10.1f}{result['ess']:>9.0f}"
                          f"{result['rhat']:>7.3f}{result['ess'] / result['seconds']:>9.2f}"
                          f"{ratio_cell(table, key, engine) if engine not in GPDSL_ENGINES else '':>11}", flush=True)

    print(f"\ngradient of the log density (unconstrained, all parameters and weights), median of at least {args.repeats} calls and 1 s")
    for likelihood in args.likelihoods:
        for dim in args.dims:
            times = {}
            for name, python in (("gpdsl", sys.executable), ("pymc", args.pymc_python)):
                if name == "pymc" and not have_pymc:
                    continue
                result, why = launch(python, ["--worker", f"{name}-gradient", "--likelihood", likelihood,
                                              "--dim", str(dim), "--repeats", str(args.repeats), "--sizes",
                                              *map(str, args.sizes)], args.budget + args.overhead)
                times[name] = result or {}
                if why:
                    print(f"{likelihood} D={dim} {name}: {why}")
            for n in args.sizes:
                ours, theirs = times.get("gpdsl", {}).get(str(n)), times.get("pymc", {}).get(str(n))
                cells = [f"{ours * 1e3:.2f} ms ({ours / n * 1e9:.0f} ns/point)" if ours else "-",
                         f"{theirs * 1e3:.2f} ms ({theirs / n * 1e9:.0f} ns/point)" if theirs else "-",
                         f"{ours / theirs:.2f}" if ours and theirs else "-"]
                print(f"{likelihood:<10}{dim:>2}{n:>8}  gpdsl {cells[0]:>26}  pymc {cells[1]:>26}  "
                      f"gpdsl/pymc {cells[2]}", flush=True)


if __name__ == "__main__":
    main()
