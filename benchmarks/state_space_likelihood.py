"""Time of a GP's log marginal likelihood and its gradient in O(N) by the state-space form, against the dense
Cholesky and against tinygp's quasiseparable solver, in one process.

Two kernels over sorted times: Matérn-3/2, and Matérn-3/2 plus a periodic kernel (its cosine series truncated
after ``J = 7`` harmonics, gpdsl's default). Each time is the median wall time of ``--repeats`` calls of the
jitted ``value_and_grad`` with respect to every hyperparameter and the noise variance (compilation excluded,
reported apart). gpdsl is :func:`gpdsl.kernels.kalman.log_marginal_likelihood`; the dense
column is the Cholesky factor of ``K + sigma^2 I`` (gpdsl's kernel matrix, ``jax.grad`` through it); tinygp
runs ``GaussianProcess(..., diag=sigma^2).log_probability`` on its ``quasisep`` kernels, the periodic series
written as the same sum of ``Cosine`` terms (the constant one of period 1e12), so both compute the
same number (the last column checks it).

tinygp is a peer, not a dependency: install it in the benchmark's own place, e.g. ``python3 -m pip install
--no-deps --target /tmp/bench_tinygp tinygp equinox jaxtyping wadler_lindig``, and pass ``--tinygp
/tmp/bench_tinygp`` (the default); without it the tinygp column is skipped with a line saying so.

Run: ``python benchmarks/state_space_likelihood.py [--sizes 1000 10000 100000 1000000] [--repeats 3]``.
A size whose call would exceed ``--budget`` seconds (extrapolated linearly from the size before) is skipped with a
line, and tinygp where its scan would hold more than ``--memory-gb`` of residuals (gpdsl's checkpointed scan holds
a few megabytes). Wall times on a shared machine
are noisy.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from gpdsl.kernels import kalman  # noqa: E402
from gpdsl.kernels import Matern32, Periodic  # noqa: E402
from gpdsl.kernels.state_space import PERIODIC_ORDER  # noqa: E402
from gpdsl.numerics.linalg import cholesky  # noqa: E402

PERIOD = 7.0
KERNELS = {
    "matern32": {"theta": (1.0, 3.0), "state": 2},
    "matern32 + periodic": {"theta": (1.0, 3.0, 0.5, 0.8), "state": 2 + 2 * PERIODIC_ORDER + 1},
}


def gpdsl_kernel(name, theta):
    if name == "matern32":
        return Matern32(theta[0], theta[1])
    return Matern32(theta[0], theta[1]) + Periodic(theta[2], theta[3], PERIOD)


def make_gpdsl(name, times):
    """The times are data, sorted once outside the traced function (:func:`gpdsl.kernels.kalman.time_grid`), as
    gpdsl's models do: the filter then runs over the distinct steps in checkpointed segments."""
    grid = kalman.time_grid(np.asarray(times))

    def log_likelihood(theta, noise, times, y):
        return kalman.log_marginal_likelihood(gpdsl_kernel(name, theta), grid, y, noise)

    return jax.jit(jax.value_and_grad(log_likelihood, argnums=(0, 1)))


def make_dense(name):
    def log_likelihood(theta, noise, times, y):
        K = gpdsl_kernel(name, theta)(times[:, None])
        factor = cholesky(K + noise * jnp.eye(times.size))
        half = jax.scipy.linalg.solve_triangular(factor, y, lower=True)
        return -0.5 * half @ half - jnp.log(jnp.diag(factor)).sum() - 0.5 * times.size * jnp.log(2 * jnp.pi)

    return jax.jit(jax.value_and_grad(log_likelihood, argnums=(0, 1)))


def make_tinygp(name):
    from tinygp import GaussianProcess
    from tinygp.kernels import quasisep

    def kernel(theta):
        matern = quasisep.Matern32(scale=theta[1], sigma=jnp.sqrt(theta[0]))
        if name == "matern32":
            return matern
        coefficients, _ = Periodic(theta[2], theta[3], PERIOD).series_coefficients(PERIODIC_ORDER)
        total = matern + quasisep.Cosine(scale=1e12, sigma=jnp.sqrt(coefficients[0]))  # the constant term
        for j in range(1, PERIODIC_ORDER + 1):
            total = total + quasisep.Cosine(scale=PERIOD / j, sigma=jnp.sqrt(coefficients[j]))
        return total

    def log_likelihood(theta, noise, times, y):
        return GaussianProcess(kernel(theta), times, diag=noise).log_probability(y)

    return jax.jit(jax.value_and_grad(log_likelihood, argnums=(0, 1)))


def timed(function, arguments, repeats):
    """``(value, compile-and-first-call seconds, median seconds of the repeats)``."""
    started = time.perf_counter()
    value, _ = jax.block_until_ready(function(*arguments))
    first = time.perf_counter() - started
    seconds = []
    for _ in range(repeats):
        started = time.perf_counter()
        jax.block_until_ready(function(*arguments))
        seconds.append(time.perf_counter() - started)
    return float(value), first, statistics.median(seconds)


def data(n, seed=0):
    rng = np.random.default_rng(seed)
    times = np.sort(rng.uniform(0.0, n / 10.0, n))
    y = np.sin(times / 3.0) + 0.5 * np.sin(2 * np.pi * times / PERIOD) + 0.3 * rng.normal(size=n)
    return jnp.asarray(times), jnp.asarray(y)


def tinygp_available(path):
    if path and os.path.isdir(path):
        sys.path.append(path)
    try:
        import tinygp  # noqa: F401
        return True
    except ImportError:
        return False


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000, 1_000_000])
    parser.add_argument("--dense-sizes", type=int, nargs="+", default=[1000, 2000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--budget", type=float, default=60.0, help="seconds one call may take")
    parser.add_argument("--memory-gb", type=float, default=6.0, help="most scan residuals a size may hold")
    parser.add_argument("--tinygp", default="/tmp/bench_tinygp", help="a folder holding tinygp (pip --target)")
    args = parser.parse_args()

    have_tinygp = tinygp_available(args.tinygp)
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}; periodic series J = {PERIODIC_ORDER}; "
          f"value and gradient, median of {args.repeats} (first call incl. compile in brackets)")
    if not have_tinygp:
        print(f"tinygp: not importable (looked in {args.tinygp!r}); its column is skipped")
    noise = jnp.asarray(0.09)
    print(f"{'kernel':<22}{'N':>9}  {'gpdsl (s)':>18}  {'dense (s)':>18}  {'tinygp (s)':>18}  "
          f"{'gpdsl/tinygp':>12}  {'dense diff':>10}  {'tinygp diff':>11}")
    for name, spec in KERNELS.items():
        theta = tuple(jnp.asarray(v) for v in spec["theta"])
        previous = None
        for n in sorted(set(args.sizes) | set(args.dense_sizes)):
            residual_gb = 8 * n * spec["state"] ** 2 * 6 / 1e9  # a scan keeping every step's matrices (tinygp's)
            peer_fits = residual_gb <= args.memory_gb
            if not peer_fits:
                print(f"{name:<22}{n:>9}  tinygp skipped: about {residual_gb:.0f} GB of scan residuals "
                      f"(state of {spec['state']}) > --memory-gb {args.memory_gb:g}")
            if previous is not None and previous[1] * n / previous[0] > args.budget:
                print(f"{name:<22}{n:>9}  skipped: a call would take about {previous[1] * n / previous[0]:.0f} s "
                      f"> --budget {args.budget:g}")
                continue
            arguments = (theta, noise, *data(n))
            cells, values = {}, {}
            if n in args.sizes:
                values["gpdsl"], first, gpdsl_median = timed(make_gpdsl(name, arguments[2]), arguments, args.repeats)
                cells["gpdsl"] = f"{gpdsl_median:.4f} [{first:.1f}]"
                previous = (n, gpdsl_median)
            if n in args.dense_sizes:
                values["dense"], first, median = timed(make_dense(name), arguments, args.repeats)
                cells["dense"] = f"{median:.4f} [{first:.1f}]"
            if have_tinygp and peer_fits and n in args.sizes:
                values["tinygp"], first, tiny_median = timed(make_tinygp(name), arguments, args.repeats)
                cells["tinygp"] = f"{tiny_median:.4f} [{first:.1f}]"
                cells["ratio"] = f"{gpdsl_median / tiny_median:.2f}"
                previous = (n, max(gpdsl_median, tiny_median))
            for other in ("dense", "tinygp"):
                if "gpdsl" in values and other in values:
                    cells[other + " diff"] = f"{abs(values['gpdsl'] - values[other]) / abs(values[other]):.1e}"
            print(f"{name:<22}{n:>9}  {cells.get('gpdsl', '-'):>18}  {cells.get('dense', '-'):>18}  "
                  f"{cells.get('tinygp', '-'):>18}  {cells.get('ratio', '-'):>12}  {cells.get('dense diff', '-'):>10}  "
                  f"{cells.get('tinygp diff', '-'):>11}", flush=True)
    print("dense diff, tinygp diff: relative difference of gpdsl's log likelihood from theirs (the dense one is of "
          "the exact periodic kernel, so it includes the series' truncation)")


if __name__ == "__main__":
    main()
