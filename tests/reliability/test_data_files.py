"""Data files (issue 40): integers beyond 64 bits, a name given twice, a CSV field over 128 KB, a file or an array
too large for the memory, a NetCDF matrix stored transposed, a byte-order mark: each refused in one line naming the
variable or the file (with the exact value, never a wrapped-around one), or read correctly; never an internal error."""

import json

import numpy as np
import pytest

from gpdsl.api import check_file
from gpdsl.data.io import load_data, read_data
from tests.reliability.helpers import make_work, refused, write_json

INT64_MAX = 2**63 - 1


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return make_work(tmp_path_factory.mktemp("data_files"))


def regression(**changes):
    rng = np.random.default_rng(1)
    values = {"N": 6, "D": 2, "X": rng.normal(size=(6, 2)).tolist(), "y": rng.normal(size=6).tolist()}
    return {**values, **changes}


def classification(**changes):
    return {"N": 6, "D": 1, "X": [[1.0], [2.0], [3.0], [4.0], [5.0], [6.0]], "y": [0, 1, 0, 1, 0, 1], **changes}


RUNS = {"reg": ("fit", "gp_regression", "ml"), "cls": ("sample", "gp_classification", "pm")}


def refused_data(work, capsys, kind, path, culprit):
    command, model, method = RUNS[kind]
    out = work / "refused.nc"
    return refused([command, work / f"{model}.gpm", "--data", path, "--method", method, "--seed", 1, "--out", out],
                   capsys, culprit, out, one_line=True)


INTEGERS = [
    ("size beyond int64", "reg", regression(N=10**23), "'N' holds 100000000000000000000000"),
    ("size 2^63", "reg", regression(N=2**63), "'N' holds 9223372036854775808"),
    ("size -2^63 - 1", "reg", regression(N=-2**63 - 1), "'N' holds -9223372036854775809"),
    ("size of 400 digits", "reg", regression(N=10**400), "(401 digits)"),
    ("size 2^40", "reg", regression(N=2**40), "N=1099511627776"),
    ("label 2^63", "cls", classification(y=[2**63, 1, 0, 1, 0, 1]), "'y' holds 9223372036854775808 at y[1]"),
    ("label 2^64", "cls", classification(y=[0, 2**64, 0, 1, 0, 1]), "'y' holds 18446744073709551616 at y[2]"),
    ("label -2^63 - 1", "cls", classification(y=[0, 1, -2**63 - 1, 1, 0, 1]), "'y' holds -9223372036854775809 at y[3]"),
    ("label int64 max", "cls", classification(y=[0, 1, 0, INT64_MAX, 0, 1]), "9223372036854775807"),
    ("real beyond double", "reg", regression(y=[10**400, 1, 2, 3, 4, 5]), "'y' holds an integer beyond double"),
    ("label a float 1e19", "cls", classification(y=[0, 1, 0, 1, 0, 1e19]), "'y' holds 1e+19 at y[6]"),
]


@pytest.mark.parametrize("kind, values, culprit", [c[1:] for c in INTEGERS], ids=[c[0] for c in INTEGERS])
def test_integers_are_shown_exactly_and_refused_beyond_64_bits(work, capsys, kind, values, culprit):
    path = work / "integers.json"
    path.write_text(json.dumps(values))
    err = refused_data(work, capsys, kind, path, culprit)
    assert "-9223372036854775808" not in err.replace("from -9223372036854775808", "")


def test_an_integer_beyond_64_bits_in_a_real_variable_is_read_as_a_number(work):
    path = work / "real_integer.json"
    path.write_text(json.dumps(regression(y=[2**64, 1, 2, 3, 4, 5])))
    model, _ = check_file(work / "gp_regression.gpm")
    data, _ = load_data(path, model)
    assert data["y"][0] == float(2**64) and data["y"].dtype == np.float64


CSV_INTEGERS = [
    ("label beyond int64", "cls", "X.1,y\n1,0\n2,99999999999999999999999\n3,0\n", "'y' holds 99999999999999999999999"),
    ("size beyond int64", "reg", "N,X.1,X.2,y\n99999999999999999999999,1,2,3\n,2,3,4\n", "'N' holds 9999999"),
]


@pytest.mark.parametrize("kind, text, culprit", [c[1:] for c in CSV_INTEGERS], ids=[c[0] for c in CSV_INTEGERS])
def test_csv_integers_beyond_64_bits_are_refused_exactly(work, capsys, kind, text, culprit):
    path = work / "integers.csv"
    path.write_text(text)
    refused_data(work, capsys, kind, path, culprit)


def test_csv_integers_beyond_64_bits_in_a_real_column_are_numbers(work):
    path = work / "real_integer.csv"
    path.write_text("X.1,X.2,y\n1,2,99999999999999999999999\n2,3,4\n3,1,2\n")
    model, _ = check_file(work / "gp_regression.gpm")
    data, _ = load_data(path, model)
    assert data["y"][0] == 1e23 and data["N"] == 3


DUPLICATES = [
    ("a size", '{"N": 6, "N": 7, "D": 1}', "'N' is given twice"),
    ("an array", '{"y": [1, 2], "N": 2, "y": [3, 4]}', "'y' is given twice"),
    ("in a nested object", '{"N": 2, "X": {"a": 1, "a": 2}}', "'a' is given twice"),
]


@pytest.mark.parametrize("text, culprit", [d[1:] for d in DUPLICATES], ids=[d[0] for d in DUPLICATES])
def test_a_json_name_given_twice_is_refused_naming_it(work, capsys, text, culprit):
    path = work / "twice.json"
    path.write_text(text)
    refused_data(work, capsys, "reg", path, culprit)


@pytest.mark.parametrize("field", ['"' + "a" * 200_000 + '"', "1" * 200_000])
def test_a_csv_field_over_the_csv_module_limit_is_refused_with_its_line(work, capsys, field):
    path = work / "field.csv"
    path.write_text(f"X.1,X.2,y\n1,2,3\n1,2,{field}\n")
    refused_data(work, capsys, "reg", path, "line 3: field larger than field limit")


@pytest.mark.parametrize("suffix", [".json", ".csv"])
def test_a_text_file_too_large_for_the_memory_is_refused_before_reading(work, capsys, monkeypatch, suffix):
    import gpdsl.data.memory

    path = work / f"large{suffix}"
    if suffix == ".json":
        write_json(path, regression())
    else:
        path.write_text("X.1,X.2,y\n1,2,3\n2,3,1\n3,1,2\n")
    monkeypatch.setattr(gpdsl.data.memory, "available_memory", lambda: 100)
    err = refused_data(work, capsys, "reg", path, f"{suffix[1:].upper()} data file '{path}' is ")
    assert "reading it would take about" in err and "100 bytes of memory is available" in err


def test_a_netcdf_array_too_large_for_the_memory_is_refused_from_its_declared_shape(work, capsys):
    import netCDF4

    path = work / "huge.nc"
    with netCDF4.Dataset(path, "w") as dataset:
        dataset.createDimension("N", 10**6)
        dataset.createDimension("D", 10**6)
        dataset.createVariable("X", "f8", ("N", "D"), zlib=True, chunksizes=(1000, 1000))
        dataset.createVariable("y", "f8", ("N",))
    assert path.stat().st_size < 100_000
    refused_data(work, capsys, "reg", path, "the largest, 'X', is 1000000 x 1000000 float64")


def netcdf(path, X, dims, y_dim="N"):
    import xarray as xr

    xr.Dataset({"X": (dims, X), "y": (y_dim, np.arange(X.shape[dims.index(y_dim)] if y_dim in dims else 3,
                                                       dtype=float))}).to_netcdf(path)
    return path


@pytest.mark.parametrize("shape", [(3, 3), (5, 2)], ids=["square", "oblong"])
def test_a_netcdf_matrix_stored_as_d_by_n_is_read_by_its_dimension_names(work, shape):
    model, _ = check_file(work / "gp_regression.gpm")
    X = np.arange(np.prod(shape), dtype=float).reshape(shape) * 0.1
    by_name = read_data(netcdf(work / "dn.nc", X.T, ("D", "N")), model)
    as_declared = read_data(netcdf(work / "nd.nc", X, ("N", "D")), model)
    assert np.array_equal(by_name["X"], X) and np.array_equal(as_declared["X"], X)
    assert by_name["N"] == shape[0] and by_name["D"] == shape[1]


def test_a_netcdf_dimension_named_after_another_size_is_refused(work, capsys):
    path = netcdf(work / "misplaced.nc", np.ones((2, 3)), ("D", "rows"), y_dim="rows")
    err = refused_data(work, capsys, "reg", path, "variable 'X' has dimensions (D, rows)")
    assert "name its dimensions (N, D)" in err


def test_netcdf_dimensions_named_otherwise_are_read_as_stored(work):
    model, _ = check_file(work / "gp_regression.gpm")
    X = np.arange(6, dtype=float).reshape(3, 2)
    values = read_data(netcdf(work / "other.nc", X, ("rows", "columns"), y_dim="rows"), model)
    assert np.array_equal(values["X"], X)


@pytest.mark.parametrize("suffix, text", [(".csv", "X.1,X.2,y\n1,2,3\n2,3,1\n3,1,2\n"),
                                          (".json", '{"X": [[1, 2], [2, 3], [3, 1]], "y": [3, 1, 2]}')])
def test_a_byte_order_mark_is_not_part_of_the_first_name(work, suffix, text):
    path = work / f"bom{suffix}"
    path.write_text("\ufeff" + text, encoding="utf-8")
    model, _ = check_file(work / "gp_regression.gpm")
    data, _ = load_data(path, model)
    assert np.array_equal(data["X"][:, 0], [1.0, 2.0, 3.0]) and data["N"] == 3
