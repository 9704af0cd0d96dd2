"""Standardised data: ``gpdsl data --standardize`` records the centre and scale, readers set them apart."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gpdsl.data.io import read_data, read_scaled_data
from gpdsl.data.outcome_scale import outcome_scale_warnings
from gpdsl.data.scaling import split_scaling
from gpdsl.datasets.model_data import load, model_data, write_data_json
from gpdsl.errors import DataError
from gpdsl.semantics.model_text import check_text


def test_a_regression_target_is_standardised_over_every_row_and_the_scaling_recorded():
    dataset = load("airquality_complete")
    data = model_data(dataset, rows=80, standardize=True)
    assert np.allclose(data["y"], (dataset.y[:80] - dataset.y.mean()) / dataset.y.std())
    assert np.allclose(data["y__centre"] + data["y__scale"] * data["y"], dataset.y[:80])
    assert np.allclose(data["X__centre"] + data["X__scale"] * data["X"], dataset.X[:80])
    new = model_data(dataset, "inputs", offset=80, standardize=True)
    assert np.allclose(new["X__centre"], data["X__centre"]) and np.allclose(new["X__scale"], data["X__scale"])


def test_class_labels_are_never_scaled():
    data = model_data(load("pima_tr"), rows=50, columns=["glu", "bmi"], standardize=True)
    assert set(np.unique(data["y"])) <= {0, 1} and "y__scale" not in data and "X__scale" in data


def test_gplvm_outputs_are_standardised_over_the_rows_kept_and_only_centred_without_the_flag():
    dataset = load("airquality_complete")
    raw = dataset.X[:60, :3]
    scaled = model_data(dataset, "gplvm", rows=60, columns=["Solar.R", "Wind", "Temp"], latent_dims=2,
                        standardize=True)
    assert np.allclose(scaled["Y"].mean(0), 0) and np.allclose(scaled["Y"].std(0), 1)
    assert np.allclose(scaled["Y__centre"] + scaled["Y__scale"] * scaled["Y"], raw)
    centred = model_data(dataset, "gplvm", rows=60, columns=["Solar.R", "Wind", "Temp"], latent_dims=2)
    assert np.allclose(centred["Y"], raw - raw.mean(0)) and np.all(centred["Y__scale"] == 1)


def test_readers_set_the_scaling_apart_and_keep_it(tmp_path):
    path = tmp_path / "d.json"
    write_data_json(model_data(load("airquality_complete"), rows=40, standardize=True), path)
    assert set(read_data(path)) == {"N", "D", "X", "y"}
    values, scalings = read_scaled_data(path)
    assert set(scalings) == {"X", "y"} and scalings["X"].scale.shape == (5,)
    stored = json.loads(path.read_text())
    assert scalings["y"].original(values["y"]) == pytest.approx(load("airquality_complete").y[:40])
    assert stored["y__scale"] == pytest.approx(float(scalings["y"].scale))


@pytest.mark.parametrize("entries, message", [
    ({"y__centre": 1.0}, "without 'y__scale'"),
    ({"y__centre": 1.0, "y__scale": 0.0}, "must be positive"),
    ({"y__centre": [1.0, 2.0], "y__scale": 3.0}, "of one length"),
])
def test_a_malformed_scaling_is_a_data_error(entries, message):
    with pytest.raises(DataError, match=message):
        split_scaling({"y": [1.0, 2.0], **entries}, "data file 'd.json'")


MODEL = """
data { int N; vector[N] x; vector[N] y; }
parameters { real<lower=0> noise ~ half_normal(1); real<lower=0> ell ~ inv_gamma(5, 5); }
model { f ~ gp(x, rbf(lengthscale = ell)); y ~ normal(f, noise); }
"""


def test_an_outcome_far_from_unit_scale_is_named_before_the_run_unless_recorded_as_standardised():
    model, _ = check_text(MODEL)
    x = np.linspace(0, 1, 30)
    raw = {"N": 30, "x": x, "y": 48.6 + 17.5 * np.sin(6 * x)}
    [message] = outcome_scale_warnings(model, raw)
    assert "data 'y' has mean" in message and "sd 12" in message and "--standardize" in message
    assert outcome_scale_warnings(model, raw, standardised=["y"]) == []
    assert outcome_scale_warnings(model, {**raw, "y": np.sin(6 * x)}) == []
    unpriored, _ = check_text(MODEL.replace(" ~ half_normal(1)", "").replace(" ~ inv_gamma(5, 5)", ""))
    assert outcome_scale_warnings(unpriored, raw) == []
