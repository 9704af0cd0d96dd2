"""Milliseconds per gibbs iteration on a latent state-space GP under a Poisson likelihood, against the exact GP's gibbs.

One chain of ``gibbs`` (:func:`gpdsl.inference.mcmc.gibbs.make_gibbs`: one elliptical slice update of the innovations
and one SURR update of the hyperparameters per iteration, the method's defaults) on daily counts, ``models/
gp_state_space_poisson.gpm`` at ``--size`` points (default 10^5): the sampled vector is the ``2 N`` innovations, each
evaluation of ``f`` one scan (:mod:`gpdsl.backends.jax.state_space`) and the prior factor the identity's
diagonal (:mod:`gpdsl.inference.mcmc.prior_factor`). ESS searches the image ``f`` of its ellipse, one scan per step
(:func:`gpdsl.inference.mcmc.ess.mapped_ess_step`); the second row recomputes ``f`` at every point it tries, as before.
The peer, run in the same process, is the same model with the
exact GP (``approx = state_space`` removed) at ``--dense-size`` points (default 2000), whose gibbs factorises the
``N x N`` kernel matrix at every hyperparameter proposal. Each figure is the median over ``--repeats`` timed blocks
of ``--iterations`` jitted steps (compilation excluded, reported apart).

Run: ``PYTHONPATH=. python benchmarks/state_space_gibbs.py [--size 100000] [--dense-size 2000]``. Wall times on a
shared machine are noisy.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from gpdsl.api import check_text  # noqa: E402
from gpdsl.data.validation import validate_data  # noqa: E402
from gpdsl.inference.families.latent_gp import latent_gp_view  # noqa: E402
from gpdsl.inference.mcmc.gibbs import make_gibbs  # noqa: E402
from gpdsl.ir.families import LATENT_GP, STATE_SPACE_LATENT_GP, classify  # noqa: E402

MODEL = (Path(__file__).resolve().parents[1] / "models" / "gp_state_space_poisson.gpm").read_text()


def counts(n: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    t = np.arange(float(n))
    return {"N": n, "t": t, "y": rng.poisson(np.exp(1.0 + 0.8 * np.sin(t / 30.0)))}


def view(text: str, family: str, n: int):
    model, _ = check_text(text)
    data = validate_data(model, counts(n))[0]
    return latent_gp_view(model, data, classify(model).facts[family])


THETA = jnp.asarray([1.0, 0.0, 3.0])  # mu, log alpha, log ell


def time_gibbs(problem, iterations: int, repeats: int) -> tuple[float, float, float]:
    """(median ms per iteration, seconds of the first block incl. compilation, mean ESS shrinks per iteration)."""
    init, step = make_gibbs(problem)

    @jax.jit
    def block(key, state):
        def one(state, key):
            state, info = step(key, state)
            return state, info.num_shrinks

        return jax.lax.scan(one, state, jax.random.split(key, iterations))

    state = init(None, THETA)
    start = time.perf_counter()
    state, _ = jax.block_until_ready(block(jax.random.PRNGKey(0), state))
    first = time.perf_counter() - start
    times, shrinks = [], []
    for r in range(repeats):
        start = time.perf_counter()
        state, counts = jax.block_until_ready(block(jax.random.PRNGKey(r + 1), state))
        times.append(1e3 * (time.perf_counter() - start) / iterations)
        shrinks.append(float(np.mean(counts)))
    return statistics.median(times), first, float(np.mean(shrinks))


def time_likelihood(problem, repeats: int) -> float:
    """Median ms of one evaluation of ``log p(y | f(theta, z))`` (what each ESS shrink and hyperparameter proposal
    costs)."""
    evaluate = jax.jit(problem.log_likelihood)
    z = jnp.asarray(np.random.default_rng(0).normal(size=problem.n))
    jax.block_until_ready(evaluate(z, THETA))
    times = []
    for _ in range(max(repeats, 5)):
        start = time.perf_counter()
        jax.block_until_ready(evaluate(z, THETA))
        times.append(1e3 * (time.perf_counter() - start))
    return statistics.median(times)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--dense-size", type=int, default=2000)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    print(f"jax {jax.__version__} on {jax.default_backend()}; gibbs (ESS + SURR), one chain, median of {args.repeats} "
          f"blocks of {args.iterations} iterations (first block incl. compile in brackets)")
    rows = {}
    runs = (("state-space latent GP", MODEL, STATE_SPACE_LATENT_GP, args.size, True),
            ("  f recomputed per point", MODEL, STATE_SPACE_LATENT_GP, args.size, False),
            ("exact GP (dense)", MODEL.replace(", approx = state_space", ""), LATENT_GP, args.dense_size, True))
    for label, text, family, n, image in runs:
        problem = view(text, family, n)
        if not image:
            problem.image = lambda theta: None
        ms, first, shrinks = time_gibbs(problem, args.iterations, args.repeats)
        rows[label] = ms
        print(f"{label:24} N = {n:>7}  {ms:10.2f} ms/iteration  [{first:.1f} s]  "
              f"{time_likelihood(problem, args.repeats):8.2f} ms/likelihood evaluation  {shrinks:5.1f} ESS shrinks")
    ms, per_point, dense_ms = rows.values()
    print(f"ESS on the image of the ellipse / f recomputed at every point tried: {ms / per_point:.3g}x the time per "
          "iteration")
    print(f"state space at N = {args.size} / exact at N = {args.dense_size}: {ms / dense_ms:.3g}x the time per "
          "iteration")

if __name__ == "__main__":
    main()
