"""The minibatch variational GPLVM's cost per step and per epoch as N grows, its time to a stable bound (issue 19, P7).

Synthetic data: Q = 5 latent dimensions mapped to D = 20 outputs through a random tanh layer, plus noise.
For each N the fit (:func:`gpdsl.inference.variational.minibatch_gplvm.fit_minibatch_gplvm`, M = 50) runs
``--steps`` Adam steps on minibatches of ``--batch-size`` rows (``q(X)`` updated lazily, only the batch's
rows); printed: the time to the first chunk (the start: PCA, the Psi statistics of all rows for the optimal
q(u), compilation), the time per step measured over the later chunks, the time per epoch (N // B steps), the
peak resident memory, and the last chunk's mean bound per point. With ``--epochs E`` each size runs ``E``
epochs instead, one chunk an epoch, the noise held for the first ``--noise-fixed-epochs``, and the mean
minibatch bound per point of every epoch is printed with the time to a stable bound: the first epoch from
which every epoch's mean stays within ``--tolerance`` nats per point of the last one. The issue's target is a
stable bound on 100,000 points in under 10 minutes with under 4 GB, and time per epoch linear in N. Figures
on a shared machine are noisy.

Run: ``python benchmarks/minibatch_gplvm.py [--sizes 10000 100000] [--steps 600] [--batch-size 1000]``, or
``python benchmarks/minibatch_gplvm.py --sizes 100000 --epochs 300`` for the time to a stable bound.

A benchmark of the engine's internals: each chunk is timed through the ``report`` callback of the engine's
:func:`gpdsl.inference.variational.minibatch_gplvm.fit_minibatch_gplvm`, called directly on the model's view
(:func:`gpdsl.inference.families.gplvm.gplvm_problem`); the model, data and settings come from the public API
(``gpdsl.check``, ``gpdsl.load_data``, ``gpdsl.settings``).
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
    """``n`` rows of ``D`` centred outputs: ``tanh(X W) + 0.1 noise`` with ``X`` (n x Q) and ``W`` standard normal."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, Q))
    Y = np.tanh(X @ rng.normal(size=(Q, D))) + 0.1 * rng.normal(size=(n, D))
    return Y - Y.mean(0)


def run(n: int, steps: int, batch_size: int, chunk: int, noise_fixed_steps: int):
    """Fit ``n`` synthetic rows; the fit and ``(steps done, seconds since the start, mean bound)`` of each chunk."""
    import gpdsl
    from gpdsl.inference.families.gplvm import gplvm_problem
    from gpdsl.inference.variational.minibatch_gplvm import fit_minibatch_gplvm
    from gpdsl.settings import VEMSettings

    model, _ = gpdsl.check(os.path.join(os.path.dirname(__file__), "..", "models", "bayesian_gplvm.gpm"))
    Y = synthetic(n)
    data, _ = gpdsl.load_data({"N": n, "D": Y.shape[1], "Q": 5, "Y": Y}, model)
    problem = gplvm_problem(model, data)
    chunks = []
    started = time.perf_counter()
    fit = fit_minibatch_gplvm(problem, VEMSettings(num_inducing=50, seed=0), batch_size=batch_size,
                              noise_fixed_steps=noise_fixed_steps, steps=steps - noise_fixed_steps,
                              learning_rate=0.01, chunk=chunk,
                              report=lambda done, value: chunks.append((done, time.perf_counter() - started,
                                                                        value)))
    return fit, chunks


def per_step(chunks) -> float:
    """Seconds per step over the chunks after the first (which holds the start and the compilation)."""
    return (chunks[-1][1] - chunks[1][1]) / (chunks[-1][0] - chunks[1][0])


def stable_from(values, tolerance: float) -> int:
    """The first index from which every value is within ``tolerance`` of the last."""
    outside = np.flatnonzero(np.abs(np.asarray(values) - values[-1]) > tolerance)
    return 0 if outside.size == 0 else int(outside[-1]) + 1


def peak_gb() -> float:
    """Peak resident memory of this process so far, in GB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2


def report_epochs(n: int, fit, chunks, tolerance: float, every: int) -> None:
    """Print the epochs' mean bounds per point and the time to a stable bound."""
    values = [value / n for _, _, value in chunks]
    for epoch, (_, seconds, _) in enumerate(chunks, start=1):
        if epoch % every == 0 or epoch == len(chunks):
            print(f"  epoch {epoch}: {seconds:.1f} s, mean bound per point {values[epoch - 1]:.4f}")
    stable = stable_from(values, tolerance)
    print(f"N = {n}: {len(chunks)} epochs in {chunks[-1][1]:.1f} s ({chunks[-1][1] / len(chunks):.2f} s an epoch, "
          f"start included); the epochs' mean bound per point is within {tolerance} of the last epoch's "
          f"({values[-1]:.4f}) from epoch {stable + 1}, reached after {chunks[stable][1]:.1f} s; whole-data bound "
          f"per point {fit.bound / n:.4f}; peak memory {peak_gb():.2f} GB")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--chunk", type=int, default=100)
    parser.add_argument("--epochs", type=int, default=0, help="run this many epochs and report the time to a "
                                                               "stable bound (instead of --steps)")
    parser.add_argument("--noise-fixed-epochs", type=int, default=10)
    parser.add_argument("--tolerance", type=float, default=0.05, help="nats per point")
    parser.add_argument("--every", type=int, default=10, help="print every this many epochs")
    args = parser.parse_args(argv)
    rows = []
    for n in args.sizes:
        if args.epochs:
            per_epoch = n // args.batch_size
            fit, chunks = run(n, args.epochs * per_epoch, args.batch_size, per_epoch,
                              args.noise_fixed_epochs * per_epoch)
            report_epochs(n, fit, chunks, args.tolerance, args.every)
            continue
        fit, chunks = run(n, args.steps, args.batch_size, args.chunk, args.chunk)
        step = per_step(chunks)
        epoch = step * (n // args.batch_size)
        rows.append((n, epoch))
        print(f"N = {n}: first chunk after {chunks[0][1]:.1f} s (start and compilation included), {1e3 * step:.1f} ms "
              f"per step of {args.batch_size} rows, {epoch:.2f} s per epoch; peak memory so far {peak_gb():.2f} GB; "
              f"last chunk's mean bound per point {chunks[-1][2] / n:.3f}, whole-data bound per point "
              f"{fit.bound / n:.3f} after {fit.steps} steps")
    if len(rows) > 1:
        (n0, e0), (n1, e1) = rows[0], rows[-1]
        print(f"time per epoch grew {e1 / e0:.2f}x for {n1 / n0:.0f}x the points (linear: {n1 / n0:.0f}x)")


if __name__ == "__main__":
    main()
