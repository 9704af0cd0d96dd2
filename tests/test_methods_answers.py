"""``gpdsl methods`` answers from the checks the run makes: every "no" is the run's refusal, every "yes" runs.

For every shipped model (and a few the docs describe), every method and every value of its choice settings
(``--approximation ep|laplace``), the listing's answer is the answer of :func:`gpdsl.api.prepare`, which runs
nothing. Then every "yes" runs for a few iterations on small data of the model's declared shapes, in the slow
tier (the pairs of ``tests/test_method_flags.py``'s ``CASES`` run there, in the default tier, and are left out
here).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from gpdsl.api import check_file, check_text, prepare
from gpdsl.cli import EXIT_NOT_CONVERGED, EXIT_OK
from gpdsl.errors import MethodError
from gpdsl.ir.families import classify
from gpdsl.registry import methods
from tests.command_line import run_in_process as cli
from tests.test_method_flags import CASES

REPO = Path(__file__).resolve().parents[1]
SHIPPED = sorted((REPO / "models").glob("*.gpm"))
SIZES = {"N": 12, "D": 2, "Q": 2, "L": 2, "T": 3, "G": 3, "P": 2, "R": 2, "K": 3}
EXTERNAL_MODULE = "mypkg.pricing"
"""The user's module ``models/local_volatility.gpm`` names; the tests supply one (a Gaussian likelihood)."""

HETEROSCEDASTIC = """
data { int N; matrix[N, 1] X; vector[N] y; }
parameters {
  real<lower=0> s ~ gamma(2, 2);
  real<lower=0> ell ~ gamma(2, 2);
  real<lower=0> s_g ~ gamma(2, 2);
  real<lower=0> ell_g ~ gamma(2, 2);
  real mu_g ~ normal(0, 1);
}
model {
  f ~ gp(X, s * rbf(lengthscale = ell));
  g ~ gp(X, s_g * rbf(lengthscale = ell_g));
  y ~ normal(f, NOISE);
}
"""
SUPERVISED_SCALAR = (REPO / "models" / "supervised_gplvm.gpm").read_text().replace(
    "real<lower=0> s1 ~ gamma(2, 8);", "real<lower=0> ell_z ~ gamma(2, 2);").replace(
    "inv_ls2 = s1) + white", "lengthscale = ell_z) + white").replace("matrix[N, 1] X;", "matrix[N, 2] X;")
DOCUMENTED = {
    "heteroscedastic_exp": HETEROSCEDASTIC.replace("NOISE", "exp(mu_g + g)"),
    "heteroscedastic_half": HETEROSCEDASTIC.replace("NOISE", "exp((mu_g + g) / 2)"),
    "heteroscedastic_scaled": HETEROSCEDASTIC.replace("NOISE", "0.5 * exp(-mu_g - g)"),
    "supervised_scalar_lengthscale": SUPERVISED_SCALAR,
}
"""Models the docs describe or the issue reported, beside the shipped files."""


def model_files(root: Path) -> dict[str, Path]:
    """Every model of the sweep by name: the shipped files and :data:`DOCUMENTED` written under ``root``."""
    files = {path.stem: path for path in SHIPPED}
    for name, text in DOCUMENTED.items():
        files[name] = root / f"{name}.gpm"
        files[name].write_text(text)
    return files


def small_data(model, seed: int = 0) -> dict:
    """Data of the declared shapes: :data:`SIZES`, standard normal reals (sorted times ``t``, folded above a lower
    bound), ints between their bounds (0/1 labels, group labels 1..G), counts 0..5 when not bounded above."""
    rng = np.random.default_rng(seed)
    data = {}
    for name, variable in model.data.items():
        declared = variable.type
        if not declared.shape and declared.base == "int":
            data[name] = SIZES[name]
            continue
        shape = declared.concrete_shape(SIZES)
        if declared.base == "int":
            bounded = declared.concrete_bounds(SIZES)
            low = 0 if bounded.lower is None else int(bounded.lower)
            data[name] = rng.integers(low, (5 if bounded.upper is None else int(bounded.upper)) + 1, size=shape)
        elif name == "t":
            data[name] = np.sort(rng.uniform(0.0, 1.0, size=shape))
        elif declared.lower is not None:
            data[name] = declared.lower + np.abs(rng.normal(size=shape))
        else:
            data[name] = rng.normal(size=shape)
    return data


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """Model files, their data files and checked models."""
    root = tmp_path_factory.mktemp("methods")
    package = root / "site" / "mypkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "pricing.py").write_text("from gpdsl.testing.external_likelihoods import normal_jax as "
                                        "dupire_call_prices  # noqa: F401\n")
    sys.path.insert(0, str(root / "site"))
    files = model_files(root)
    checked, data_files = {}, {}
    for name, path in files.items():
        checked[name] = check_file(path)[0]
        data_files[name] = root / f"{name}.json"
        data_files[name].write_text(json.dumps({k: np.asarray(v).tolist() for k, v in
                                                small_data(checked[name]).items()}))
    yield {"root": root, "files": files, "models": checked, "data": data_files}
    sys.path.remove(str(root / "site"))
    for module in [m for m in sys.modules if m == "mypkg" or m.startswith("mypkg.")]:
        del sys.modules[module]


def answers(model) -> list[tuple[str, dict, str | None]]:
    """``(method, settings values, refusal)`` for every method with its defaults and each other choice value."""
    classification = classify(model)
    found = []
    for method in methods().values():
        found.append((method.name, {}, method.refusal(model, classification)))
        for flag, refusal in method.choice_refusals(model, classification).items():
            name, value = flag.split()
            found.append((method.name, {name.lstrip("-"): value}, refusal))
    return found


def smallest_settings(method: str) -> dict:
    """The smallest settings of ``tests/test_method_flags.py``'s case of ``method``, by flag name."""
    flags = CASES[method][2]
    return {str(flag).lstrip("-"): value for flag, value in zip(flags[::2], flags[1::2])}


def yes_pairs() -> list[tuple[str, str]]:
    """Every (model, method) the listing says runs with the method's defaults or one other choice value."""
    pairs = []
    for path in SHIPPED:
        model = check_file(path)[0]
        pairs += sorted({(path.stem, name) for name, _, refusal in answers(model) if refusal is None})
    for name, text in DOCUMENTED.items():
        model = check_text(text)[0]
        pairs += sorted({(name, method) for method, _, refusal in answers(model) if refusal is None})
    return pairs


def case_marks(model: str, method: str):
    """Every run is in the slow tier (a compile per model and method: about 2 min for the JAX engines, 25 min with
    NUTS's Stan builds); the default tier runs each method once in ``tests/test_method_flags.py``."""
    return [pytest.mark.slow]


def test_every_answer_of_the_listing_is_the_run_s(sweep):
    checked = 0
    for name, model in sweep["models"].items():
        for method, values, refusal in answers(model):
            settings = methods()[method].settings_from({**smallest_settings(method), **values})
            try:
                prepare(model, sweep["data"][name], method, settings, seed=1, allow_external=True)
            except MethodError as error:
                assert refusal is not None, f"{name} with {method} {values}: listed yes, refused: {error.message}"
                assert error.message == methods()[method].refusal_error(model, None, settings).message
            else:
                assert refusal is None, f"{name} with {method} {values}: listed no ({refusal}), but prepared"
            checked += 1
    assert checked >= len(sweep["models"]) * len(methods())


def test_the_listing_names_the_choice_a_model_needs(sweep, capsys):
    """EP runs every built-in likelihood (quadrature tilted moments), so a Poisson GP takes pm with its defaults and
    the EP methods; the Laplace approximation still refuses a likelihood that is not log-concave."""
    status, out, err, _ = cli(["methods", sweep["files"]["gp_poisson"]], capsys)
    assert status == 0, err
    lines = {line.split()[1]: line for line in out.splitlines() if line.startswith(("  yes", "  no"))}
    assert all(lines[name].startswith("  yes") for name in ("pm", "mcmc-ep", "ep-ml")), out
    assert "not with its defaults" not in lines["pm"]
    status, out, err, _ = cli(["methods", sweep["files"]["gp_zero_inflated_poisson"]], capsys)
    assert status == 0, err
    assert "zero_inflated_poisson_log, which is not" in out


def test_the_documented_heteroscedastic_forms_are_one_family(sweep):
    for name in ("heteroscedastic_exp", "heteroscedastic_half", "heteroscedastic_scaled"):
        model = sweep["models"][name]
        assert methods()["gibbs"].refusal(model) is None, name
        assert "samples 2 latent GPs" in methods()["pm"].refusal(model)


def test_the_heteroscedastic_likelihood_is_evaluated_as_written(sweep):
    from scipy import stats

    from gpdsl.data.validation import validate_data
    from gpdsl.inference.families.latent_gp import latent_gp_view
    from gpdsl.ir.families import LATENT_GPS

    model = sweep["models"]["heteroscedastic_half"]
    data, _ = validate_data(model, small_data(model, seed=4))
    problem = latent_gp_view(model, data, classify(model).facts[LATENT_GPS])
    rng = np.random.default_rng(5)
    theta = rng.normal(size=problem.theta_dim)
    f = rng.normal(size=2 * data["N"])
    values = problem.theta_values(theta)
    nodes = problem.split(f)
    expected = stats.norm.logpdf(data["y"], nodes["f"], np.exp((values["mu_g"] + nodes["g"]) / 2)).sum()
    assert float(problem.log_likelihood(f, theta)) == pytest.approx(expected, rel=1e-10)


@pytest.mark.parametrize("model, method", [pytest.param(model, method, marks=case_marks(model, method),
                                                        id=f"{model}-{method}") for model, method in yes_pairs()
                                           if CASES[method][0] != model])
def test_every_yes_runs(sweep, capsys, model, method):
    listed = {m: (values, refusal) for m, values, refusal in answers(sweep["models"][model]) if refusal is None}
    values, _ = listed[method]
    entry = methods()[method]
    flags = [part for key, value in values.items() for part in (f"--{key}", value)]
    out = sweep["root"] / f"{model}-{method}.nc"
    argv = [entry.command, sweep["files"][model], "--data", sweep["data"][model], "--method", method, "--seed", 2,
            "--quiet", "--out", out, "--allow-external", *CASES[method][2], *flags]
    status, _, err, _ = cli(argv, capsys)
    assert status in (EXIT_OK, EXIT_NOT_CONVERGED), err
    assert out.is_file()
