"""Time per bound evaluation: the dynamical GPLVM against the standard Bayesian GPLVM on the same data.

Target (issue 16): at most 2x the standard model's time per evaluation of the bound and its gradient at
N = 1000. The dynamical bound needs, per latent dimension, a factorisation of ``B = I + L^1/2 K L^1/2``
over the points the prior couples: O(N^3) for one sequence of N frames, O(sum n_b^3) for independent
sequences written with ``same(sequence)``, against O(N M^2) for the standard model. Rows: the standard
model, the dynamical model with S independent sequences of N / S frames (S = 1 is one dense sequence).

Then the same comparison for a Matérn-3/2 time prior (``matern32(t, lengthscale = ell) [* same(sequence)] +
white(1e-6)``), whose ``q(X)`` the engine evaluates by state-space recursions in O(N)
(:mod:`gpdsl.inference.variational.markov_q`): rows for the dense family forced on it
(``GPPriorGaussian``) and the Markov family with its default blocked scan (about sqrt(N) sequential
steps) and with one sequential scan (``--families ... parallel`` adds ``jax.lax.associative_scan``).

Run: ``python benchmarks/dynamical_bound.py [--N 1000] [--Q 5] [--M 30] [--repeat 10]``; prints a table
of seconds per evaluation (compiled; compilation reported separately) and the ratio to the standard
model's.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.flatten_util import ravel_pytree  # noqa: E402

from gpdsl.api import check_text, load_model  # noqa: E402
from gpdsl.data_io import load_data  # noqa: E402
from gpdsl.inference.families.gplvm import gplvm_problem  # noqa: E402
from gpdsl.inference.methods.vem import VEMSettings  # noqa: E402
from gpdsl.inference.variational.gp_prior_q import GPPriorGaussian  # noqa: E402
from gpdsl.inference.variational.markov_q import MarkovGaussian  # noqa: E402
from gpdsl.inference.variational.vem import initial_params, make_objective  # noqa: E402

SEQUENCES = (REPO / "models" / "dynamical_gplvm.gpm").read_text().replace(
    "  vector[N] t;\n", "  vector[N] t;\n  array[N] int<lower=1> sequence;\n").replace(
    "X ~ gp(t, rbf(lengthscale = ell) + white(1e-6));",
    "X ~ gp((t, sequence), rbf(t, lengthscale = ell) * same(sequence) + white(1e-6));")
MATERN = SEQUENCES.replace("rbf(t, lengthscale = ell)", "matern32(t, lengthscale = ell)")


def simulated(N: int, D: int, sequences: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    length = N // sequences
    t = np.tile(np.linspace(0.0, 1.0, length), sequences)
    phases = np.repeat(rng.uniform(0, 2 * np.pi, sequences), length)
    latent = np.stack([np.sin(6 * t + phases), np.cos(4 * t + phases)], axis=1)
    Y = np.tanh(latent @ rng.normal(size=(2, D))) + 0.05 * rng.normal(size=(N, D))
    return {"N": N, "D": D, "t": t, "sequence": np.repeat(np.arange(1, sequences + 1), length), "Y": Y}


def latent_family(problem, family: str):
    """``problem.latent_q()`` (``"default"``), the dense family (``"dense"``) or the Markov one with the
    ``"sequential"`` or ``"parallel"`` (associative) scan instead of the default blocked one."""
    latent_q = problem.latent_q()
    if family == "dense":
        return GPPriorGaussian(problem.latent_prior_covariance, problem.latent_prior_blocks())
    if family in ("sequential", "parallel"):
        assert isinstance(latent_q, MarkovGaussian)
        latent_q = copy.copy(latent_q)
        latent_q.method = family
    return latent_q


def seconds_per_evaluation(model, values, settings, repeat: int, family: str = "default") -> tuple[float, float]:
    data, _ = load_data(values, model)
    problem = gplvm_problem(model, data)
    latent_q = latent_family(problem, family)
    params = initial_params(problem, settings, latent_q)
    flat, unravel = ravel_pytree(params)
    objective = make_objective(problem, settings, latent_q)
    value_and_grad = jax.jit(jax.value_and_grad(lambda x: objective(unravel(x))))
    start = time.perf_counter()
    jax.block_until_ready(value_and_grad(flat))
    compile_seconds = time.perf_counter() - start
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        jax.block_until_ready(value_and_grad(flat))
        times.append(time.perf_counter() - start)
    return float(np.median(times)), compile_seconds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--N", type=int, default=1000)
    parser.add_argument("--D", type=int, default=12)
    parser.add_argument("--Q", type=int, default=5)
    parser.add_argument("--M", type=int, default=30)
    parser.add_argument("--sequences", type=int, nargs="*", default=[1, 5, 10, 20, 50])
    parser.add_argument("--matern-sequences", type=int, nargs="*", default=[1, 10])
    parser.add_argument("--families", nargs="*", default=["dense", "default", "sequential"],
                        help="q(X) families for the Matérn-3/2 rows: dense, default (blocked scan), sequential, parallel "
                             "(jax.lax.associative_scan; minutes to compile at N = 1000)")
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args(argv)
    settings = VEMSettings(num_inducing=args.M, seed=0)
    standard = load_model(str(REPO / "models" / "bayesian_gplvm.gpm"))
    dynamical = check_text(SEQUENCES, "dynamical_sequences.gpm")[0]
    rows = []
    base_values = simulated(args.N, args.D, 1)
    standard_values = {"N": args.N, "D": args.D, "Q": args.Q, "Y": base_values["Y"]}
    base, compile_seconds = seconds_per_evaluation(standard, standard_values, settings, args.repeat)
    rows.append(("standard Bayesian GPLVM", base, compile_seconds))
    for count in args.sequences:
        values = {**simulated(args.N, args.D, count), "Q": args.Q}
        per_eval, compile_seconds = seconds_per_evaluation(dynamical, values, settings, args.repeat)
        rows.append((f"dynamical, {count} sequence(s) of {args.N // count}", per_eval, compile_seconds))
    matern = check_text(MATERN, "dynamical_matern32.gpm")[0]
    names = {"dense": "dense GPPriorGaussian", "default": "Markov, blocked scan", "sequential": "Markov, sequential scan",
             "parallel": "Markov, associative scan"}
    for count in args.matern_sequences:
        values = {**simulated(args.N, args.D, count), "Q": args.Q}
        for family in args.families:
            per_eval, compile_seconds = seconds_per_evaluation(matern, values, settings, args.repeat, family)
            rows.append((f"dynamical Matérn-3/2, {count} sequence(s) of {args.N // count}, {names[family]}",
                         per_eval, compile_seconds))
    print(f"N = {args.N}, D = {args.D}, Q = {args.Q}, M = {args.M}, analytic Psi statistics; bound and gradient, "
          f"median of {args.repeat} compiled evaluations; {jax.device_count()} CPU device(s)")
    print("| model | s per evaluation | ratio to standard | compile s |")
    print("| --- | --- | --- | --- |")
    for name, seconds, compile_seconds in rows:
        print(f"| {name} | {seconds:.4f} | {seconds / base:.1f} | {compile_seconds:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
