"""Fuzzing the front end: any text either checks or fails with a renderable :class:`GpdslError`.

Never an IndexError, KeyError, RecursionError, lark internals or anything else: those are gpdsl bugs.

(a) mutants of every model in ``models/`` (tokens and characters deleted, duplicated, swapped,
    replaced, random punctuation inserted, truncation), with a fixed seed;
(b) hypothesis-generated text: characters from the language's alphabet, token soup, and token soup
    inside a well-formed block skeleton (so the checker, not only the parser, sees it).

``GPDSL_FUZZ_MUTANTS`` (per model, default 350: at least :data:`DEFAULT_TIER_MUTANTS` in all) scales part (a)
and ``GPDSL_FUZZ_EXAMPLES`` (default 300, derandomized) part (b) for a longer run; setting the latter also makes
hypothesis draw fresh examples. A slow-marked test checks :data:`SLOW_TIER_MUTANTS` other mutants.
"""

from __future__ import annotations

import os
import random
import re
import traceback
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpdsl.api import check_text
from gpdsl.errors import GpdslError

REPO = Path(__file__).resolve().parents[2]
MODELS = sorted((REPO / "models").glob("*.gpm"))
MUTANTS_PER_MODEL = int(os.environ.get("GPDSL_FUZZ_MUTANTS", "350"))
DEFAULT_TIER_MUTANTS, SLOW_TIER_MUTANTS = 2_000, 10_000
SEED = 20240601

_TOKEN = re.compile(r'"[^"\n]*"|//[^\n]*|/\*.*?\*/|[A-Za-z_][A-Za-z0-9_]*|\d+\.?\d*(?:[eE][+-]?\d+)?|\s+|.',
                    re.S)
PUNCTUATION = list("{}()[];,~=<>:+-*/^\"@#.!") + ["/*", "*/", "//", "\n", "1:", "..", "1e999"]
KEYWORDS = ["data", "parameters", "latent", "model", "array", "int", "real", "vector", "matrix", "for", "in",
            "lower", "upper", "gp", "project", "external", "normal", "gamma", "uniform", "half_normal",
            "scaled_sigmoid_normal", "bernoulli_probit", "poisson_log", "rbf", "white", "linear", "periodic",
            "matern52", "lengthscale", "inv_ls2", "variance", "sqrt", "exp", "log", "pi"]


def _vocabulary() -> list[str]:
    words = {t for path in MODELS for t in _TOKEN.findall(path.read_text()) if not t.isspace()}
    return sorted(words | set(KEYWORDS))


VOCABULARY = _vocabulary()


def assert_clean(text: str) -> str:
    """``check_text`` succeeds (``"checked"``) or raises a GpdslError that renders with a location (``"refused"``);
    nothing else."""
    try:
        check_text(text, "fuzz.gpm")
    except GpdslError as error:
        rendered = error.render()
        assert isinstance(rendered, str) and error.message
        if error.span is not None:
            assert rendered.startswith("fuzz.gpm:"), rendered
            lines = rendered.split("\n")
            assert len(lines) >= 3 and "^" in lines[2], rendered
        return "refused"
    except BaseException as error:  # noqa: BLE001 - the point of the test
        if isinstance(error, (KeyboardInterrupt, SystemExit)):
            raise
        pytest.fail(f"{type(error).__name__} escaped check_text on:\n{text}\n\n"
                    + "".join(traceback.format_exception(error)[-8:]))
    return "checked"


# ---- (a) mutants of the shipped models ---------------------------------------------------------
def mutate(rng: random.Random, text: str) -> str:
    """One random edit of ``text`` at token or character level."""
    tokens = _TOKEN.findall(text)
    solid = [i for i, t in enumerate(tokens) if not t.isspace()]
    op = rng.randrange(10)
    if not solid or not text:
        return rng.choice(PUNCTUATION + VOCABULARY) + text
    i, j = rng.choice(solid), rng.choice(solid)
    k = rng.randrange(len(text) + 1)
    if op == 0:
        del tokens[i]
    elif op == 1:
        tokens.insert(i, tokens[i])
    elif op == 2:
        tokens[i], tokens[j] = tokens[j], tokens[i]
    elif op == 3:
        tokens.insert(i, rng.choice(PUNCTUATION))
    elif op == 4:
        tokens[i] = rng.choice(VOCABULARY)
    elif op == 5:
        return text[:k]
    elif op == 6:
        return text[:k] + text[k + 1:]
    elif op == 7:
        return text[:k] + rng.choice(PUNCTUATION) + text[k:]
    elif op == 8:
        return text[:k] + rng.choice(VOCABULARY) + " " + text[k:]
    else:
        a, b = sorted((i, j))
        del tokens[a:b + 1]
    return "".join(tokens)


def mutants(path: Path, count: int, salt: str = ""):
    rng = random.Random(f"{SEED}:{salt}{path.name}")
    original = path.read_text()
    for _ in range(count):
        text = original
        for _ in range(rng.choice((1, 1, 1, 2, 3))):
            text = mutate(rng, text)
        yield text


def test_models_check_cleanly():
    assert MODELS, "no models to fuzz"
    for path in MODELS:
        check_text(path.read_text(), str(path))


@pytest.mark.parametrize("path", MODELS, ids=[p.stem for p in MODELS])
def test_mutated_models(path: Path):
    outcomes = Counter(assert_clean(text) for text in mutants(path, MUTANTS_PER_MODEL))
    assert sum(outcomes.values()) == MUTANTS_PER_MODEL


def test_the_default_tier_checks_at_least_two_thousand_mutants():
    assert len(MODELS) * MUTANTS_PER_MODEL >= DEFAULT_TIER_MUTANTS


@pytest.mark.slow
def test_ten_thousand_other_mutants_check_or_are_refused():
    per_model = -(-SLOW_TIER_MUTANTS // len(MODELS))
    outcomes = Counter(assert_clean(text) for path in MODELS for text in mutants(path, per_model, salt="slow:"))
    assert sum(outcomes.values()) >= SLOW_TIER_MUTANTS and set(outcomes) <= {"checked", "refused"}
    print(f"{sum(outcomes.values())} mutants: {dict(outcomes)}")


# ---- (b) hypothesis ------------------------------------------------------------------------------
ALPHABET = "abcdefgijklmnoprstuvwxyzNDQTXY_0123456789 \t\n{}()[];,~=<>:+-*/^\".e"
_EXAMPLES = os.environ.get("GPDSL_FUZZ_EXAMPLES")
FUZZ_SETTINGS = settings(max_examples=int(_EXAMPLES or 300), deadline=None, derandomize=_EXAMPLES is None,
                         database=None,
                         suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                HealthCheck.filter_too_much])

token = st.sampled_from(VOCABULARY + PUNCTUATION + ["N", "x", "y", "f", "1", "0.5", '"a:b"'])
soup = st.lists(token, max_size=60).map(" ".join)

DECLARATIONS = st.lists(st.sampled_from([
    "int N;", "int D;", "vector[N] x;", "vector[N] y;", "matrix[N, D] X;", "array[N] int<lower=0, upper=1> z;",
    "real r;", "array[N] vector[D] A;", "vector[3] v;",
]), max_size=6, unique=True)
PARAMETERS = st.lists(st.sampled_from([
    "real mu;", "real<lower=0> s ~ gamma(2, 2);", "vector<lower=0>[D] ell;", "real<lower=0, upper=1> p;",
    "vector[2] k ~ scaled_sigmoid_normal(lower = 0, upper = [1, 2]);",
]), max_size=4, unique=True)


@FUZZ_SETTINGS
@given(st.text(alphabet=ALPHABET, max_size=200))
def test_random_text(text: str):
    assert_clean(text)


@FUZZ_SETTINGS
@given(soup)
def test_token_soup(text: str):
    assert_clean(text)


@FUZZ_SETTINGS
@given(DECLARATIONS, PARAMETERS, st.lists(soup, min_size=1, max_size=3))
def test_token_soup_in_blocks(data, parameters, statements):
    text = ("data {\n  int N;\n  int D;\n  " + "\n  ".join(data) + "\n}\n"
            "parameters {\n  " + "\n  ".join(parameters) + "\n}\n"
            "model {\n  " + "\n  ".join(s + ";" for s in statements) + "\n}\n")
    assert_clean(text)


EXPRESSION_ATOMS = ["1", "2.5", "0", "-1", "x", "y", "mu", "s", "N", "pi", "v", "X", "k", "ell", "x[1]", "X[1, 2]",
                    "v[1:2]", '"a:b"', "[1, 2]", "(x, X)"]


@st.composite
def expressions(draw, depth=0):
    if depth > 3 or draw(st.booleans()):
        return draw(st.sampled_from(EXPRESSION_ATOMS))
    kind = draw(st.sampled_from(["binary", "call", "kernel", "neg", "index"]))
    if kind == "binary":
        return f"{draw(expressions(depth + 1))} {draw(st.sampled_from('+-*/^'))} {draw(expressions(depth + 1))}"
    if kind == "neg":
        return f"-{draw(expressions(depth + 1))}"
    if kind == "index":
        return f"{draw(st.sampled_from(['x', 'X', 'v', 'y']))}[{draw(expressions(depth + 1))}]"
    name = draw(st.sampled_from(["sqrt", "exp", "log", "normal", "rbf", "white", "gp", "project", "matern52",
                                 "gamma", "softplus", "unknown", "linear", "periodic"]))
    args = draw(st.lists(expressions(depth + 1), max_size=3))
    kwargs = draw(st.lists(st.sampled_from(["variance", "lengthscale", "inv_ls2", "mu", "sigma", "lower",
                                            "upper", "period"]), max_size=2))
    return f"{name}(" + ", ".join(args + [f"{k} = {draw(expressions(depth + 1))}" for k in kwargs]) + ")"


@FUZZ_SETTINGS
@given(st.sampled_from(["y", "f", "g", "mu", "s", "x[1]", "y[1]", "k"]),
       st.sampled_from(["normal", "gp", "gamma", "uniform", "bernoulli_probit", "external", "rbf"]),
       st.lists(expressions(), max_size=3), st.booleans())
def test_well_formed_statements(target, distribution, args, loop):
    statement = f"{target} ~ {distribution}({', '.join(args)});"
    if loop:
        statement = f"for (i in 1:N) {{ {statement} }}"
    text = ("data {\n  int N;\n  int D;\n  vector[N] x;\n  vector[N] y;\n  matrix[N, D] X;\n  vector[3] v;\n}\n"
            "parameters {\n  real mu;\n  real<lower=0> s ~ gamma(2, 2);\n  vector<lower=0>[D] ell;\n"
            "  vector[2] k ~ uniform(0, 1);\n}\n"
            f"model {{\n  {statement}\n  y ~ normal(mu, s);\n}}\n")
    assert_clean(text)


def test_deep_nesting_is_an_error_not_a_crash():
    for depth in (150, 1000, 5000):
        for expression in ("-" * depth + "1", "(" * depth + "1" + ")" * depth,
                           "1+(" * depth + "1" + ")" * depth, "sqrt(" * depth + "1" + ")" * depth,
                           "[" * depth + "1" + "]" * depth):
            assert_clean("data {\n  vector[3] y;\n}\nmodel {\n  y ~ normal(" + expression + ", 1);\n}\n")


# ---- checker crashes found by fuzzing, for the lead to fix in check.py -------------------------
# Each program makes check.py raise something other than a GpdslError. Remove the xfail mark once
# check.py handles it (strict=True makes the test fail as soon as it passes, as a reminder).
_HEAD = "data {\n  vector[3] y;\n}\n"
CHECKER_CRASHES = {
    # _constant: 10.0 ** 400 raises OverflowError (not caught; only ZeroDivisionError is)
    "overflow_in_bound_power": _HEAD + "parameters {\n  real<lower=10^400> a;\n}\nmodel {\n  y ~ normal(a, 1);\n}\n",
    # _constant: math.exp(1000) raises OverflowError (only ValueError is caught)
    "overflow_in_bound_exp": _HEAD + "parameters {\n  real<lower=exp(1000)> a;\n}\nmodel {\n  y ~ normal(a, 1);\n}\n",
    # _constant: (-8.0) ** 0.5 is a complex number; 'lower < upper' then raises TypeError
    "complex_bound": _HEAD + "parameters {\n  real<lower=(-8)^0.5, upper=3> a;\n}\nmodel {\n  y ~ normal(a, 1);\n}\n",
}


@pytest.mark.parametrize("name", list(CHECKER_CRASHES))
def test_checker_crash_reproducers(name):
    assert_clean(CHECKER_CRASHES[name])
