"""Results files (issue 40): a results file whose attributes, variables or bytes were damaged is refused in one line
naming the file and what is malformed (``results file X: attribute settings is malformed``) by every command that
reads one (summary, plot, compare, --proposal-from, pm-variance --from); never an internal error."""

import shutil

import numpy as np
import pytest

from tests.reliability.helpers import no_internal_error, refused


def damaged(fits, method, attribute, value, name="damaged.nc"):
    """A copy of a results file with one root attribute set (or deleted, for None)."""
    import netCDF4

    path = fits / name
    shutil.copy(fits / f"{method}.nc", path)
    with netCDF4.Dataset(path, "a") as dataset:
        if value is None:
            dataset.delncattr(attribute)
        else:
            dataset.setncattr(attribute, value)
    return path


def replaced(fits, method, group, variable, values, dims=None, name="replaced.nc", alone=False):
    """A copy of a results file with one variable of one group replaced (or dropped, for None); ``alone``: the
    group then holds that variable only (its own chains and draws)."""
    import xarray as xr

    with xr.open_datatree(fits / f"{method}.nc") as tree:
        tree = tree.load().copy()
    dataset = tree[group].to_dataset()
    if alone:
        dataset = xr.Dataset({variable: (dims or ("chain", "draw"), values)}, attrs=dataset.attrs)
    else:
        dataset = dataset.drop_vars(variable) if values is None else \
            dataset.assign({variable: (dims or dataset[variable].dims, values)})
    tree[group] = xr.DataTree(dataset)
    path = fits / name
    tree.to_netcdf(path)
    return path


CORRUPT = [("not JSON", "garbage{", "not JSON"), ("empty", "", "not JSON"), ("a list", "[1]", "a list"),
           ("null", "null", "null"), ("a number", "3", "a number"), ("a string", '"text"', "a string")]
JSON_ATTRIBUTES = ("settings", "sizes", "versions", "timings", "report")


@pytest.mark.parametrize("attribute", JSON_ATTRIBUTES)
@pytest.mark.parametrize("value, reason", [c[1:] for c in CORRUPT], ids=[c[0] for c in CORRUPT])
def test_a_json_attribute_that_is_no_object_is_malformed(fits, capsys, attribute, value, reason):
    path = damaged(fits, "ml", attribute, value)
    err = refused(["summary", path], capsys, f"results file {path}: attribute {attribute} is malformed", one_line=True)
    assert reason in err


@pytest.mark.parametrize("value", ["garbage", "", "1.5", "-1", "[1]"])
def test_a_seed_that_is_no_integer_is_malformed(fits, capsys, value):
    path = damaged(fits, "ml", "seed", value)
    refused(["summary", path], capsys, f"results file {path}: attribute seed is malformed", one_line=True)


@pytest.mark.parametrize("value", ["garbage", "[1]", '{"y": 3}', '{"y": {"centre": 1}}'])
def test_a_data_scaling_that_is_no_record_is_malformed(fits, capsys, value):
    path = damaged(fits, "ml", "data_scaling", value)
    refused(["summary", path], capsys, f"results file {path}: attribute data_scaling is malformed", one_line=True)


@pytest.mark.parametrize("command", ["summary", "plot", "compare", "proposal"])
def test_every_reader_refuses_a_malformed_settings_attribute(fits, capsys, command):
    path = damaged(fits, "ml", "settings", "garbage{")
    argv = {"summary": ["summary", path], "plot": ["plot", path, "-o", fits / "p.png"],
            "compare": ["compare", path, fits / "ml.nc"],
            "proposal": ["sample", fits / "gp_classification.gpm", "--data", fits / "cls.json", "--method", "pm",
                         "--proposal-from", path, "--seed", 1, "--out", fits / "p.nc"]}[command]
    refused(argv, capsys, f"results file {path}: attribute settings is malformed", one_line=True)
    assert not (fits / "p.png").exists() and not (fits / "p.nc").exists()


@pytest.mark.parametrize("settings, culprit", [
    ('{"zz": 1}', "unknown key 'zz'"),
    ('{"max_iterations": "many"}', "max_iterations"),
    ('{"max_iterations": -1}', "max_iterations"),
])
def test_a_latent_plot_refuses_settings_its_method_does_not_have(fits, capsys, settings, culprit):
    path = damaged(fits, "vem", "settings", settings)
    err = refused(["plot", path, "--kind", "latent", "-o", fits / "latent.png"], capsys,
                  f"results file {path}: attribute settings is malformed", one_line=True)
    assert culprit in err


def test_pm_variance_refuses_settings_its_method_does_not_have(fits, capsys):
    import netCDF4

    path = damaged(fits, "ml", "settings", '{"zz": 1}', name="pm_gplvm.nc")
    with netCDF4.Dataset(path, "a") as dataset:
        dataset.setncattr("method", "pm-gplvm")
    refused(["pm-variance", fits / "supervised_gplvm.gpm", "--data", fits / "sup.json", "--from", path], capsys,
            f"results file {path}: attribute settings is malformed (unknown key 'zz')", one_line=True)


@pytest.mark.parametrize("report, culprit", [
    ('{}', "hold no adapted proposal"),
    ('{"proposal_covariance": "x"}', "is not one matrix per chain"),
    ('{"proposal_covariance": [[1, 2], [3]]}', "is not one matrix per chain"),
    ('{"proposal_covariance": [1, 2]}', "is not one matrix per chain"),
])
def test_a_proposal_from_a_damaged_report_is_refused_naming_the_flag(fits, capsys, report, culprit):
    path = damaged(fits, "ml", "report", report)
    err = refused(["sample", fits / "gp_classification.gpm", "--data", fits / "cls.json", "--method", "pm",
                   "--proposal-from", path, "--seed", 1, "--out", fits / "p.nc"], capsys, f"--proposal-from {path}",
                  fits / "p.nc", one_line=True)
    assert culprit in err


@pytest.mark.parametrize("attribute, value", [("latent", None), ("latent", "nope"), ("latent", ""),
                                              ("report", '{"zz": 1}'), ("sizes", '{"Q": "x"}')])
def test_a_latent_plot_of_damaged_attributes_is_refused(fits, capsys, attribute, value):
    path = damaged(fits, "vem", attribute, value)
    refused(["plot", path, "--kind", "latent", "-o", fits / "latent.png"], capsys, f"results file {path}",
            fits / "latent.png")


VARIABLES = [
    ("no latent inputs", "posterior", "X", None, None),
    ("latent inputs of the wrong shape", "posterior", "X", np.zeros((1, 1, 3)), ("chain", "draw", "q")),
    ("latent inputs not finite", "posterior", "X", np.full((1, 1, 30, 2), np.nan), None),
    ("no inducing inputs", "posterior", "inducing_inputs", None, None),
    ("no bound trace", "sample_stats", "bound_trace", None, None),
]


@pytest.mark.parametrize("group, variable, values, dims", [v[1:] for v in VARIABLES], ids=[v[0] for v in VARIABLES])
def test_a_latent_plot_of_damaged_variables_is_refused(fits, capsys, group, variable, values, dims):
    path = replaced(fits, "vem", group, variable, values, dims)
    refused(["plot", path, "--kind", "latent", "-o", fits / "latent.png"], capsys, f"results file {path}",
            fits / "latent.png", one_line=True)


@pytest.mark.parametrize("command", ["summary", "compare", "plot"])
def test_a_variable_of_text_is_refused(fits, capsys, command):
    path = replaced(fits, "ml", "posterior", "noise", np.full((1, 1), "a"))
    argv = {"summary": ["summary", path], "compare": ["compare", path, fits / "ml.nc"],
            "plot": ["plot", path, "-o", fits / "text.png"]}[command]
    refused(argv, capsys, f"results file {path}: posterior variable 'noise' holds <U1, not numbers", one_line=True)


@pytest.mark.parametrize("kind", ["trace", "pair", "posterior"])
@pytest.mark.parametrize("value", [np.nan, np.inf], ids=["nan", "inf"])
def test_a_plot_of_draws_none_of_them_finite_is_refused(fits, capsys, kind, value):
    path = replaced(fits, "ml", "posterior", "noise", np.full((2, 5), value), alone=True)
    refused(["plot", path, "--kind", kind, "-o", fits / "nan.png"], capsys, "nothing to plot of noise",
            fits / "nan.png", one_line=True)


@pytest.mark.parametrize("kind", ["trace", "pair", "posterior"])
def test_a_plot_leaves_out_the_draws_that_are_not_finite(fits, capsys, kind):
    draws = np.abs(np.random.default_rng(0).normal(size=(2, 5)))
    draws[0, 1], draws[1, 3] = np.nan, np.inf
    path = replaced(fits, "ml", "posterior", "noise", draws, alone=True)
    no_internal_error(["plot", path, "--kind", kind, "-o", fits / f"some_{kind}.png"], capsys, statuses=(0,))
    assert (fits / f"some_{kind}.png").read_bytes()[:4] == b"\x89PNG"


BYTES = [("empty", b""), ("text", b"not a netcdf file"), ("HDF5 signature only", b"\x89HDF\r\n\x1a\n" + b"\0" * 64)]


@pytest.mark.parametrize("content", [b[1] for b in BYTES], ids=[b[0] for b in BYTES])
@pytest.mark.parametrize("command", ["summary", "compare", "plot"])
def test_a_file_that_is_no_netcdf_is_refused(fits, capsys, content, command):
    path = fits / "bytes.nc"
    path.write_bytes(content)
    argv = {"summary": ["summary", path], "compare": ["compare", path],
            "plot": ["plot", path, "-o", fits / "bytes.png"]}[command]
    refused(argv, capsys, f"{path} is not a readable NetCDF results file")


def test_a_truncated_results_file_is_refused(fits, capsys):
    path = fits / "truncated.nc"
    path.write_bytes((fits / "ml.nc").read_bytes()[:5000])
    refused(["summary", path], capsys, f"{path} is not a readable NetCDF results file")


@pytest.mark.parametrize("command", ["summary", "compare"])
def test_chains_that_never_moved_have_undefined_diagnostics_without_a_warning(fits, capsys, command):
    import warnings

    path = replaced(fits, "ml", "posterior", "noise", np.full((2, 5), 0.3), alone=True, name="constant.nc")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        no_internal_error([command, path], capsys, statuses=(0,))
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)], [str(w.message) for w in caught]
