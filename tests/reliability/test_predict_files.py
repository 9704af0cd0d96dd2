"""Prediction files (issue 40): ``--predict`` values of the wrong number of columns or dimensions, empty, not
finite, or naming none of the model's variables are refused before the run in one line naming the variable and the
shape expected, for every method that predicts (they were refused after the run, or for the deep GPs not at all:
predictions at a reshaped matrix, or an internal error)."""

import json

import pytest

from tests.reliability.helpers import make_work, refused

RUNS = {
    "ml": ("fit", "gp_regression", "reg", []),
    "sgpr": ("fit", "gp_regression", "reg", ["--num-inducing", 4]),
    "svgp": ("fit", "gp_classification", "cls", ["--num-inducing", 4]),
    "nuts": ("sample", "gp_classification", "cls", []),
    "pm": ("sample", "gp_classification", "cls", []),
    "gibbs": ("sample", "gp_classification", "cls", []),
    "dmgp": ("fit", "deep_mahalanobis_gp", "deep", ["--num-inducing", 5, "--num-inducing-fields", 3]),
    "dsdgp": ("fit", "deep_gp", "deep", ["--num-inducing", 5]),
    "vem": ("fit", "bayesian_gplvm", "lvm", ["--num-inducing", 4]),
    "svi-gplvm": ("fit", "bayesian_gplvm", "lvm", ["--num-inducing", 4]),
    "pm-gplvm": ("sample", "supervised_gplvm", "sup", []),
    "sequential": ("sample", "sequential_latent_gp", "seq", []),
}
INPUTS = [
    ("three columns", {"X": [[1, 2, 3], [4, 5, 6]]}, "must be of shape (m, 2) (matrix[N, D] with m >= 1 new points); "
                                                     "got shape (2, 3)"),
    ("one column", {"X": [[1], [2]]}, "got shape (2, 1)"),
    ("a vector", {"X": [1, 2, 3]}, "got shape (3,)"),
    ("three dimensions", {"X": [[[1, 2]]]}, "got shape (1, 1, 2)"),
    ("no rows", {"X": []}, "got shape (0,)"),
    ("no points", {"X": [[]]}, "got shape (1, 0)"),
    ("a NaN", {"X": [[1, "NaN"]]}, "hold nan at X[1, 2]: they must be finite"),
    ("an infinity", {"X": [["-Inf", 1]]}, "hold -inf at X[1, 1]: they must be finite"),
    ("the wrong name", {"Z": [[1, 2]]}, "must hold the new inputs under the model's input name ("),
]
OUTPUTS = [
    ("four columns", {"Y": [[1, 2, 3, 4]]}, "'Y' to predict at (--predict) must be of shape (m, 3)"),
    ("two columns", {"Y": [[1, 2]]}, "got shape (1, 2)"),
    ("three dimensions", {"Y": [[[1, 2, 3]]]}, "got shape (1, 1, 3)"),
    ("no rows", {"Y": []}, "got shape (0,)"),
    ("an infinity", {"Y": [[1, "Inf", 2]]}, "hold inf at Y[1, 2]"),
    ("a row entirely missing", {"Y": [[1, 2, 3], ["NaN", "NaN", "NaN"]]}, "new point 2 of 'Y'"),
    ("inputs instead", {"X": [[1, 2]]}, "hold none of the model's variables with one value per point (Y); they hold X"),
    ("a size only", {"Q": 5}, "they hold Q"),
]
SUPERVISED = [
    ("inputs of two columns", {"X": [[1, 2]]}, "'X' to predict at (--predict) must be of shape (m, 1)"),
    ("outputs of three columns", {"X": [[1]], "Y": [[1, 2, 3]]}, "'Y' to predict at (--predict) must be of shape (m, 2)"),
    ("outputs without inputs", {"Y": [[1, 2]]}, "need new inputs X of the GP prior"),
    ("inputs not finite", {"X": [["NaN"]]}, "hold nan at X[1, 1]"),
]
SEQUENTIAL = [
    ("one step's inputs", {"X": [[1, 2]]}, "must be of shape (3, m, 2) (array[T] matrix[N, 2]"),
    ("two steps of three", {"X": [[[1, 2]], [[3, 4]]]}, "got shape (2, 1, 2)"),
    ("three columns", {"X": [[[1, 2, 3]]] * 3}, "got shape (3, 1, 3)"),
]


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return make_work(tmp_path_factory.mktemp("predict_files"))


def refused_prediction(work, capsys, method, values, culprit):
    command, model, data, flags = RUNS[method]
    path = work / f"new_{method}.json"
    path.write_text(json.dumps(values))
    out = work / "predicted.nc"
    refused([command, work / f"{model}.gpm", "--data", work / f"{data}.json", "--method", method, "--seed", 1,
             "--out", out, "--predict", path, *flags], capsys, culprit, out, one_line=True)


@pytest.mark.parametrize("values, culprit", [c[1:] for c in INPUTS], ids=[c[0] for c in INPUTS])
@pytest.mark.parametrize("method", ["ml", "sgpr", "svgp", "nuts", "pm", "gibbs", "dmgp", "dsdgp"])
def test_new_inputs_that_do_not_fit_are_refused_before_the_run(work, capsys, method, values, culprit):
    refused_prediction(work, capsys, method, values, culprit)


@pytest.mark.parametrize("values, culprit", [c[1:] for c in OUTPUTS], ids=[c[0] for c in OUTPUTS])
@pytest.mark.parametrize("method", ["vem", "svi-gplvm"])
def test_new_outputs_that_do_not_fit_are_refused_before_the_run(work, capsys, method, values, culprit):
    refused_prediction(work, capsys, method, values, culprit)


@pytest.mark.parametrize("values, culprit", [c[1:] for c in SUPERVISED], ids=[c[0] for c in SUPERVISED])
def test_new_values_of_a_supervised_gplvm_are_checked_before_the_run(work, capsys, values, culprit):
    refused_prediction(work, capsys, "pm-gplvm", values, culprit)


@pytest.mark.parametrize("values, culprit", [c[1:] for c in SEQUENTIAL], ids=[c[0] for c in SEQUENTIAL])
def test_new_inputs_of_a_sequential_model_are_checked_before_the_run(work, capsys, values, culprit):
    refused_prediction(work, capsys, "sequential", values, culprit)


def test_new_inputs_of_one_column_may_be_a_vector(work):
    from gpdsl.api import check_file
    from gpdsl.data.io import load_data
    from gpdsl.data.new_inputs import verify_new_inputs

    model, _ = check_file(work / "supervised_gplvm.gpm")
    data, _ = load_data(work / "sup.json", model)
    verify_new_inputs(model, data, {"X": [0.1, 0.2]}, by_name=True)
    verify_new_inputs(model, data, {"X": [[0.1], [0.2]], "Y": [[1.0, float("nan")], [float("nan"), 2.0]]},
                      by_name=True)
