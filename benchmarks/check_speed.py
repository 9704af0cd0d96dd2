"""How long does ``gpdsl check`` take on a realistic model? Target: under 0.3 s.

Measures, on a ~50-line model with comments, many declarations, several kernels and loops:

* in-process ``gpdsl.check`` of the model text (parse + check), best of N after a warm-up (the grammar is
  compiled once per process; the first call is printed for information);
* the full command ``python -m gpdsl.cli check FILE`` (interpreter start-up and imports included),
  best of a few runs, if ``gpdsl/cli/main.py`` exists, with a breakdown of a cold start (interpreter,
  imports, grammar compilation, checking) and what loading a cached grammar would cost instead.

Run: ``python benchmarks/check_speed.py [--repeat N] [--cli-repeat M]``. Exit status 1 if a
measurement misses the target. The breakdown builds the grammar's parser alone by
:func:`gpdsl.syntax.parser.lark_parser`; everything else is the public ``gpdsl.check``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TARGET_SECONDS = 0.3

MODEL = """\
// A realistic gpdsl model for timing `gpdsl check`: a sequential latent GP with a
// separable space-time kernel, a GPLVM-style latent layer and several likelihoods.
/* Sizes and observations. The block comment spans
   several lines on purpose. */
data {
  int T;                          // time steps
  int N;                          // points per time step
  int D;                          // observed output columns
  int Q;                          // latent dimensions
  vector[T] t;
  array[T] matrix[N, 2] X;
  array[T] vector[N] y;
  matrix[N, 1] S;                 // a static covariate
  matrix[N, D] Y;
  array[N] int<lower=0, upper=1> z;
  array[N] int<lower=0> counts;
}
parameters {
  vector[4] kappa ~ scaled_sigmoid_normal(lower = 0, upper = [3.16, 3.16, 3.16, 2]);
  vector[2] alpha ~ scaled_sigmoid_normal(lower = 0, upper = [1, 1]);
  real<lower=0> s2 ~ lognormal(0, 1);
  vector<lower=0>[Q] w ~ gamma(2, 2);
  real<lower=0> noise ~ inv_gamma(2, 0.1);
  real<lower=0> ell_s ~ gamma(2, 0.5);
  real<lower=0> var_s ~ half_normal(1);
  real<lower=0, upper=pi> period ~ uniform(0, pi);
  real mu ~ normal(0, 10);
  real<lower=0> nu ~ gamma(2, 0.1);
}
latent {
  matrix[N, Q] H;
}
model {
  // space-time GP, one vector of N values per time step
  f ~ gp((t, X), kappa[4]^2 * rbf(t, lengthscale = kappa[3]) * rbf(X, lengthscale = kappa[1:2]));
  for (i in 1:T) {
    y[i] ~ normal(f[i] + alpha[1], alpha[2]);
  }
  // a latent layer over a static covariate, then a GPLVM-style output layer
  H ~ gp(S, var_s * matern52(lengthscale = ell_s) + periodic(period = period) + white(1e-6));
  F ~ gp(H, rbf(variance = s2, inv_ls2 = w) + linear(variance = w) + constant(0.1));
  Y ~ normal(F, sqrt(noise));
  // classification and counts on the static covariate
  g ~ gp(S, matern32(lengthscale = ell_s) + mlp());
  z ~ bernoulli_probit(g);
  h ~ gp(S, matern12(variance = nu, lengthscale = ell_s));
  counts ~ poisson_log(h + mu);
}
"""


def time_in_process(text: str, repeat: int) -> tuple[float, float]:
    """(first call, best of ``repeat`` after warm-up) in seconds."""
    start = time.perf_counter()
    from gpdsl import check

    model, warnings = check(text)
    first = time.perf_counter() - start
    assert model.likelihoods() and not warnings, [w.message for w in warnings]
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        check(text)
        best = min(best, time.perf_counter() - start)
    return first, best


def time_cli(path: Path, repeat: int) -> float | None:
    """Best wall time of ``python -m gpdsl.cli check FILE``, or None without a CLI."""
    if not (REPO / "gpdsl" / "cli.py").exists():
        return None
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    command = [sys.executable, "-m", "gpdsl.cli", "check", str(path)]
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        result = subprocess.run(command, capture_output=True, text=True, cwd=REPO, env=env)
        elapsed = time.perf_counter() - start
        if result.returncode != 0:
            print(f"CLI failed (exit {result.returncode}):\n{result.stdout}{result.stderr}", file=sys.stderr)
            return float("nan")
        best = min(best, elapsed)
    return best


_BREAKDOWN = r"""
import json, sys, time
t0 = time.perf_counter()
import gpdsl.api
t1 = time.perf_counter()
from gpdsl.syntax import parser
parser.lark_parser()
t2 = time.perf_counter()
gpdsl.check(open(sys.argv[1]).read())
t3 = time.perf_counter()
import importlib.resources, lark, tempfile, os
grammar = importlib.resources.files("gpdsl.grammar").joinpath("gpdsl.lark").read_text()
cache = os.path.join(tempfile.mkdtemp(), "gpdsl.lark.cache")
options = dict(parser="lalr", propagate_positions=True, maybe_placeholders=False, cache=cache)
lark.Lark(grammar, **options)
t4 = time.perf_counter()
lark.Lark(grammar, **options)
t5 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "grammar": t2 - t1, "check": t3 - t2, "cached_grammar": t5 - t4}))
"""


def breakdown(path: Path) -> dict[str, float]:
    """Where a cold ``check`` spends its time, measured in a fresh interpreter."""
    import json

    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True, env=env)
    startup = time.perf_counter() - start
    result = subprocess.run([sys.executable, "-c", _BREAKDOWN, str(path)], capture_output=True, text=True,
                            cwd=REPO, env=env, check=True)
    return {"interpreter start-up": startup, **json.loads(result.stdout)}


def verdict(seconds: float) -> str:
    return "PASS" if seconds < TARGET_SECONDS else "FAIL"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50, help="in-process repetitions (best of)")
    parser.add_argument("--cli-repeat", type=int, default=5, help="CLI repetitions (best of)")
    args = parser.parse_args(argv)

    lines = MODEL.count("\n")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "benchmark_model.gpm"
        path.write_text(MODEL)
        first, best = time_in_process(MODEL, args.repeat)
        print(f"model: {lines} lines, {len(MODEL)} characters")
        print(f"gpdsl.check, first call (grammar compile included): {first * 1e3:8.1f} ms  (for information)")
        print(f"gpdsl.check, best of {args.repeat} after warm-up:            {best * 1e3:8.1f} ms  {verdict(best)}")
        results.append(best)
        cli = time_cli(path, args.cli_repeat)
        if cli is None:
            print("python -m gpdsl.cli check: skipped (gpdsl/cli/main.py does not exist yet)")
        else:
            print(f"python -m gpdsl.cli check, best of {args.cli_repeat}:       {cli * 1e3:8.1f} ms  {verdict(cli)}")
            results.append(cli)
            parts = breakdown(path)
            print("cold start breakdown (fresh interpreter): " + ", ".join(
                f"{k} {v * 1e3:.0f} ms" for k, v in parts.items() if k != "cached_grammar"))
            print(f"  (loading the grammar from lark's cache=... instead of compiling it: "
                  f"{parts['cached_grammar'] * 1e3:.0f} ms)")
    print(f"target: < {TARGET_SECONDS * 1e3:.0f} ms each")
    ok = all(r < TARGET_SECONDS for r in results)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
