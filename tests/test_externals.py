"""External likelihoods (gpdsl.externals): refused unless allowed, the same draws as the language's own."""

import json
import subprocess
import sys

import numpy as np
import pytest

from gpdsl import api
from gpdsl.errors import GpdslError, MethodError
from gpdsl.externals import load

TEXT = """
data {{ int N; vector[N] x; vector[N] y; }}
parameters {{ real<lower=0> ell ~ lognormal(0, 1); real<lower=0> s ~ lognormal(-1, 0.5); }}
model {{ f ~ gp(x, rbf(lengthscale = ell)); y ~ {likelihood}; }}
"""
SETTINGS = {"chains": 2, "warmup": 10, "draws": 20}


def external(function):
    return TEXT.format(likelihood=f'external("gpdsl.testing.external_likelihoods:{function}", f, s)')


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    x = np.linspace(0, 1, 10)
    return {"N": 10, "x": x, "y": np.sin(6 * x) + 0.2 * rng.normal(size=10)}


@pytest.fixture(scope="module")
def in_language(data):
    return api.sample(TEXT.format(likelihood="normal(f, s)"), data, "gibbs", seed=3, **SETTINGS)


def test_refused_without_the_flag_in_python(data):
    with pytest.raises(MethodError, match="runs arbitrary Python code") as error:
        api.sample(external("normal_jax"), data, "gibbs", seed=3, **SETTINGS)
    assert "--allow-external" in error.value.render() and "allow_external=True" in error.value.render()


def test_refused_without_the_flag_on_the_command_line(tmp_path, data):
    model, data_file = tmp_path / "m.gpm", tmp_path / "d.json"
    model.write_text(external("normal_jax"))
    data_file.write_text(json.dumps({k: np.asarray(v).tolist() for k, v in data.items()}))
    command = [sys.executable, "-m", "gpdsl.cli", "sample", str(model), "--data", str(data_file), "--method",
               "gibbs", "--out", str(tmp_path / "fit.nc"), "--seed", "1", "--quiet"]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 1 and "runs arbitrary Python code" in result.stderr
    assert "m.gpm:4:" in result.stderr and "--allow-external" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "fit.nc").exists()


@pytest.mark.parametrize("function, tolerance", [("normal_jax", 0.0), ("normal_numpy", 1e-8)])
def test_same_draws_as_the_likelihood_in_the_language(data, in_language, function, tolerance):
    fit = api.sample(external(function), data, "gibbs", seed=3, allow_external=True, **SETTINGS)
    for name in ("ell", "s", "f"):
        np.testing.assert_allclose(fit.posterior[name].values, in_language.posterior[name].values, rtol=0,
                                   atol=tolerance)


def test_a_failing_function_is_named(data):
    with pytest.raises(MethodError, match="external likelihood gpdsl.testing.external_likelihoods:failing failed: "
                                        "ValueError: the pricer did not converge"):
        api.sample(external("failing"), data, "gibbs", seed=3, allow_external=True, **SETTINGS)


def test_traceable_or_host():
    assert load("gpdsl.testing.external_likelihoods:normal_jax").traceable(np.zeros(3), np.zeros(3), 1.0)
    assert not load("gpdsl.testing.external_likelihoods:normal_numpy").traceable(np.zeros(3), np.zeros(3), 1.0)


def test_unknown_functions_are_refused_clearly():
    with pytest.raises(GpdslError, match="cannot load external likelihood gpdsl.testing.external_likelihoods:nope"):
        load("gpdsl.testing.external_likelihoods:nope")
    with pytest.raises(GpdslError, match="no installed package declares the external likelihood 'nope'"):
        load("nope")


def test_an_entry_point_name_resolves_through_the_group(monkeypatch):
    from importlib import metadata

    from gpdsl import externals

    declared = metadata.EntryPoint("normal_model", "gpdsl.testing.external_likelihoods:normal_jax",
                                   externals.ENTRY_POINT_GROUP)
    monkeypatch.setattr(externals.metadata, "entry_points",
                        lambda group: [declared] if group == externals.ENTRY_POINT_GROUP else [])
    loaded = load("normal_model")
    assert loaded.name == "normal_model" and float(loaded(np.zeros(2), np.zeros(2), 1.0)) == pytest.approx(
        2 * -0.9189385332046727)
    model, _ = api.check(TEXT.format(likelihood='external("normal_model", f, s)'))
    assert model.likelihoods()[0].function == "normal_model"


def test_a_run_file_never_allows_external_code_the_command_line_does(tmp_path, data):
    from gpdsl.cli.run_file import plan

    (tmp_path / "m.gpm").write_text(external("normal_jax"))
    (tmp_path / "d.json").write_text(json.dumps({k: np.asarray(v).tolist() for k, v in data.items()}))
    run = 'model = "m.gpm"\ndata = "d.json"\nmethod = "gibbs"\nout = "fit.nc"\nseed = 1\n'
    (tmp_path / "run.toml").write_text(run)
    with pytest.raises(MethodError, match="runs arbitrary Python code"):
        plan(tmp_path / "run.toml")
    assert plan(tmp_path / "run.toml", allow_external=True).runs[0][1].context.allow_external
    (tmp_path / "run.toml").write_text(run + "allow_external = true\n")
    with pytest.raises(GpdslError, match="a run file cannot set allow_external.*gpdsl run --allow-external"):
        plan(tmp_path / "run.toml", allow_external=True)


def test_a_module_in_the_working_directory_that_python_cannot_import_says_pythonpath(tmp_path, monkeypatch):
    (tmp_path / "mylik_not_on_path.py").write_text("def fn(y, f):\n    return 0.0\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", [p for p in __import__("sys").path if p not in ("", ".", str(tmp_path))])
    with pytest.raises(GpdslError, match="cannot load external likelihood mylik_not_on_path:fn") as caught:
        load("mylik_not_on_path:fn")
    assert "PYTHONPATH=. gpdsl" in caught.value.hint
    with pytest.raises(GpdslError) as elsewhere:
        load("no_such_module_anywhere:fn")
    assert "add its directory to PYTHONPATH" in elsewhere.value.hint
