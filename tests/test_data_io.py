"""Tests for gpdsl.data.io and gpdsl.data.validation: readers, size inference, messages for bad data."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpdsl.api import check_file, check_text
from gpdsl.data.io import load_data, read_data
from gpdsl.data.validation import validate_data
from gpdsl.errors import DataError

MODELS = Path(__file__).resolve().parents[1] / "models"

BOUNDED_MODEL = """
data {
  int N;
  int<lower=1> K;
  matrix[N, 1] X;
  vector<lower=0>[N] y;
  array[N] int<lower=0> counts;
  array[N] int<lower=1, upper=3> group;
  real<lower=0, upper=1> rate;
}
parameters {
  real<lower=0> sigma ~ gamma(1, 1);
}
model {
  f ~ gp(X, sigma * rbf());
  y ~ normal(f, sigma);
}
"""


def model_of(name):
    return check_file(MODELS / f"{name}.gpm")[0]


@pytest.fixture(scope="module")
def classification():
    return model_of("gp_classification")


@pytest.fixture(scope="module")
def sequential():
    return model_of("sequential_latent_gp")


@pytest.fixture(scope="module")
def bounded():
    return check_text(BOUNDED_MODEL)[0]


@pytest.fixture
def classification_data():
    rng = np.random.default_rng(1)
    return {"N": 6, "D": 3, "X": rng.normal(size=(6, 3)), "y": np.array([0, 1, 1, 0, 1, 0])}


@pytest.fixture
def sequential_data():
    rng = np.random.default_rng(2)
    T, N = 3, 4
    return {"T": T, "N": N, "t": np.linspace(0, 1, T), "X": rng.normal(size=(T, N, 2)),
            "y": rng.normal(size=(T, N))}


@pytest.fixture
def bounded_data():
    return {"N": 3, "K": 2, "X": np.ones((3, 1)), "y": np.array([0.5, 1.0, 2.0]),
            "counts": np.array([0, 4, 2]), "group": np.array([1, 3, 2]), "rate": 0.25}


def assert_same(values, expected):
    assert list(values) == list(expected)
    for name, value in expected.items():
        np.testing.assert_array_equal(values[name], value)


def as_json(data):
    return {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in data.items()}


def write_csv(path, columns):
    length = max(len(c) for c in columns.values())
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        for row in range(length):
            writer.writerow([c[row] if row < len(c) else "" for c in columns.values()])


def bad(model, data, *fragments, allow_missing=()):
    with pytest.raises(DataError) as info:
        validate_data(model, data, allow_missing)
    for fragment in fragments:
        assert fragment in info.value.message, info.value.message
    return info.value


# ---- formats ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["classification", "sequential"])
def test_json_round_trip(name, request, tmp_path):
    model = request.getfixturevalue(name)
    data = request.getfixturevalue(f"{name}_data")
    path = tmp_path / "data.json"
    path.write_text(json.dumps(as_json(data)))
    values, warnings = load_data(path, model)
    assert_same(values, data)
    assert warnings == []


def test_json_special_values_and_types(tmp_path):
    model = model_of("bayesian_gplvm")
    path = tmp_path / "data.json"
    path.write_text('{"N": 2, "D": 2, "Q": 1, "Y": [[1, "NaN"], [NaN, 2.5]]}')
    read = read_data(path)
    assert isinstance(read["N"], int) and read["Y"].shape == (2, 2)
    values, _ = load_data(path, model, allow_missing={"Y"})
    assert values["Y"].dtype == np.float64 and np.isnan(values["Y"]).sum() == 2


def test_csv_round_trip_classification(classification, classification_data, tmp_path):
    data = classification_data
    columns = {f"X.{j + 1}": data["X"][:, j] for j in range(3)} | {"y": data["y"]}
    path = tmp_path / "data.csv"
    pd.DataFrame(columns).to_csv(path, index=False)
    values, _ = load_data(path, classification)
    assert_same(values, data)
    assert values["y"].dtype == np.int64


def test_csv_bracket_columns_and_scalars(classification, classification_data, tmp_path):
    data = classification_data
    columns = {f"X[{j + 1}]": list(data["X"][:, j]) for j in range(3)}
    columns |= {"y": list(data["y"]), "N": [6], "D": [3]}
    path = tmp_path / "data.csv"
    write_csv(path, columns)
    assert read_data(path)["N"].shape == (1,)
    assert read_data(path, classification)["N"] == 6
    values, _ = load_data(path, classification)
    assert_same(values, data)


def test_csv_round_trip_sequential(sequential, sequential_data, tmp_path):
    data = sequential_data
    T, N = data["T"], data["N"]
    columns = {"t": data["t"]}
    columns |= {f"X.{i + 1}.{j + 1}": data["X"][:, i, j] for i in range(N) for j in range(2)}
    columns |= {f"y.{i + 1}": data["y"][:, i] for i in range(N)}
    path = tmp_path / "data.csv"
    pd.DataFrame(columns).to_csv(path, index=False)
    values, _ = load_data(path, sequential)
    assert values["X"].shape == (T, N, 2)
    assert_same(values, data)


def test_csv_variables_of_different_lengths(tmp_path):
    model = model_of("local_volatility")
    path = tmp_path / "data.csv"
    write_csv(path, {"t": [0.1, 0.2, 0.3], "mu": [0.05], "K.1.1": [1, 2, 3], "K.2.1": [4, 5, 6],
                     "c.1": [1.5, 2.5, 3.5], "c.2": [0.5, "NaN", 1.5]})
    values, _ = load_data(path, model, allow_missing={"c"})
    assert values["T"] == 3 and values["N"] == 2 and values["mu"] == 0.05
    assert values["K"].shape == (3, 2, 1) and np.isnan(values["c"][1, 1])


@pytest.mark.parametrize("name", ["classification", "sequential"])
def test_netcdf_round_trip(name, request, tmp_path):
    model = request.getfixturevalue(name)
    data = request.getfixturevalue(f"{name}_data")
    variables = {key: (model.data[key].type.dim_names(key), value)
                 for key, value in data.items() if key not in model.sizes}
    path = tmp_path / "data.nc"
    xr.Dataset(variables).to_netcdf(path)
    if name == "classification":
        assert read_data(path)["y"].dtype.kind == "i"
    assert read_data(path, model)["N"] == data["N"]
    values, _ = load_data(path, model)
    assert_same(values, data)


def test_netcdf_sizes_as_variables(tmp_path):
    model = model_of("bayesian_gplvm")
    path = tmp_path / "data.nc"
    xr.Dataset({"Y": (("row", "col"), np.ones((3, 2))), "Q": 2}).to_netcdf(path)
    read = read_data(path)
    assert read["Q"] == 2 and type(read["Q"]) is int
    values, _ = load_data(path, model)
    assert (values["N"], values["D"], values["Q"]) == (3, 2, 2)
    xr.Dataset({"Y": (("N", "D"), np.ones((3, 2))), "y": ("Q", [1.0])}).to_netcdf(tmp_path / "dims.nc")
    values, warnings = load_data(tmp_path / "dims.nc", model)
    assert values["Q"] == 1 and warnings == ["data 'y' is not declared in the model's data block; ignored"]


def test_dict_of_lists_pandas_and_xarray(classification, classification_data):
    data = classification_data
    source = {"X": pd.DataFrame(data["X"]), "y": pd.Series(data["y"]).tolist()}
    values, _ = load_data(source, classification)
    assert_same(values, data)
    values, _ = load_data(xr.Dataset({"X": (("N", "D"), data["X"]), "y": ("N", data["y"])}),
                          classification)
    assert_same(values, data)


def test_normalised_types(bounded, bounded_data):
    source = bounded_data | {"y": [1, 2, 3], "counts": [0.0, 1.0, True], "K": np.int32(2), "rate": 1}
    values, _ = validate_data(bounded, source)
    assert values["y"].dtype == np.float64
    assert values["counts"].dtype == np.int64 and values["counts"].tolist() == [0, 1, 1]
    assert type(values["K"]) is int and type(values["N"]) is int and type(values["rate"]) is float


# ---- size inference --------------------------------------------------------------------------
def test_sizes_inferred(classification, classification_data, sequential, sequential_data):
    for model, data in ((classification, classification_data), (sequential, sequential_data)):
        given_data = {k: v for k, v in data.items() if k not in model.sizes}
        values, _ = validate_data(model, given_data)
        assert_same(values, data)


def test_given_size_checked_against_shapes(classification, classification_data):
    bad(classification, classification_data | {"N": 7},
        "data 'X' has shape (6, 3): expected matrix[N, D] (N=7, D=3) = (7, 3)")


def test_size_only_used_by_parameters_must_be_given():
    model = model_of("bayesian_gplvm")
    bad(model, {"Y": np.ones((3, 2))}, "data 'Q' is missing")
    values, _ = validate_data(model, {"Y": np.ones((3, 2)), "Q": 1})
    assert (values["N"], values["D"], values["Q"]) == (3, 2, 1)


def test_unknown_names_warn(classification, classification_data):
    _, warnings = validate_data(classification, classification_data | {"sigma": 1.0, "Z": [1]})
    assert warnings == ["'sigma' is a parameter of the model, not data; ignored",
                        "data 'Z' is not declared in the model's data block; ignored"]


def test_empty_data_takes_declared_shape(classification):
    values, _ = validate_data(classification, {"N": 0, "D": 2, "X": [], "y": []})
    assert values["X"].shape == (0, 2) and values["y"].dtype == np.int64


# ---- bad data --------------------------------------------------------------------------------
def test_missing_variable(classification, classification_data):
    del classification_data["X"]
    bad(classification, classification_data, "data 'X' is missing: expected matrix[N, D] (N=6, D=3)")


def test_wrong_shape(classification, classification_data):
    bad(classification, classification_data | {"X": np.ones((6, 2))},
        "data 'X' has shape (6, 2)", "matrix[N, D] (N=6, D=3) = (6, 3)")


def test_non_integer_label(classification, classification_data):
    bad(classification, classification_data | {"y": [0, 1, 0.5, 1, 1, 0]},
        "y must be 0 or 1", "found values {0, 0.5, 1}")


def test_labels_one_and_two(classification, classification_data):
    bad(classification, classification_data | {"y": [1, 2, 2, 1, 1, 2]},
        "y must be 0 or 1 (declared array[N] int<lower=0, upper=1>); found values {1, 2}: "
        "recode the labels")


def test_category_labels_out_of_range(bounded, bounded_data):
    bad(bounded, bounded_data | {"group": [0, 1, 2]}, "group must be an integer from 1 to 3",
        "found values {0, 1, 2}")


def test_non_integer_count(bounded, bounded_data):
    bad(bounded, bounded_data | {"counts": [0, 2.5, 1]},
        "data 'counts' must hold integers (declared array[N] int<lower=0>); counts[2] = 2.5")


def test_nan(classification, classification_data):
    classification_data["X"][1, 2] = np.nan
    bad(classification, classification_data, "data 'X' contains NaN at X[2, 3]")


def test_inf_even_when_missing_allowed():
    model = model_of("bayesian_gplvm")
    Y = np.zeros((3, 2))
    Y[0, 1], Y[2, 0] = np.nan, -np.inf
    bad(model, {"Q": 1, "Y": Y}, "data 'Y' contains -inf at Y[3, 1]: values must be finite",
        allow_missing={"Y"})
    Y[2, 0] = 0.0
    values, _ = validate_data(model, {"Q": 1, "Y": Y}, allow_missing={"Y"})
    assert np.isnan(values["Y"][0, 1])
    bad(model, {"Q": 1, "Y": Y}, "data 'Y' contains NaN at Y[1, 2]")


def test_allow_missing_names_checked(classification, classification_data, bounded, bounded_data):
    bad(bounded, bounded_data | {"counts": [0, np.nan, 1]}, "allow_missing names 'counts', declared array[N] int",
        "only real variables and the outcomes of a likelihood", allow_missing={"counts"})
    bad(classification, classification_data, "allow_missing names 'W', which is not a data variable",
        allow_missing={"W"})


def test_lower_bound_violation(bounded, bounded_data):
    bad(bounded, bounded_data | {"y": [0.5, 1.0, -2.0]},
        "data 'y' violates its lower bound 0 (declared vector<lower=0>[N]): y[3] = -2.0")


def test_scalar_upper_bound_violation(bounded, bounded_data):
    bad(bounded, bounded_data | {"rate": 1.5},
        "data 'rate' violates its upper bound 1 (declared real<lower=0, upper=1>): rate = 1.5")


def test_size_lower_bound(bounded, bounded_data):
    bad(bounded, bounded_data | {"K": 0}, "data 'K' violates its lower bound 1", "K = 0")


def test_inconsistent_inferred_size(classification, classification_data):
    data = {"X": classification_data["X"], "y": [0, 1, 1]}
    error = bad(classification, data, "size 'N' is inconsistent: inferred as 6 from dimension 1 of "
                "'X', but dimension 1 of 'y'", "has length 3")
    assert "supply 'N'" in error.hint


def test_negative_size(classification):
    bad(classification, {"N": -2, "D": 1, "X": np.ones((0, 1)), "y": []},
        "size 'N' must be a non-negative integer; got -2")


def test_fractional_size(classification, classification_data):
    bad(classification, classification_data | {"D": 2.5}, "size 'D' must be a non-negative integer; got 2.5")


def test_size_given_as_array(classification, classification_data):
    bad(classification, classification_data | {"N": [6]}, "size 'N' must be a single integer")


def test_scalar_of_wrong_type(classification, classification_data, bounded, bounded_data):
    bad(classification, classification_data | {"N": "six"}, "data 'N' must be numeric; got 'six'")
    bad(bounded, bounded_data | {"rate": [0.1, 0.2]}, "data 'rate' has shape (2,): expected real")


def test_ragged_lists(classification):
    with pytest.raises(DataError, match="'X' is ragged"):
        read_data({"X": [[1.0, 2.0], [3.0]]})


def test_csv_matrix_column_missing(classification, tmp_path):
    path = tmp_path / "data.csv"
    write_csv(path, {"X.1": [1, 2], "X.3": [3, 4], "y": [0, 1]})
    with pytest.raises(DataError, match=r"'X' has columns up to X\.3 but lacks X\.2"):
        read_data(path, classification)


def test_csv_matrix_column_short_of_declared(classification, tmp_path):
    path = tmp_path / "data.csv"
    write_csv(path, {"D": [3], "X.1": [1, 2], "X.2": [3, 4], "y": [0, 1]})
    with pytest.raises(DataError, match=r"data 'X' has shape \(2, 2\): expected matrix\[N, D\] "
                                        r"\(N=2, D=3\) = \(2, 3\)"):
        load_data(path, classification)


def test_csv_gap_in_column(tmp_path):
    path = tmp_path / "data.csv"
    write_csv(path, {"y": [1, "", 3]})
    with pytest.raises(DataError, match=r"line 3: column 'y' is empty") as info:
        read_data(path)
    assert "NaN" in info.value.hint


def test_csv_bad_cells_and_names(tmp_path):
    path = tmp_path / "data.csv"
    write_csv(path, {"y": [1, "abc"]})
    with pytest.raises(DataError, match=r"line 3: column 'y' holds 'abc', which is not a number"):
        read_data(path)
    pd.DataFrame({"y": [1, 2]}).to_csv(path)
    with pytest.raises(DataError, match="column name '' is not a variable name") as info:
        read_data(path)
    assert "index=False" in info.value.hint


def test_bad_json_file(tmp_path):
    path = tmp_path / "data.json"
    path.write_text('{\n  "N": 3,\n  "y": [0, 1,, 1]\n}\n')
    with pytest.raises(DataError) as info:
        read_data(path)
    assert f"cannot parse JSON data file '{path}' (line 3" in info.value.message
    assert info.value.span.line == 3
    assert f"{path}:3:" in str(info.value)


def test_json_bad_value(tmp_path):
    path = tmp_path / "data.json"
    path.write_text('{"y": [0, "one"]}')
    with pytest.raises(DataError, match=r"variable 'y' holds \"one\""):
        read_data(path)


def test_unknown_extension(tmp_path):
    path = tmp_path / "data.txt"
    path.write_text("N = 3")
    with pytest.raises(DataError, match=r"unknown extension '\.txt'"):
        read_data(path)


def test_missing_file(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        read_data(tmp_path / "absent.json")


# ---- property --------------------------------------------------------------------------------
MODEL_NAMES = sorted(p.stem for p in MODELS.glob("*.gpm"))


@st.composite
def valid_data(draw):
    model = model_of(draw(st.sampled_from(MODEL_NAMES)))
    bounds = {b for v in model.data.values() for b in (v.type.lower, v.type.upper) if isinstance(b, str)}
    sizes = {name: draw(st.integers(1 if name in bounds else 0, 4)) for name in model.sizes}
    data = {}
    for name, variable in model.data.items():
        if name in model.sizes:
            continue
        vtype = variable.type.concrete_bounds(sizes)
        shape = vtype.concrete_shape(sizes)
        count = int(np.prod(shape))
        if vtype.base == "int":
            low, high = (sizes[b] if isinstance(b, str) else b for b in (vtype.lower, vtype.upper))
            low = int(low) if low is not None else -5
            high = int(high) if high is not None else low + 5
            elements = st.integers(low, high)
        else:
            low = vtype.lower if vtype.lower is not None else -1e6
            high = vtype.upper if vtype.upper is not None else low + 2e6
            # a real lower bound excluded: positive likelihoods (weibull_censored) need data above it
            elements = st.floats(low, high, allow_nan=False, exclude_min=vtype.lower is not None)
        data[name] = np.array(draw(st.lists(elements, min_size=count, max_size=count))).reshape(shape)
    inferable = {d for v in model.data.values() for d in v.type.shape if isinstance(d, str)}
    for name, value in sizes.items():
        if name not in inferable or draw(st.booleans()):
            data[name] = value
    return model, sizes, data


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_data())
def test_valid_data_accepted(case):
    model, sizes, data = case
    values, warnings = validate_data(model, data)
    assert warnings == [] and list(values) == list(model.data)
    for name, variable in model.data.items():
        if name in model.sizes:
            assert values[name] == sizes[name] and type(values[name]) is int
        elif variable.type.shape:
            assert values[name].shape == variable.type.concrete_shape(sizes)
            assert values[name].dtype == (np.int64 if variable.type.base == "int" else np.float64)
        else:
            assert type(values[name]) is (int if variable.type.base == "int" else float)


WARPED = """
data { int N; vector[N] t; matrix[N, 2] X; vector[N] y; }
model {
  f ~ gp((t, X), warp(X[:, 2], rbf(lengthscale = 0.3), 2, 0.5) + rbf(t, lengthscale = 1));
  y ~ normal(f, 0.1);
}
"""


def test_warp_inputs_outside_the_unit_interval_are_named():
    model, _ = check_text(WARPED)
    X = np.array([[5.0, 0.2], [-3.0, 1.0], [0.0, 0.0]])
    data = {"t": [0.0, 7.0, -2.0], "X": X, "y": [0.1, 0.2, 0.3]}
    validate_data(model, data)  # t and X[:, 1] are not warped
    X[1, 1] = 1.25
    with pytest.raises(DataError, match=r"data 'X' must lie in \[0, 1\] as the input of warp \(the Kumaraswamy "
                                        r"CDF\): X\[2, 2\] = 1.25"):
        validate_data(model, {**data, "X": X})
