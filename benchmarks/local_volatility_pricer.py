"""The option-pricing likelihood of Tegner et al. (2018, Sec. 4.2): the JAX pricer against the NumPy one.

Both solve the same Dupire PDE by Crank-Nicolson (300 strike nodes, Rannacher start-up). The NumPy pricer
(:func:`gpdsl.testing.external_likelihoods.call_price_log_likelihood`) runs through a host callback, one state at
a time; the JAX pricer (:func:`gpdsl.testing.local_volatility.call_price_log_likelihood`) compiles with the
sampler. Measured on one date of the case study's data (75 options):

1. one likelihood evaluation inside a compiled function, and a batch of ``--batch`` states under ``vmap``;
2. with ``--whole``: the case study's whole pricing run at ``--size`` (default ``reduced``: T = 12, M = 100) with
   each pricer, one after the other (``case_studies/tegner2018_sequential/run.py pricing --pricer ...``).

Prints the seconds of each and the NumPy / JAX ratio. Run: ``python benchmarks/local_volatility_pricer.py
[--whole]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from case_studies.tegner2018_sequential.option_data import simulate_options  # noqa: E402
from gpdsl.externals import External  # noqa: E402
from gpdsl.testing import external_likelihoods, local_volatility  # noqa: E402


def best_of(function, repeats: int) -> float:
    """The least of ``repeats`` timings of ``function()`` after one call to compile it."""
    jax.block_until_ready(function())
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        jax.block_until_ready(function())
        times.append(time.perf_counter() - started)
    return min(times)


def evaluations(batch: int, repeats: int) -> dict:
    data, truth = simulate_options(12, 2018)
    date = 11
    prices, spot = jnp.asarray(data["c"][date]), float(data["spot"][date])
    host = External("numpy", external_likelihoods.call_price_log_likelihood)
    compiled = External("jax", local_volatility.call_price_log_likelihood)
    numpy_args = (jnp.asarray(data["strike"][date]), jnp.asarray(data["maturity"][date]))
    jax_args = (jnp.asarray(data["strikes"][date]), jnp.asarray(data["maturities"]))
    rng = np.random.default_rng(0)
    volatilities = jnp.asarray(truth["volatility"][date] * np.exp(0.05 * rng.normal(size=(batch, 75))))

    def likelihood(external, extra):
        return lambda vol: external(prices, vol, 0.05, spot, *extra)

    out = {}
    for name, external, extra in (("numpy", host, numpy_args), ("jax", compiled, jax_args)):
        one = jax.jit(likelihood(external, extra))
        many = jax.jit(jax.vmap(likelihood(external, extra)))
        out[name] = {"one": best_of(lambda: one(volatilities[0]), repeats),
                     "batch": best_of(lambda: many(volatilities), max(repeats // 5, 1))}
        out[name]["value"] = float(one(volatilities[0]))
    return out


def whole(size: str) -> dict:
    out = {}
    for pricer in ("numpy", "jax"):
        started = time.perf_counter()
        subprocess.run([sys.executable, str(REPO / "case_studies/tegner2018_sequential/run.py"), "pricing",
                        "--pricing-size", size, "--pricer", pricer, "--device", "cpu"], check=True,
                       stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - started
        suffix = f"_{size}" + ("" if pricer == "jax" else f"_{pricer}")
        result = json.loads((REPO / f"case_studies/tegner2018_sequential/results/pricing{suffix}.json").read_text())
        out[pricer] = {"wall": wall, "step_1": result["seconds_per_step"][0],
                       "steps_2_T": sum(result["seconds_per_step"][1:])}
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--whole", action="store_true", help="also the case study's whole run with each pricer")
    parser.add_argument("--size", default="reduced", choices=("quick", "reduced", "paper"))
    args = parser.parse_args(argv)
    found = evaluations(args.batch, args.repeats)
    print(f"one date, 75 options; log likelihood {found['numpy']['value']:.4f} (NumPy) and "
          f"{found['jax']['value']:.4f} (JAX, 45 steps between maturities)")
    print(f"{'':28s}{'NumPy (callback)':>18s}{'JAX':>12s}{'ratio':>8s}")
    for key, label in (("one", "one evaluation, ms"), ("batch", f"batch of {args.batch}, ms per state")):
        scale = 1e3 / (1 if key == "one" else args.batch)
        numpy_ms, jax_ms = found["numpy"][key] * scale, found["jax"][key] * scale
        print(f"{label:28s}{numpy_ms:18.2f}{jax_ms:12.2f}{numpy_ms / jax_ms:8.1f}")
    if args.whole:
        runs = whole(args.size)
        print(f"\nthe case study's pricing run at size {args.size}, seconds")
        for key in ("step_1", "steps_2_T", "wall"):
            numpy_s, jax_s = runs["numpy"][key], runs["jax"][key]
            print(f"{key:28s}{numpy_s:18.1f}{jax_s:12.1f}{numpy_s / jax_s:8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
