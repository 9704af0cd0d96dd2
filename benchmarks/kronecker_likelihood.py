"""Time of a grid GP's log marginal likelihood and its gradient by Kronecker algebra, against the dense Cholesky.

The kernel is ``v * rbf(t, lengthscale = a) * matern32(x, lengthscale = b)`` on an ``n x n`` grid of ``(t, x)``
with iid Gaussian noise. Each time is the median wall time of ``--repeats`` calls of the jitted ``value_and_grad``
with respect to ``(v, a, b, s^2)`` (compilation excluded, reported apart). gpdsl is
:func:`gpdsl.inference.approximations.kronecker.log_marginal_likelihood` on the two ``n x n`` factors; the dense
column is the Cholesky factor of the full ``K + s^2 I`` (``jax.grad`` through it), run only where its
extrapolated time (cubic in ``N`` from the size before) stays under ``--budget`` seconds and its matrix under
``--memory-gb``. Where both run, the last column is their relative difference in the log marginal likelihood.

Run: ``python benchmarks/kronecker_likelihood.py [--sizes 30 60 100] [--repeats 3]``. Wall times on a shared
machine are noisy.
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

from gpdsl.inference.approximations import kronecker  # noqa: E402
from gpdsl.kernels import RBF, Matern32  # noqa: E402
from gpdsl.numerics.linalg import cholesky, solve_triangular  # noqa: E402

THETA = (1.3, 0.8, 0.5)
NOISE = 0.1


def factors(theta, t, x):
    return RBF(theta[0], theta[1])(t[:, None]), Matern32(1.0, theta[2])(x[:, None])


def kronecker_lml(theta, noise, t, x, y):
    return kronecker.log_marginal_likelihood(factors(theta, t, x), noise, y)


def dense_lml(theta, noise, t, x, y):
    k_t, k_x = factors(theta, t, x)
    K = jnp.kron(k_t, k_x) + noise * jnp.eye(y.size)
    L = cholesky(K)
    alpha = solve_triangular(L, y, lower=True)
    return -0.5 * alpha @ alpha - jnp.sum(jnp.log(jnp.diag(L))) - 0.5 * y.size * jnp.log(2 * jnp.pi)


def timed(function, args, repeats):
    started = time.perf_counter()
    value = jax.block_until_ready(function(*args))
    compile_seconds = time.perf_counter() - started
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        jax.block_until_ready(function(*args))
        times.append(time.perf_counter() - started)
    return float(value[0]), statistics.median(times), compile_seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[30, 60, 100], help="points per grid axis")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--budget", type=float, default=60.0, help="largest extrapolated dense call, seconds")
    parser.add_argument("--memory-gb", type=float, default=2.0, help="largest dense matrix, GB")
    args = parser.parse_args(argv)

    kron_call = jax.jit(jax.value_and_grad(kronecker_lml, argnums=(0, 1)))
    dense_call = jax.jit(jax.value_and_grad(dense_lml, argnums=(0, 1)))
    rng = np.random.default_rng(0)
    print(f"{'grid':>9} {'N':>7} {'kronecker s':>12} {'(compile)':>10} {'dense s':>10} {'(compile)':>10} "
          f"{'dense/kron':>10} {'rel. diff':>10}")
    last_dense = None
    for n in args.sizes:
        t, x = jnp.asarray(np.sort(rng.uniform(0, 10, n))), jnp.asarray(np.sort(rng.uniform(0, 5, n)))
        y = jnp.asarray(rng.normal(size=n * n))
        inputs = (jnp.asarray(THETA), NOISE, t, x, y)
        kron_value, kron_seconds, kron_compile = timed(kron_call, inputs, args.repeats)
        forecast = None if last_dense is None else last_dense[1] * (n * n / last_dense[0]) ** 3
        memory = 8 * (n * n) ** 2 * 3 / 1e9
        if memory > args.memory_gb or (forecast is not None and forecast > args.budget):
            why = f"matrices {memory:.1f} GB" if memory > args.memory_gb else f"forecast {forecast:.0f} s"
            print(f"{n:>4} x{n:<4} {n * n:>7} {kron_seconds:>12.4f} {kron_compile:>10.2f} "
                  f"{'skipped':>10} ({why})")
            continue
        dense_value, dense_seconds, dense_compile = timed(dense_call, inputs, args.repeats)
        last_dense = (n * n, dense_seconds)
        print(f"{n:>4} x{n:<4} {n * n:>7} {kron_seconds:>12.4f} {kron_compile:>10.2f} {dense_seconds:>10.3f} "
              f"{dense_compile:>10.2f} {dense_seconds / kron_seconds:>10.0f} "
              f"{abs(kron_value - dense_value) / abs(dense_value):>10.1e}")


if __name__ == "__main__":
    main()
