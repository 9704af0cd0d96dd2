"""``import gpdsl``: check, load_data, sample / fit / run, compare, datasets, without deep imports."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import gpdsl
from gpdsl.errors import GpdslError, MethodError

PUBLIC = ("check", "load_data", "run", "sample", "fit", "compare", "summarize", "read_results")


def test_import_gpdsl_stays_cheap_and_loads_no_jax_or_stan():
    code = ("import sys, gpdsl; gpdsl.check; gpdsl.compare; gpdsl.datasets; gpdsl.load_data; "
            "print(sorted(m for m in ('jax', 'stan', 'cmdstanpy') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("name", PUBLIC)
def test_the_public_functions_have_numpydoc_docstrings(name):
    function = getattr(gpdsl, name)
    assert name in dir(gpdsl) and name in gpdsl.__all__
    doc = function.__doc__ or ""
    assert "Returns\n" in doc or "Parameters\n" in doc, name


def test_unknown_attributes_are_attribute_errors():
    with pytest.raises(AttributeError, match="no attribute 'smaple'"):
        gpdsl.smaple  # noqa: B018


def test_check_takes_a_file_or_text():
    model, warnings = gpdsl.check("models/gp_classification.gpm")
    assert list(model.parameters) == ["sigma", "tau"] and warnings == []
    text = "data { int N; vector[N] y; }\nparameters { real<lower=0> s ~ gamma(2, 2); }\nmodel { y ~ normal(0, s); }\n"
    model, _ = gpdsl.check(text)
    assert list(model.parameters) == ["s"]
    with pytest.raises(GpdslError, match="no such model file"):
        gpdsl.check("models/absent.gpm")


def test_sample_and_fit_take_settings_as_keywords_checked_like_flags():
    data = {"N": 3, "D": 1, "X": [[0.0], [1.0], [2.0]], "y": [0, 1, 1]}
    with pytest.raises(MethodError, match="'num_importanse' is not a setting of pm") as raised:
        gpdsl.sample("models/gp_classification.gpm", data, "pm", num_importanse=4)
    assert "did you mean 'num_importance'?" in raised.value.render()
    with pytest.raises(MethodError, match="chains must be an integer >= 1"):
        gpdsl.sample("models/gp_classification.gpm", data, "pm", chains=0)
    with pytest.raises(MethodError, match="vem is a method of gpdsl.fit, not of gpdsl.sample"):
        gpdsl.sample("models/bayesian_gplvm.gpm", data, "vem")
    with pytest.raises(MethodError, match="pm is a method of gpdsl.sample, not of gpdsl.fit"):
        gpdsl.fit("models/gp_classification.gpm", data, "pm")


def test_fit_runs_and_records_the_keyword_settings(tmp_path):
    rng = np.random.default_rng(1)
    X = rng.uniform(-2, 2, size=(20, 1))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=20)
    model, _ = gpdsl.check("models/gp_narx.gpm")
    data, _ = gpdsl.load_data({"N": 20, "L": 1, "X": X, "y": y}, model)
    out = tmp_path / "ml.nc"
    gpdsl.fit(model, data, "ml", max_iterations=200, seed=0, out=out)
    results = gpdsl.read_results(out)
    from gpdsl.results.method_output import results_json

    assert results_json(results, "settings")["max_iterations"] == 200
    timings = results_json(results, "timings")
    assert set(timings) == {"compile", "warmup", "sampling", "total"}
    assert timings["total"] >= timings["compile"] + timings["warmup"] + timings["sampling"] > 0
    assert list(gpdsl.summarize(results, var_names=["rbf_lengthscale"]).index) == ["rbf_lengthscale[1]"]
    assert "Returns\n" in gpdsl.datasets.model_data.__doc__


@pytest.mark.parametrize("progress", [True, False])
def test_progress_shows_the_fit_the_predictions_and_a_large_write_on_standard_error(tmp_path, capsys, monkeypatch,
                                                                                     progress):
    """With ``progress`` each stage a user waits for has its line on standard error (the write of results only from
    :data:`gpdsl.api.LARGE_RESULTS_MB`, here lowered to 0); without it, nothing."""
    import gpdsl.api

    rng = np.random.default_rng(1)
    X = rng.uniform(-2, 2, size=(20, 1))
    data = {"N": 20, "D": 1, "X": X, "y": np.sin(X[:, 0]) + 0.1 * rng.normal(size=20)}
    monkeypatch.setattr(gpdsl.api, "LARGE_RESULTS_MB", 0)
    capsys.readouterr()
    gpdsl.fit("models/gp_regression.gpm", data, "ml", seed=0, out=tmp_path / "ml.nc", progress=progress,
              new_inputs=[[0.5], [1.5]])
    captured = capsys.readouterr()
    assert captured.out == ""
    if not progress:
        assert captured.err == ""
        return
    lines = captured.err.splitlines()
    for stage in ("type-II maximum likelihood: L-BFGS on the log marginal likelihood", "predictions at 2 new inputs",
                  f"writing {tmp_path / 'ml.nc'} (0 MB)"):
        assert f"{stage} ..." in lines
        assert any(line.startswith(f"{stage}: done in ") for line in lines), stage
