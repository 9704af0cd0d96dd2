"""A run on standardised data keeps the scaling; summaries show a standardised outcome in its original units."""

from __future__ import annotations

import numpy as np
import pytest

from gpdsl.data.scaling import scaling_entries
from gpdsl.datasets.model_data import load
from gpdsl.results.io import read_netcdf
from gpdsl.results.original_units import data_scalings, in_original_units, stored_model
from gpdsl.results.summary import summarize
from tests.command_line import run_in_process

MODEL = "models/gp_regression.gpm"
TRAIN = 90
SHOWN = 30


def _fit(folder, capsys, standardize=True):
    flag = ["--standardize"] if standardize else []
    train, new, out = folder / "train.json", folder / "new.json", folder / "ml.nc"
    assert run_in_process(["data", "airquality_complete", "--rows", TRAIN, *flag, "--overwrite", "-o", train],
                          capsys)[0] == 0
    assert run_in_process(["data", "airquality_complete", "--as", "inputs", "--rows", SHOWN, *flag, "--overwrite",
                           "-o", new], capsys)[0] == 0
    status, _, err, _ = run_in_process(["fit", MODEL, "--data", train, "--method", "ml", "--predict", new,
                                        "--seed", 1, "--overwrite", "--out", out], capsys)
    assert status == 0, err
    return out, err


def test_predictions_of_a_standardised_outcome_are_shown_in_its_original_units(tmp_path, capsys):
    out, err = _fit(tmp_path, capsys)
    assert "has mean" not in err
    results = read_netcdf(out)
    scaling = data_scalings(results)["y"]
    stored = results.predictions
    shown, mapped = in_original_units(results, "predictions", stored_model(results))
    assert mapped == ["f_new", "f_variance", "y_mean", "y_new", "y_variance"]
    assert np.allclose(shown["y_mean"], scaling.centre + scaling.scale * stored["y_mean"])
    assert np.allclose(shown["y_variance"], scaling.scale ** 2 * stored["y_variance"])
    ozone = load("airquality_complete").y[:SHOWN]
    error = shown["y_mean"].values.ravel() - ozone
    assert np.sqrt(np.mean(error ** 2)) < 0.6 * ozone.std()
    table = summarize(results, group="predictions")
    assert table.loc["y_mean[1]", "mean"] == pytest.approx(float(shown["y_mean"].values.ravel()[0]))
    assert summarize(results, group="predictions", original_units=False).loc["y_mean[1]", "mean"] == \
        pytest.approx(float(stored["y_mean"].values.ravel()[0]))


def test_summary_says_which_values_are_in_the_original_units(tmp_path, capsys):
    out, _ = _fit(tmp_path, capsys)
    status, text, _, _ = run_in_process(["summary", out, "--group", "predictions", "--vars", "y_mean"], capsys)
    assert status == 0
    assert "y_mean in the original units (y: centre" in text and "--standardized" in text
    status, text, _, _ = run_in_process(["summary", out], capsys)
    assert "the run's data were standardised (X, y" in text and "--group predictions" in text
    status, text, _, _ = run_in_process(["summary", out, "--group", "predictions", "--standardized"], capsys)
    assert text.splitlines()[-1] == "the run's data were standardised (X, y); shown as the model saw them"


def test_raw_outputs_are_named_before_the_run(tmp_path, capsys):
    _, err = _fit(tmp_path, capsys, standardize=False)
    assert "warning: data 'y' has mean 4" in err and "--standardize" in err


def test_a_dask_task_carries_the_scaling_to_the_worker(tmp_path, capsys):
    from gpdsl.api import prepare
    from gpdsl.scale_out import RunTask

    path = tmp_path / "d.json"
    assert run_in_process(["data", "airquality_complete", "--rows", 40, "--standardize", "-o", path], capsys)[0] == 0
    prepared = prepare(MODEL, path, "ml")
    task = RunTask.of(prepared)
    scaling = prepared.scalings["y"]
    assert {k: float(v) for k, v in scaling_entries("y", scaling.centre, scaling.scale).items()} == \
        {k: float(task.data[k]) for k in ("y__centre", "y__scale")}
    assert task.prepared().scalings.keys() == prepared.scalings.keys()


def test_the_predictions_plot_draws_bands_in_the_original_units(tmp_path, capsys):
    from gpdsl.results.prediction_plot import prediction_bands

    out, _ = _fit(tmp_path, capsys)
    results = read_netcdf(out)
    [band], mapped = prediction_bands(results, ["y_mean"])
    shown, _ = in_original_units(results, "predictions", stored_model(results))
    sd = np.sqrt(shown["y_variance"].values.ravel())
    assert mapped == ["y_mean"] and np.allclose(band.centre, shown["y_mean"].values.ravel())
    assert np.allclose(band.upper - band.centre, 2 * sd)
    status, _, err, _ = run_in_process(["plot", out, "--kind", "predictions", "-o", tmp_path / "p.png"], capsys)
    assert status == 0 and (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"
    status, _, err, _ = run_in_process(["plot", out, "--kind", "predictions", "--vars", "nope", "-o",
                                        tmp_path / "q.png"], capsys)
    assert status == 1 and "no predictions variable named 'nope'" in err
