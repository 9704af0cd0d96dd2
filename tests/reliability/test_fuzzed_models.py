"""Fuzzed model files (issue 40): ``gpdsl check`` (and ``gpdsl methods``) of the shipped models mutated at random
(tokens deleted, duplicated or swapped, characters inserted, text truncated; :mod:`tests.reliability.mutations`,
seeded) ends within :data:`LIMIT` seconds per file with status 0 or 1, never 2 and never a hang; so do the
pathological shapes that once took minutes (long names compared for a suggestion, thousands of warnings or latent
variables). A sample runs in the default tier, the full sweep is slow."""

import signal
import time

import pytest

from tests.command_line import run_in_process
from tests.reliability.mutations import mutants

LIMIT = 5.0
"""Seconds one check of one file may take."""
SAMPLE, SWEEP = 240, 3000

pytestmark = pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="the time limit needs signal.setitimer")


class _TimeLimit(BaseException):
    """Raised in the checked command when its time is up (a BaseException: no ``except Exception`` catches it)."""


def _time_up(signum, frame):
    raise _TimeLimit()


def checked(path, capsys, command="check", limit=LIMIT):
    """``(status, stderr, seconds)`` of ``gpdsl COMMAND path`` in-process, stopped after ``limit`` seconds."""
    previous = signal.signal(signal.SIGALRM, _time_up)
    signal.setitimer(signal.ITIMER_REAL, limit)
    started = time.perf_counter()
    try:
        status, _, err, _ = run_in_process([command, path], capsys)
    except _TimeLimit:
        pytest.fail(f"gpdsl {command} {path} did not end within {limit} s")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return status, err, time.perf_counter() - started


def check_all(files, capsys, command="check"):
    statuses = {}
    for path in files:
        status, err, seconds = checked(path, capsys, command)
        assert status in (0, 1), f"{path}: status {status}\n{err}"
        assert "Traceback" not in err and "internal error" not in err, f"{path}\n{err}"
        statuses[status] = statuses.get(status, 0) + 1
    return statuses


def written(tmp_path, count, seed=40):
    files = []
    for name, text in mutants(count, seed):
        path = tmp_path / f"{name}.gpm"
        path.write_text(text)
        files.append(path)
    return files


CHECKED = mutants(SAMPLE)
LISTED = mutants(SAMPLE // 3, seed=41)


@pytest.mark.parametrize("name, text", CHECKED, ids=[name for name, _ in CHECKED])
def test_a_mutated_model_checks_in_time(tmp_path, capsys, name, text):
    path = tmp_path / f"{name}.gpm"
    path.write_text(text)
    check_all([path], capsys)


@pytest.mark.parametrize("name, text", LISTED, ids=[name for name, _ in LISTED])
def test_a_mutated_model_lists_its_methods_in_time(tmp_path, capsys, name, text):
    path = tmp_path / f"{name}.gpm"
    path.write_text(text)
    check_all([path], capsys, command="methods")


def test_the_sample_holds_models_that_check_and_models_that_do_not(tmp_path, capsys):
    from gpdsl.api import check_text
    from gpdsl.errors import GpdslError

    fine = 0
    for name, text in CHECKED:
        try:
            check_text(text, name)
            fine += 1
        except GpdslError:
            pass
    assert 0 < fine < SAMPLE // 2


@pytest.mark.slow
@pytest.mark.parametrize("command", ["check", "methods", "compile"])
def test_the_full_sweep_of_mutated_models_ends_in_time(tmp_path, capsys, command):
    check_all(written(tmp_path, SWEEP, seed={"check": 40, "methods": 7, "compile": 8}[command]), capsys, command)


BASE = """data {
  int N;
  int D;
  matrix[N, D] X;
  vector[N] y;
}
parameters {
  real<lower=0> variance ~ lognormal(0, 1);
  vector<lower=0>[D] lengthscale ~ inv_gamma(5, 5);
  real<lower=0> noise ~ half_normal(1);
}
model {
  f ~ gp(X, variance * matern52(lengthscale = lengthscale));
  y ~ normal(f, noise);
}
"""
LONG = "n" * 10_000
PATHOLOGICAL = {
    "a long name used, a long one declared": BASE.replace("real<lower=0> noise", f"real<lower=0> {LONG}x")
                                                 .replace("normal(f, noise)", f"normal(f, {LONG}y)"),
    "a long unknown distribution": BASE.replace("half_normal(1)", f"{LONG}(1)"),
    "a long unknown kernel": BASE.replace("matern52(", f"{LONG}("),
    "a long unknown kernel argument": BASE.replace("lengthscale = lengthscale", f"{LONG} = lengthscale"),
    "a long unknown type": BASE.replace("real<lower=0> noise", f"{LONG}<lower=0> noise"),
    "a long unknown block": BASE.replace("model {", f"{LONG} {{"),
    "thousands of unused parameters": BASE.replace(
        "real<lower=0> noise ~ half_normal(1);",
        "\n".join(f"real<lower=0> n{i} ~ half_normal(1);" for i in range(3000)) + "\nreal<lower=0> noise ~ half_normal(1);"),
    "thousands of latent variables": BASE.replace("parameters {", "latent {\n" + "\n".join(
        f"  real z{i};" for i in range(3000)) + "\n}\nparameters {").replace(
        "y ~ normal(f, noise);", "y ~ normal(f, noise);\n" + "\n".join(f"  z{i} ~ normal(0, 1);" for i in range(3000))),
    "thousands of unknown names": BASE.replace("y ~ normal(f, noise);",
                                               "\n".join(f"y ~ normal(f, nois{i});" for i in range(4000))),
    "a 200,000-digit number": BASE.replace("lognormal(0, 1)", "lognormal(0, " + "9" * 200_000 + ")"),
    "unterminated comments": BASE + "/*" * 50_000,
    "unterminated strings": BASE + '"' * 50_000,
    "100,000 opening brackets": BASE.replace("model {", "model {" + "(" * 100_000),
}


@pytest.mark.parametrize("text", list(PATHOLOGICAL.values()), ids=list(PATHOLOGICAL))
def test_pathological_models_check_in_time(tmp_path, capsys, text):
    path = tmp_path / "pathological.gpm"
    path.write_text(text)
    check_all([path], capsys)
