"""The minibatch variational GPLVM's cost per step and per epoch as N grows (issue 19's P7, short form).

Synthetic data: Q = 5 latent dimensions mapped to D = 20 outputs through a random tanh layer, plus noise.
For each N the fit (:func:`gpdsl.inference.variational.minibatch_gplvm.fit_minibatch_gplvm`, M = 50) runs
``--steps`` Adam steps on minibatches of ``--batch-size`` rows; printed: the time to the first step (the
start: PCA, the Psi statistics of all rows for the optimal q(u), compilation), the time per step measured over
the later chunks, the time per epoch (N / B steps), the peak resident memory, and the last chunk's mean bound per
point. The issue's target is a stable bound on 100,000 points in under 10 minutes with under 4 GB, and time per
epoch linear in N. Figures on a shared machine are noisy.

Run: ``python benchmarks/minibatch_gplvm.py [--sizes 10000 100000] [--steps 600] [--batch-size 1000]``.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))


def synthetic(n: int, seed: int = 0, D: int = 20, Q: int = 5):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, Q))
    Y = np.tanh(X @ rng.normal(size=(Q, D))) + 0.1 * rng.normal(size=(n, D))
    return Y - Y.mean(0)


def run(n: int, steps: int, batch_size: int, chunk: int):
    from gpdsl.api import check_file
    from gpdsl.data_io import load_data
    from gpdsl.inference.families.gplvm import gplvm_problem
    from gpdsl.inference.methods.vem import VEMSettings
    from gpdsl.inference.variational.minibatch_gplvm import fit_minibatch_gplvm

    model, _ = check_file(os.path.join(os.path.dirname(__file__), "..", "models", "bayesian_gplvm.gpm"))
    Y = synthetic(n)
    data, _ = load_data({"N": n, "D": Y.shape[1], "Q": 5, "Y": Y}, model)
    problem = gplvm_problem(model, data)
    times = []
    started = time.perf_counter()
    fit = fit_minibatch_gplvm(problem, VEMSettings(num_inducing=50, seed=0), batch_size=batch_size,
                              noise_fixed_steps=chunk, steps=steps - chunk, learning_rate=0.01, chunk=chunk,
                              report=lambda steps, value: times.append((steps, time.perf_counter(), value)))
    first = times[0][1] - started
    per_step = (times[-1][1] - times[1][1]) / (times[-1][0] - times[1][0])
    return first, per_step, fit, times[-1][2]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--chunk", type=int, default=100)
    args = parser.parse_args(argv)
    rows = []
    for n in args.sizes:
        first, per_step, fit, last = run(n, args.steps, args.batch_size, args.chunk)
        epoch = per_step * n / args.batch_size
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2
        rows.append((n, epoch))
        print(f"N = {n}: first chunk after {first:.1f} s (start and compilation included), {1e3 * per_step:.1f} ms "
              f"per step of {args.batch_size} rows, {epoch:.1f} s per epoch; peak memory so far {peak:.2f} GB; "
              f"last chunk's mean bound per point {last / n:.3f}, whole-data bound per point {fit.bound / n:.3f} "
              f"after {fit.steps} steps")
    if len(rows) > 1:
        (n0, e0), (n1, e1) = rows[0], rows[-1]
        print(f"time per epoch grew {e1 / e0:.2f}x for {n1 / n0:.0f}x the points (linear: {n1 / n0:.0f}x)")


if __name__ == "__main__":
    main()
