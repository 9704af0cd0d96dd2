"""Reliability (issue 14): whatever was mistyped is refused before the first iteration, in one line that
names the option, variable or path, with exit status 1; outputs are never replaced by surprise.

Every refusal runs the command line in-process (``main(argv)``) and checks, besides the status and the
message, that nothing was written and that the command returned at once: nothing compiled or sampled.
"""

import json
import math
import os
import stat
import time
from types import SimpleNamespace

import numpy as np
import pytest

from gpdsl.api import prepare
from gpdsl.cli import main
from gpdsl.errors import GpdslError
from gpdsl.registry import methods
from gpdsl.settings import LARGEST_INT, cli_fields, flag_of
from tests.reliability.helpers import QUICK, REPO, cli, make_work, refused, write_json


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """Model copies and valid data for a regression, a classification, a GPLVM and a supervised GPLVM."""
    return make_work(tmp_path_factory.mktemp("reliability"))


_json = write_json


# ---- option values ---------------------------------------------------------------------------------
MODEL_FOR = {"nuts": ("gp_classification", "cls"), "pm": ("gp_classification", "cls"),
             "mcmc-ep": ("gp_classification", "cls"), "gibbs": ("gp_classification", "cls"),
             "ep-ml": ("gp_classification", "cls"), "pm-gplvm": ("supervised_gplvm", "sup"),
             "vem": ("bayesian_gplvm", "lvm"), "ml": ("gp_regression", "reg"), "sgpr": ("gp_regression", "reg"),
             "svgp": ("gp_classification", "cls"), "svi-gplvm": ("bayesian_gplvm", "lvm"), "dmgp": ("deep_mahalanobis_gp", "deep"),
             "dsdgp": ("deep_gp", "deep"), "sequential": ("sequential_latent_gp", "seq")}
ZERO_ALLOWED = {"warmup", "refresh_steps", "noise_refreshes", "latent_sweeps", "warmup_iterations", "restarts", "adapt_epsilon",
                "start_noise", "defensive", "correlation", "noise_fixed_steps", "batch_size", "burn_in",
                "final_repeat_f"}


def _numeric_options():
    for method in methods().values():
        for settings_field in cli_fields(method.settings):
            kind = str(settings_field.type)
            if settings_field.metadata.get("choices") or settings_field.metadata.get("parse"):
                continue
            if kind.startswith("int"):
                bad = ["-1", str(LARGEST_INT + 1), str(2**70)] + ([] if settings_field.name in ZERO_ALLOWED else ["0"])
            elif kind.startswith("float"):
                bad = ["-1", "nan", "inf", "1e400"]
            else:
                continue
            for value in bad:
                yield pytest.param(method.name, flag_of(settings_field), value,
                                   id=f"{method.name} {flag_of(settings_field)} {value}")


@pytest.mark.parametrize("method, flag, value", list(_numeric_options()))
def test_every_numeric_option_of_every_method_is_refused_out_of_range(work, capsys, method, flag, value):
    model, data = MODEL_FOR[method]
    entry = methods()[method]
    out = work / "option.nc"
    err = refused([entry.command, work / f"{model}.gpm", "--data", work / f"{data}.json", "--method", method,
                   "--seed", 1, "--out", out, flag, value], capsys, flag, out)
    assert value in err or "finite" in err or "invalid" in err


def test_the_numeric_options_cover_every_method():
    covered = {p.values[0] for p in _numeric_options()}
    assert covered == set(methods())
    assert sum(1 for _ in _numeric_options()) > 150


@pytest.mark.parametrize("value", ["-1", str(2**31), str(2**70), "abc"])
def test_seed_out_of_range_is_refused(work, capsys, value):
    refused(["sample", work / "gp_classification.gpm", "--data", work / "cls.json", "--method", "pm",
             "--seed", value, "--out", work / "seed.nc"], capsys, "seed", work / "seed.nc")


@pytest.mark.parametrize("option, culprit", [
    (["--init-value", "s2=-1"], "--init-value s2: -1 is outside its lower bound"),
    (["--init-value", "noise=0"], "--init-value noise"),
    (["--init-value", "nope=1"], "'nope' is not a parameter"),
    (["--init-value", "w=1,2,3"], "--init-value w: 3 values given"),
    (["--init-value", "noise=nan"], "--init-value noise: nan is not finite"),
    (["--init-value", "noise"], "--init-value expects name=value"),
    (["--num-inducing", "31"], "--num-inducing 31 exceeds the 30 points"),
    (["--psi", "gauss-hermite", "--gh-nodes", "100000"], "--gh-nodes 100000"),
])
def test_values_that_need_the_model_and_data_are_refused_before_the_fit(work, capsys, option, culprit):
    refused(["fit", work / "bayesian_gplvm.gpm", "--data", work / "lvm.json", "--seed", 1, "--out",
             work / "fit.nc", *option], capsys, culprit, work / "fit.nc")


@pytest.mark.parametrize("option, culprit", [
    (["--num-importance", str(LARGEST_INT), "--chains", "100000"],
     "the importance draws of f (--chains 100000 x --num-importance 2147483647 x 12 values) would take"),
    (["--chains", str(LARGEST_INT), "--draws", str(LARGEST_INT - 1000)], "the draws (--chains 2147483647 x --draws"),
])
def test_allocations_beyond_the_memory_are_refused_naming_them(work, capsys, option, culprit):
    err = refused(_sample(work, work / "memory.nc", *option), capsys, culprit, work / "memory.nc")
    assert "of memory is available" in err


def test_chain_groups_are_checked_against_the_chains(work, capsys):
    refused(["sample", work / "gp_classification.gpm", "--data", work / "cls.json", "--method", "pm", "--seed", 1,
             "--chains", 2, "--chain-groups", 3, "--out", work / "cg.nc"], capsys, "chain_groups", work / "cg.nc")


# ---- usage errors: status 1, not argparse's 2 --------------------------------------------------------
@pytest.mark.parametrize("argv, culprit", [
    ([], "COMMAND"),
    (["smaple"], "did you mean 'sample'"),
    (["sample", "m.gpm", "--data", "d.json"], "--out"),
    (["sample", "m.gpm", "--data", "d.json", "--out", "o.nc", "--chians", "2"], "did you mean '--chains'"),
    (["sample", "m.gpm", "--data", "d.json", "--out", "o.nc", "--chains", "two"], "--chains"),
    (["fit", "m.gpm", "--data", "d.json", "--out", "o.nc", "--method", "vme"], "did you mean 'vem'"),
])
def test_usage_errors_exit_1(capsys, argv, culprit):
    refused(argv, capsys, culprit)


def test_help_documents_the_exit_statuses(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    for line in ("0  success", "1  user error", "2  internal error", "3  the run finished"):
        assert line in text


# ---- output paths ------------------------------------------------------------------------------------
def _sample(work, out, *extra):
    return ["sample", work / "gp_classification.gpm", "--data", work / "cls.json", "--method", "pm", "--seed", 1,
            "--out", out, *extra]


def test_output_directory_must_exist(work, capsys):
    refused(_sample(work, work / "missing" / "o.nc"), capsys, f"directory {work / 'missing'} does not exist")


def test_output_is_not_a_directory(work, capsys):
    refused(_sample(work, work, "--overwrite"), capsys, "it is a directory")


def test_output_is_not_a_fifo(work, capsys):
    fifo = work / "fifo.nc"
    os.mkfifo(fifo)
    refused(_sample(work, fifo, "--overwrite"), capsys, "named pipe (FIFO)", fifo)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_output_is_not_a_device(work, capsys):
    refused(_sample(work, "/dev/null", "--overwrite"), capsys, "character device")


@pytest.mark.parametrize("name", ["gp_classification.gpm", "cls.json", "link.json"])
def test_inputs_are_never_overwritten_whatever_the_flags(work, capsys, name):
    link = work / "link.json"
    if not link.exists():
        link.symlink_to(work / "cls.json")
    refused(_sample(work, work / name, "--overwrite"), capsys, "it is an input of this run", work / name)


def test_an_existing_result_is_refused_without_overwrite(work, capsys):
    existing = work / "existing.nc"
    existing.write_text("an earlier run")
    err = refused(_sample(work, existing), capsys, f"{existing}: the file exists", existing)
    assert "--overwrite" in err


@pytest.mark.skipif(os.getuid() == 0, reason="root writes to read-only directories")
def test_output_directory_must_be_writable(work, capsys):
    locked = work / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    refused(_sample(work, locked / "o.nc"), capsys, "is not writable")


def test_a_read_only_result_is_refused_even_with_overwrite(work, capsys):
    locked = work / "locked.nc"
    locked.write_text("keep")
    locked.chmod(0o444)
    refused(_sample(work, locked, "--overwrite"), capsys, "read-only (mode 0444)", locked)


def test_overwrite_lets_an_existing_result_through_the_checks(work):
    existing = work / "again.nc"
    existing.write_text("an earlier run")
    with pytest.raises(GpdslError, match="the file exists"):
        prepare(str(work / "gp_classification.gpm"), work / "cls.json", "pm", seed=1, out=existing)
    prepared = prepare(str(work / "gp_classification.gpm"), work / "cls.json", "pm", seed=1, out=existing,
                       overwrite=True)
    assert prepared.out == existing and existing.read_text() == "an earlier run"


def test_python_api_refuses_an_existing_result(work):
    import gpdsl

    existing = work / "api.nc"
    existing.write_text("an earlier run")
    started = time.perf_counter()
    with pytest.raises(GpdslError, match="the file exists"):
        gpdsl.sample(str(work / "gp_classification.gpm"), work / "cls.json", "pm", seed=1, out=existing)
    assert time.perf_counter() - started < QUICK and existing.read_text() == "an earlier run"


@pytest.mark.parametrize("command", ["compile", "plot", "compare", "data", "forecast", "run", "pm-variance"])
def test_every_writing_command_refuses_an_existing_output(work, capsys, command):
    existing = work / f"existing_{command}.out"
    existing.write_text("keep")
    results = work / "results.nc"
    results.write_text("not read: the output is checked first")
    run_file = work / "runs.toml"
    run_file.write_text(f'model = "gp_classification.gpm"\ndata = "cls.json"\nmethod = "pm"\nseed = 1\n'
                        f'out = "{existing.name}"\n')
    argv = {"compile": ["compile", work / "gp_classification.gpm", "-o", existing],
            "plot": ["plot", results, "-o", existing],
            "compare": ["compare", results, "-o", existing],
            "data": ["data", "pima_tr", "-o", existing],
            "forecast": ["forecast", work / "gp_narx.gpm", "--data", work / "reg.json", "--lag", 2, "--out", existing],
            "run": ["run", run_file],
            "pm-variance": ["pm-variance", work / "supervised_gplvm.gpm", "--data", work / "sup.json", "--png",
                            existing]}[command]
    err = refused(argv, capsys, "the file exists", existing)
    assert str(existing) in err and existing.read_text() == "keep"


def test_a_run_file_output_may_not_replace_its_inputs(work, capsys):
    run_file = work / "self.toml"
    run_file.write_text('model = "gp_classification.gpm"\ndata = "cls.json"\nmethod = "pm"\nseed = 1\n'
                        'out = "self.toml"\n')
    refused(["run", run_file, "--overwrite"], capsys, "it is an input of this run", run_file)
    run_file.write_text('model = "gp_classification.gpm"\ndata = "cls.json"\nmethod = "pm"\nseed = 1\nout = "r.nc"\n'
                        '[compare]\ntable = "cls.json"\n')
    refused(["run", run_file, "--overwrite"], capsys, "it is an input of this run", work / "r.nc")


def test_compile_never_overwrites_its_model(work, capsys):
    model = work / "gp_classification.gpm"
    refused(["compile", model, "-o", model, "--overwrite"], capsys, "it is an input of this run", model)


# ---- data ----------------------------------------------------------------------------------------------
def _regression(**changes):
    rng = np.random.default_rng(1)
    values = {"N": 6, "D": 2, "X": rng.normal(size=(6, 2)).tolist(), "y": rng.normal(size=6).tolist()}
    values.update(changes)
    return {k: v for k, v in values.items() if v is not None}


def _gplvm(**changes):
    rng = np.random.default_rng(2)
    values = {"N": 30, "D": 3, "Q": 2, "Y": rng.normal(size=(30, 3)).tolist()}
    values.update(changes)
    return values


def _nan_column():
    Y = np.random.default_rng(3).normal(size=(30, 3)).tolist()
    return [[row[0], "NaN", row[2]] for row in Y]


def _netcdf(path):
    import xarray as xr

    xr.Dataset({"X": (("N", "D"), np.ones((4, 2))), "y": ("N", [1.0, np.inf, 0.0, 2.0])}).to_netcdf(path)
    return path.read_bytes()


DEEP = '{"N": ' + "[" * 100_000 + "]" * 100_000 + "}"
JSON_CASES = [
    ("N = 0", "reg", _regression(N=0, X=[], y=[]), "size 'N' is 0"),
    ("D = 0", "reg", _regression(D=0, X=[[]] * 6), "size 'D' is 0"),
    ("N negative", "reg", _regression(N=-3), "size 'N' must be a non-negative integer"),
    ("N fractional", "reg", _regression(N=2.5), "size 'N'"),
    ("N an array", "reg", _regression(N=[6]), "size 'N' must be a single integer"),
    ("N huge without data", "reg", _regression(N=10**9), "'X' has shape (6, 2)"),
    ("X rows disagree", "reg", _regression(X=[[1, 2]] * 5), "'X' has shape (5, 2)"),
    ("y too short", "reg", _regression(y=[1, 2, 3]), "'y' has shape (3,)"),
    ("X a vector", "reg", _regression(X=[1, 2, 3, 4, 5, 6]), "'X' has shape (6,)"),
    ("X three-dimensional", "reg", _regression(X=[[[1], [2]]] * 6), "'X' has shape (6, 2, 1)"),
    ("X ragged", "reg", _regression(X=[[1, 2], [3]] * 3), "'X' is ragged"),
    ("y a string", "reg", _regression(y=["a"] * 6), "'y' holds \"a\""),
    ("y all null", "reg", _regression(y=[None] * 6), "'y' holds no observed value"),
    ("y an object", "reg", _regression(y={"a": 1}), "'y' holds"),
    ("X NaN", "reg", _regression(X=[[1, 2], [3, "NaN"]] + [[1, 2]] * 4), "'X' contains NaN at X[2, 2]"),
    ("y Inf", "reg", _regression(y=[1, 2, 3, "Inf", 5, 6]), "'y' contains inf at y[4]"),
    ("X -Inf", "reg", _regression(X=[[1, "-Inf"]] + [[1, 2]] * 5), "'X' contains -inf at X[1, 2]"),
    ("y missing", "reg", _regression(y=None), "data 'y' is missing"),
    ("X missing", "reg", _regression(X=None), "data 'X' is missing"),
    ("y constant", "reg", _regression(y=[2.0] * 6), "'y' is constant"),
    ("y at 1e-300", "reg", _regression(y=[1e-300, -2e-300, 3e-300, 0, 1e-300, 2e-300]), "'y' varies on a scale"),
    ("y at 1e200", "reg", _regression(y=[1e200, -2e200, 3e200, 0, 1e200, 2e200]), "'y' varies on a scale"),
    ("top level a list", "reg", [1, 2, 3], "must hold an object"),
    ("labels 1 and 2", "cls", {"N": 4, "D": 1, "X": [[1], [2], [3], [4]], "y": [1, 2, 1, 2]}, "y must be 0 or 1"),
    ("labels fractional", "cls", {"N": 2, "D": 1, "X": [[1], [2]], "y": [0.5, 1]}, "y must be 0 or 1"),
    ("labels negative", "cls", {"N": 2, "D": 1, "X": [[1], [2]], "y": [-1, 1]}, "y must be 0 or 1"),
    ("Q = 0", "lvm", _gplvm(Q=0), "size 'Q' is 0"),
    ("Q = 10^12", "lvm", _gplvm(Q=10**12), "parameter w (vector<lower=0>[Q] with Q = 1000000000000) would take"),
    ("Y all NaN", "lvm", _gplvm(Y=[["NaN"] * 3] * 30), "'Y' holds no observed value"),
    ("Y a NaN column", "lvm", _gplvm(Y=_nan_column()), "column 2 of data 'Y' is entirely missing"),
    ("Y constant", "lvm", _gplvm(Y=[[1.0] * 3] * 30), "'Y' is constant"),
    ("Y Inf", "lvm", _gplvm(Y=[["Inf", 1, 2]] + [[0, 1, 2]] * 29), "'Y' contains inf"),
]
TEXT_CASES = [
    ("JSON syntax", "reg", ".json", '{"N": 6,, }', "cannot parse JSON data file"),
    ("JSON empty", "reg", ".json", "", "cannot parse JSON data file"),
    ("JSON nested 100000 deep", "reg", ".json", DEEP, "nests arrays or objects 100001 deep"),
    ("JSON not UTF-8", "reg", ".json", b"\xff\xfe\x00{", "not UTF-8 text"),
    ("CSV header only", "reg", ".csv", "N,D,X.1,X.2,y\n", "has a header row but no values"),
    ("CSV empty", "reg", ".csv", "", "is empty"),
    ("CSV not a number", "reg", ".csv", "X.1,X.2,y\n1,2,x\n", "holds 'x', which is not a number"),
    ("CSV index 0", "reg", ".csv", "X.0,X.1,y\n1,2,3\n", "has index 0"),
    ("CSV duplicate column", "reg", ".csv", "X.1,X.1,y\n1,2,3\n", "appears twice"),
    ("CSV too many cells", "reg", ".csv", "X.1,X.2,y\n1,2,3,4\n", "4 cells but 3 column names"),
    ("CSV a column lacking", "reg", ".csv", "X.1,X.3,y\n1,2,3\n", "lacks X.2"),
    ("CSV bad column name", "reg", ".csv", "X-1,y\n1,2\n", "column name 'X-1'"),
    ("CSV constant y", "reg", ".csv", "X.1,X.2,y\n1,2,5\n2,3,5\n4,1,5\n", "'y' is constant"),
    ("NetCDF garbage", "reg", ".nc", b"\x89HDF\r\n\x1a\ngarbage", "NetCDF data file"),
    ("NetCDF classic header only", "reg", ".nc", b"CDF\x01garbage", "holds no variables"),
    ("NetCDF with Inf", "reg", ".nc", _netcdf, "'y' contains inf"),
    ("unknown extension", "reg", ".txt", "N = 6", "unknown extension '.txt'"),
]
MODELS = {"reg": ("fit", "gp_regression", "ml"), "cls": ("sample", "gp_classification", "pm"),
          "lvm": ("fit", "bayesian_gplvm", "vem")}


def _bad_data(work, name, kind, suffix, content, culprit, capsys):
    path = work / f"bad_{abs(hash(name))}{suffix}"
    if callable(content):
        content = content(path)
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    command, model, method = MODELS[kind]
    out = work / f"bad_{abs(hash(name))}.out.nc"
    refused([command, work / f"{model}.gpm", "--data", path, "--method", method, "--seed", 1, "--out", out],
            capsys, culprit, out)


@pytest.mark.parametrize("name, kind, values, culprit", JSON_CASES, ids=[c[0] for c in JSON_CASES])
def test_bad_json_data_is_refused_naming_the_variable(work, capsys, name, kind, values, culprit):
    _bad_data(work, name, kind, ".json", values, culprit, capsys)


@pytest.mark.parametrize("name, kind, suffix, content, culprit", TEXT_CASES, ids=[c[0] for c in TEXT_CASES])
def test_damaged_data_files_are_refused(work, capsys, name, kind, suffix, content, culprit):
    _bad_data(work, name, kind, suffix, content, culprit, capsys)


def test_there_are_at_least_forty_bad_data_cases():
    assert len(JSON_CASES) + len(TEXT_CASES) >= 40


@pytest.mark.parametrize("what, culprit", [("missing", "does not exist"), ("directory", "is a directory"),
                                           ("fifo", "is not a regular file"), ("device", "is not a regular file")])
def test_data_path_that_is_not_a_file(work, capsys, what, culprit):
    path = work / f"{what}.json"
    if what == "directory":
        path.mkdir(exist_ok=True)
    elif what == "fifo" and not path.exists():
        os.mkfifo(path)
    elif what == "device" and not path.exists():
        path.symlink_to("/dev/zero")
    refused(["fit", work / "gp_regression.gpm", "--data", path, "--method", "ml", "--out", work / "o.nc"],
            capsys, culprit, work / "o.nc")


# ---- model files -----------------------------------------------------------------------------------------
def test_a_size_of_400_digits_is_an_error_at_its_location(work, capsys):
    model = work / "nines.gpm"
    model.write_text("data {\n  vector[" + "9" * 400 + "] y;\n}\nmodel { }\n")
    refused(["check", model], capsys, f"{model}:2:10: error: a size must be an integer from 0 to")


def test_model_files_over_one_megabyte_are_refused_before_parsing(work, capsys):
    model = work / "huge.gpm"
    model.write_text("data { int N; }\n//" + "x" * 5_000_000 + "\n")
    err = refused(["check", model], capsys, "models are at most 1 MB")
    assert len(err) < 500


def test_a_long_line_is_cut_in_the_excerpt(work, capsys):
    model = work / "long.gpm"
    model.write_text("data { int N " + "x" * 500_000 + " }\n")
    err = refused(["check", model], capsys, f"{model}:1:14: syntax error")
    assert len(err) < 1000 and "..." in err


@pytest.mark.parametrize("what, culprit", [("directory", "is a directory"), ("binary", "not UTF-8 text")])
def test_model_path_that_is_not_a_model(work, capsys, what, culprit):
    path = work / f"{what}.gpm"
    if what == "directory":
        path.mkdir(exist_ok=True)
    else:
        path.write_bytes(b"\xff\xfe\x00\x01")
    refused(["check", path], capsys, culprit)


# ---- provenance ----------------------------------------------------------------------------------------
def test_results_attributes_are_data_never_paths_to_open(work):
    from gpdsl.inference.methods.vem import fit_from_results

    results = SimpleNamespace(attrs={"method": "vem", "model_source": str(REPO / "models" / "bayesian_gplvm.gpm")})
    with pytest.raises(GpdslError) as error:
        fit_from_results(results)
    assert "<model_source" in error.value.render()


def test_a_fit_without_seed_draws_one_says_it_records_it_and_exit_3_when_it_stops_short(work, capsys):
    from gpdsl.results.arviz_compat import root_attrs
    from gpdsl.results.io import read_netcdf

    out = work / "drawn.nc"
    status, err, _ = cli(["fit", work / "gp_regression.gpm", "--data", work / "reg.json", "--method", "ml",
                          "--max-iterations", 2, "--quiet", "--out", out], capsys)
    assert status == 3, err
    drawn = [int(word) for line in err.splitlines() if "(drawn" in line for word in line.split()[1:2]]
    assert len(drawn) == 1 and 0 <= drawn[0] < 2**31
    assert int(root_attrs(read_netcdf(out))["seed"]) == drawn[0]
    assert math.isfinite(drawn[0])


# ---- the other commands' values and auxiliary paths -------------------------------------------------------
@pytest.fixture(scope="module")
def series(work):
    return _json(work / "series.json", {"y": np.sin(np.arange(60) / 5)})


@pytest.mark.parametrize("flag, value", [(f, v) for f in ("--lag", "--train", "--steps", "--gh-nodes", "--mc-samples")
                                         for v in ("0", "-1", str(2**70))] + [("--training-variance", "-1")])
def test_forecast_options_are_refused_out_of_range(work, series, capsys, flag, value):
    lag = [] if flag == "--lag" else ["--lag", 3]
    refused(["forecast", work / "gp_narx.gpm", "--data", series, "--seed", 1, "--out", work / "fc.nc", *lag,
             flag, value], capsys, flag.lstrip("-").replace("-", "_") if flag == "--training-variance" else flag,
            work / "fc.nc")


@pytest.mark.parametrize("argv, culprit", [
    (["pm-variance", "{sup}", "--data", "{supdata}", "--replicates", "0"], "--replicates"),
    (["pm-variance", "{sup}", "--data", "{supdata}", "--num-importance", str(2**70)], "--num-importance"),
    (["pm-variance", "{sup}", "--data", "{supdata}", "--draw", "1", "1"], "--draw needs --from"),
    (["data", "pima_tr", "--rows", "0", "-o", "{new}"], "rows"),
    (["data", "pima_tr", "--offset", "-1", "-o", "{new}"], "offset"),
    (["data", "pima_tr", "--as", "gplvm", "--latent-dims", "0", "-o", "{new}"], "--latent-dims"),
])
def test_other_commands_refuse_their_values(work, capsys, argv, culprit):
    names = {"sup": work / "supervised_gplvm.gpm", "supdata": work / "sup.json", "new": work / "new.json"}
    refused([a.format(**names) for a in argv], capsys, culprit, work / "new.json")


@pytest.mark.parametrize("checkpoint, culprit", [("cls.json", "it is an input of this run"),
                                                 (".", "it is a directory"),
                                                 ("missing/c.npz", "does not exist")])
def test_checkpoint_paths_are_checked_like_outputs(work, capsys, checkpoint, culprit):
    refused(_sample(work, work / "ck.nc", "--checkpoint", work / checkpoint), capsys, culprit, work / "ck.nc")


@pytest.mark.parametrize("scheduler", ["", "tcp://", "two words"])
def test_a_scheduler_that_is_no_address_is_refused(work, capsys, scheduler):
    refused(_sample(work, work / "sch.nc", "--scheduler", scheduler), capsys, "--scheduler", work / "sch.nc")


@pytest.mark.parametrize("table, culprit", [("settings = {chains = 0}", "chains must be an integer >= 1"),
                                            ('settings = {chains = "4"}', "chains"),
                                            ("seed = -1", "seed must be an integer"),
                                            ("chain_groups = 0", "chain_groups")])
def test_run_files_refuse_values_as_the_flags_do(work, capsys, table, culprit):
    run_file = work / "values.toml"
    run_file.write_text(f'model = "gp_classification.gpm"\ndata = "cls.json"\nmethod = "pm"\nout = "v.nc"\n{table}\n')
    refused(["run", run_file], capsys, culprit, work / "v.nc")


def test_files_that_settings_flags_read_are_inputs_of_the_run():
    from gpdsl.cli import build_parser
    from gpdsl.cli.options import file_arguments

    args = build_parser().parse_args(["sample", "m.gpm", "--data", "d.json", "--method", "pm", "--out", "o.nc",
                                      "--proposal-from", "earlier.nc", "--chains", "2"])
    assert file_arguments(args) == ["earlier.nc"]


# ---- settings of the wrong type (Python API, run files) ------------------------------------------------
WRONG_TYPES = [("pm", "chains", 2.5), ("pm", "chains", "4"), ("pm", "chains", True), ("pm", "target_acceptance", "0.3"),
               ("pm", "tol", True), ("pm", "sample_latent", "yes"), ("pm", "proposal_covariance", [1]),
               ("pm", "proposal_covariance", [[1, 2], [3, 4]]), ("pm", "proposal_covariance", [[-1]]),
               ("pm-gplvm", "blocks", True), ("pm-gplvm", "blocks", [1]), ("pm-gplvm", "symmetrise", None),
               ("vem", "initial_values", [1]), ("vem", "num_inducing", None), ("nuts", "adapt_delta", [0.9]),
               ("gibbs", "surrogate_variance", {"a": 1})]


@pytest.mark.parametrize("method, name, value", WRONG_TYPES, ids=[f"{m} {n}={v!r}" for m, n, v in WRONG_TYPES])
def test_settings_of_the_wrong_type_are_refused_naming_them(method, name, value):
    from gpdsl.cli.options import settings_from_mapping
    from gpdsl.errors import MethodError

    with pytest.raises(MethodError, match=name):
        settings_from_mapping(methods()[method], {name: value})


def test_an_initial_value_that_is_no_number_is_refused(work):
    with pytest.raises(GpdslError, match="--init-value noise: 'abc' is not a number"):
        prepare(str(work / "bayesian_gplvm.gpm"), work / "lvm.json", "vem", seed=1,
                settings=methods()["vem"].settings(initial_values={"noise": "abc"}))


def test_a_refusal_without_seed_is_one_line_with_no_seed_drawn(work, capsys):
    bad = _json(work / "constant.json", {"N": 12, "D": 2, "X": np.ones((12, 2)), "y": np.ones(12)})
    err = refused(["fit", work / "gp_regression.gpm", "--data", bad, "--method", "ml", "--out", work / "c.nc"], capsys,
                  "'y' is constant", work / "c.nc")
    assert err.strip().count("\n") == 0 and "drawn" not in err
