"""Time of a gibbs iteration on a latent Poisson GP over a space-time grid by Kronecker algebra, against the dense one.

The model is ``models/gp_grid_poisson.gpm``: ``y ~ poisson_log(log_exposure + f)``, ``f ~ gp((t, x), sigma * rbf(t)
* matern32(x))`` on an ``n x n`` grid, counts drawn from a smooth space-time intensity. One gibbs iteration is the
method's default (one ESS update of the latent vector, one SURR update of the hyperparameters). On the grid the
family's view samples the whitened vector (:mod:`gpdsl.inference.families.latent_grid`); the dense column runs the
same engine on the dense view (``K`` and its Cholesky factor over all ``N`` rows), at the sizes its ``O(N^3)``
allows. Each time is the median wall time per iteration over ``--iterations`` jitted iterations in blocks of 10,
after compilation and ``--burn`` iterations from the prior draw (reported apart).

Second table: the spread of ``pm``'s estimate ``log p_hat(y | theta)`` (one importance draw each, ``--estimates``
of them, at hyperparameters near the posterior mode) on a small grid, for the Kronecker importance density with the
separable and with the scalar curvature summary against the dense Laplace approximation's; and the time and spread of
one grid estimate at the largest size.

Run: ``python benchmarks/kronecker_gibbs.py [--sizes 30 100] [--dense-sizes 30] [--pm-size 8]``. Wall times on a
shared machine are noisy.
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

jax.config.update("jax_enable_x64", True)

from gpdsl.api import check_file  # noqa: E402
from gpdsl.inference.approximations import kronecker_laplace  # noqa: E402
from gpdsl.inference.families.latent_gp import latent_gp  # noqa: E402
from gpdsl.inference.families.latent_grid import GridLatent, on_grid  # noqa: E402
from gpdsl.inference.mcmc.gibbs import make_gibbs  # noqa: E402
from gpdsl.inference.mcmc.pseudo_marginal import make_latent_estimator  # noqa: E402

MODEL = os.path.join(os.path.dirname(__file__), "..", "models", "gp_grid_poisson.gpm")
THETA = (0.0, 1.0, 0.0)  # unconstrained: sigma = 1, lengthscale_t = e, lengthscale_x = 1 (grid spacing 1)


def grid_data(n: int, seed: int = 0) -> dict:
    """Counts on an ``n x n`` grid of (t, x) in steps of 1 from the log intensity ``1 + sin(t / 4) cos(x / 3)``."""
    rng = np.random.default_rng(seed)
    t, x = (m.ravel() for m in np.meshgrid(np.arange(n, dtype=float), np.arange(n, dtype=float), indexing="ij"))
    exposure = rng.normal(0, 0.1, n * n)
    y = rng.poisson(np.exp(exposure + 1.0 + np.sin(t / 4) * np.cos(x / 3)))
    return {"N": n * n, "t": t, "x": x, "log_exposure": exposure, "y": y}


def views(n: int):
    model, _ = check_file(MODEL)
    dense = latent_gp(model, grid_data(n), "gibbs")
    return dense, on_grid(dense)


def gibbs_timing(problem, iterations: int, burn: int):
    """Median seconds per iteration, compile seconds and the mean ESS shrinks per iteration."""
    init, step = make_gibbs(problem, "surr")

    def block(key, state):
        def one(state, key):
            state, info = step(key, state)
            return state, info.num_shrinks
        return jax.lax.scan(one, state, jax.random.split(key, 10))

    block = jax.jit(block)
    state = init(None, jnp.asarray(THETA))
    started = time.perf_counter()
    state, _ = jax.block_until_ready(block(jax.random.PRNGKey(0), state))
    compile_seconds = time.perf_counter() - started
    for i in range(burn // 10):
        state, _ = jax.block_until_ready(block(jax.random.PRNGKey(1 + i), state))
    times, shrinks = [], []
    for i in range(max(iterations // 10, 1)):
        started = time.perf_counter()
        state, count = jax.block_until_ready(block(jax.random.PRNGKey(1000 + i), state))
        times.append((time.perf_counter() - started) / 10)
        shrinks.append(float(np.mean(count)))
    return statistics.median(times), compile_seconds, float(np.mean(shrinks))


def estimate_spread(n: int, estimates: int):
    """Standard deviation of ``log p_hat`` (one importance draw) for each importance density, and their means."""
    dense, grid = views(n)
    theta = jnp.asarray(THETA)
    keys = jax.random.split(jax.random.PRNGKey(3), estimates)
    rows = {}
    dense_estimate = make_latent_estimator(dense, "laplace", num_importance=1)
    rows["dense Laplace"] = jax.jit(jax.vmap(lambda k: dense_estimate(k, theta).log_marginal))(keys)
    y, offset, args = grid.grid_likelihood_inputs(theta)
    for curvature in ("separable", "scalar"):
        approx = kronecker_laplace.grid_laplace(grid.roots(theta), y, grid.likelihood, args=args, offset=offset,
                                                curvature=curvature)

        def one(key, approx=approx):
            draws, log_ratio = kronecker_laplace.sample(approx, key, 1)
            return grid.log_likelihood(draws[0], theta) + log_ratio[0]

        rows[f"Kronecker, {curvature} W"] = jax.jit(jax.vmap(one))(keys)
    return {name: (float(np.std(values)), float(np.mean(values))) for name, values in rows.items()}


def estimate_time(n: int, repeats: int):
    """Median seconds of one grid ``pm`` estimate (Newton by conjugate gradients, one importance draw), its Newton
    iterations, and the standard deviation of ``log p_hat`` over ``repeats`` estimates."""
    _, grid = views(n)
    estimate = jax.jit(make_latent_estimator(grid, "laplace", num_importance=1))
    theta = jnp.asarray(THETA)
    jax.block_until_ready(estimate(jax.random.PRNGKey(0), theta))
    times, values = [], []
    for i in range(repeats):
        started = time.perf_counter()
        result = jax.block_until_ready(estimate(jax.random.PRNGKey(i + 1), theta))
        times.append(time.perf_counter() - started)
        values.append(float(result.log_marginal))
    return statistics.median(times), int(result.iterations), float(np.std(values))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[30, 100], help="points per grid axis (Kronecker)")
    parser.add_argument("--dense-sizes", type=int, nargs="+", default=[30], help="points per axis for the dense run")
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--burn", type=int, default=100)
    parser.add_argument("--pm-size", type=int, default=8, help="points per axis of the estimator-spread grid")
    parser.add_argument("--estimates", type=int, default=2000)
    parser.add_argument("--large-estimates", type=int, default=100, help="estimates timed at the largest size")
    args = parser.parse_args(argv)
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}")
    print(f"{'grid':>9} {'N':>7} {'kronecker ms':>13} {'(compile s)':>12} {'shrinks':>8} {'dense ms':>10} "
          f"{'(compile s)':>12} {'dense/kron':>10}")
    for n in sorted(set(args.sizes) | set(args.dense_sizes)):
        dense, grid = views(n)
        assert isinstance(grid, GridLatent)
        kron = gibbs_timing(grid, args.iterations, args.burn) if n in args.sizes else None
        full = gibbs_timing(dense, args.iterations, args.burn) if n in args.dense_sizes else None
        cells = [f"{n:>4} x{n:<4}", f"{n * n:>7}"]
        cells += [f"{1e3 * kron[0]:>13.2f}", f"{kron[1]:>12.1f}", f"{kron[2]:>8.1f}"] if kron else [f"{'-':>13}",
                                                                                                   f"{'-':>12}",
                                                                                                   f"{'-':>8}"]
        cells += [f"{1e3 * full[0]:>10.1f}", f"{full[1]:>12.1f}"] if full else [f"{'-':>10}", f"{'-':>12}"]
        cells += [f"{full[0] / kron[0]:>10.0f}"] if kron and full else [f"{'-':>10}"]
        print(" ".join(cells), flush=True)
    n = args.pm_size
    print(f"\npm estimate of log p(y | theta) on a {n} x {n} grid, one importance draw, {args.estimates} estimates:")
    print(f"{'importance density':>24} {'sd log p_hat':>13} {'mean log p_hat':>15}")
    for name, (sd, mean) in estimate_spread(n, args.estimates).items():
        print(f"{name:>24} {sd:>13.3f} {mean:>15.3f}")
    largest = max(args.sizes)
    seconds, iterations, spread = estimate_time(largest, args.large_estimates)
    print(f"\none grid pm estimate at {largest} x {largest}: {seconds:.2f} s ({iterations} Newton iterations); "
          f"sd log p_hat over {args.large_estimates} estimates (separable W, one draw each): {spread:.2f}")


if __name__ == "__main__":
    main()
