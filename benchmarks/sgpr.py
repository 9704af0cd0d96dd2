"""SGPR on a 10,000-point regression (M = 100): gpdsl's time to reach GPy's final bound against GPy's time.

Both fit the same data from the same start: an ARD RBF kernel with variance and length-scales 1, noise
variance 1 (GPy's defaults), and the same 100 training inputs (a seeded random subset) as inducing inputs.
GPy runs ``SparseGPRegression.optimize()`` (L-BFGS-B, at most 1000 iterations); gpdsl runs
``gpdsl fit --method sgpr``'s fit (L-BFGS, ``--inducing-init random``) through the library, compilation
included in its time. Printed: GPy's final bound and time, the time gpdsl took to first reach that bound
(within ``--tolerance`` nats), gpdsl's own final bound and time, and the ratio of the two times measured in
this run (the target is gpdsl at most 1/5 of GPy's time).

Run: ``python benchmarks/sgpr.py [--n 10000] [--m 100] [--seed 0]``. Wall times on a shared machine are noisy.

gpdsl's fit is ``gpdsl.run(..., "sgpr", keep_state=True)``'s (its trace of bounds and times); the engine's
:func:`gpdsl.inference.variational.inducing_inputs.initial_inducing_inputs` gives GPy the same inducing inputs.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

MODEL = """
data {
  int N;
  int D;
  matrix[N, D] X;
  vector[N] y;
}
parameters {
  real<lower=0> variance;
  vector<lower=0>[D] lengthscale;
  real<lower=0> noise;
}
model {
  f ~ gp(X, variance * rbf(lengthscale = lengthscale));
  y ~ normal(f, noise);
}
"""


def regression_data(n: int, seed: int):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, size=(n, 3))
    y = np.sin(X[:, 0]) * np.cos(X[:, 1]) + 0.2 * X[:, 2] + 0.1 * rng.normal(size=n)
    return X, (y - y.mean()) / y.std()


def run_gpy(X, y, Z):
    import GPy

    model = GPy.models.SparseGPRegression(X, y[:, None], kernel=GPy.kern.RBF(X.shape[1], ARD=True), Z=Z.copy())
    started = time.perf_counter()
    model.optimize(max_iters=1000)
    return float(np.asarray(model.log_likelihood()).item()), time.perf_counter() - started


def run_gpdsl(X, y, m: int, seed: int):
    import gpdsl
    from gpdsl.settings import SGPRSettings

    model, _ = gpdsl.check(MODEL)
    data, _ = gpdsl.load_data({"N": len(y), "D": X.shape[1], "X": X, "y": y}, model)
    started = time.perf_counter()
    _, fit = gpdsl.run(model, data, "sgpr", SGPRSettings(num_inducing=m, inducing_init="random", seed=seed),
                       seed=seed, keep_state=True)
    return fit, started


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--m", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tolerance", type=float, default=0.1, help="nats below GPy's final bound that count as "
                                                                      "reaching it")
    args = parser.parse_args(argv)

    from gpdsl.inference.variational.inducing_inputs import initial_inducing_inputs

    X, y = regression_data(args.n, args.seed)
    Z = initial_inducing_inputs(X, args.m, "random", args.seed)
    fit, _ = run_gpdsl(X, y, args.m, args.seed)
    np.testing.assert_array_equal(initial_inducing_inputs(X, args.m, "random", args.seed), Z)
    gpy_bound, gpy_seconds = run_gpy(X, y, Z)
    print(f"SGPR, N = {args.n}, M = {args.m}, ARD RBF on 3 inputs, same start and inducing inputs")
    print(f"GPy {__import__('GPy').__version__}: final bound {gpy_bound:.4f} in {gpy_seconds:.1f} s")
    print(f"gpdsl: final bound {fit.bound:.4f} in {fit.report['seconds']:.1f} s "
          f"({fit.report['iterations']} iterations, {fit.report['evaluations']} evaluations: {fit.report['message']})")
    for tolerance in sorted({0.0, args.tolerance}):
        reached = np.flatnonzero(fit.trace >= gpy_bound - tolerance)
        if reached.size:
            seconds = fit.times[reached[0]]
            print(f"gpdsl reached GPy's final bound (within {tolerance} nats) after {seconds:.1f} s, iteration "
                  f"{reached[0]} (compilation included): ratio gpdsl / GPy time {seconds / gpy_seconds:.3f} "
                  "(target <= 0.2)")
        else:
            print(f"gpdsl did not reach GPy's final bound within {tolerance} nats (best {fit.trace.max():.4f})")


if __name__ == "__main__":
    main()
