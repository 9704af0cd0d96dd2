"""gpdsl run RUN.toml: several runs (a method grid) in one file, all checked as the flags are before any runs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gpdsl.cli import build_parser, main
from gpdsl.cli.options import settings_from_args, settings_from_mapping
from gpdsl.errors import GpdslError
from gpdsl.registry import get_method
from gpdsl.cli.run_file import plan, read_run_file

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "models" / "gp_classification.gpm"


@pytest.fixture
def folder(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 2))
    y = (X[:, 0] + 0.5 * rng.normal(size=12) > 0).astype(int)
    (tmp_path / "data.json").write_text(json.dumps({"N": 12, "D": 2, "X": X.tolist(), "y": y.tolist()}))
    return tmp_path


def write(folder, text):
    path = folder / "runs.toml"
    path.write_text(f'model = "{MODEL}"\ndata = "data.json"\nseed = 3\n' + text)
    return path


GRID = '''
[[run]]
method = "nuts"
out = "nuts.nc"
settings = { chains = 2, warmup = 100, draws = 100 }

[[run]]
method = "pm"
out = "pm_{approximation}_{num_importance}.nc"
settings = { chains = 2, draws = 200 }
grid = { approximation = ["ep", "laplace"], num_importance = [1, 16] }
'''


def test_a_grid_expands_into_one_checked_run_per_combination(folder, capsys):
    path = write(folder, GRID)
    run_plan = plan(path)
    names = [spec.out.name for spec, _ in run_plan.runs]
    assert names == ["nuts.nc", "pm_ep_1.nc", "pm_ep_16.nc", "pm_laplace_1.nc", "pm_laplace_16.nc"]
    settings = run_plan.runs[3][1].settings
    assert (settings.approximation, settings.num_importance, settings.chains, settings.draws) == ("laplace", 1, 2, 200)
    assert all(prepared.context.seed == 3 for _, prepared in run_plan.runs)
    assert main(["run", str(path), "--dry-run"]) == 0
    assert "5 runs checked; nothing run" in capsys.readouterr().out
    assert not any(folder.glob("*.nc"))


def test_settings_from_a_run_file_equal_those_from_the_flags():
    cases = [
        ("pm", ["--approximation", "ep", "--num-importance", "16", "--chains", "2", "--sample-latent"],
         {"approximation": "ep", "num-importance": 16, "chains": 2, "sample_latent": True}),
        ("gibbs", ["--theta-update", "surr-slice", "--repeat-f", "3"], {"theta_update": "surr-slice", "repeat_f": 3}),
        ("pm-gplvm", ["--block", "s1,theta", "--block", "theta_S,noise", "--no-symmetrise"],
         {"block": ["s1,theta", "theta_S,noise"], "no-symmetrise": True}),
        ("pm-gplvm", ["--block", "s1,theta"], {"blocks": [["s1", "theta"]], "symmetrise": True}),
    ]
    parser = build_parser()
    for method, flags, mapping in cases:
        args = parser.parse_args(["sample", "m.gpm", "--data", "d", "--out", "o.nc", "--method", method, *flags])
        from_flags = settings_from_args(get_method(method), args)
        assert settings_from_mapping(get_method(method), mapping) == from_flags, method
    assert settings_from_mapping(get_method("pm-gplvm"), {"no-symmetrise": True}).symmetrise is False


@pytest.mark.parametrize("text, fragment", [
    ('[[run]]\nmethod = "pm"\nout = "a.nc"\n\n[[run]]\nmethod = "pm"\nout = "b.nc"\nsettings = { num_importanse = 4 }\n',
     "run 2: settings: 'num_importanse' is not a setting of pm"),
    ('[[run]]\nmethod = "pm"\nout = "a.nc"\nsettings = { chains = 0 }\n', "chains must be an integer >= 1"),
    ('[[run]]\nmethod = "pm"\nout = "a.nc"\nsettings = { approximation = "epp" }\n', "unknown approximation 'epp'"),
    ('[[run]]\nmethod = "gibs"\nout = "a.nc"\n', "did you mean 'gibbs'?"),
    ('[[run]]\nmethod = "vem"\nout = "a.nc"\n', "vem"),
    ('[[run]]\nmethod = "pm"\nout = "a.nc"\nmodel = "absent.gpm"\n', "no such model file"),
    ('[[run]]\nmethod = "pm"\nout = "a.nc"\ndata = "absent.json"\n', "absent.json"),
    ('[[run]]\nmethod = "pm"\nout = "a.nc"\nsetings = { chains = 2 }\n', "did you mean 'settings'?"),
    ('[[run]]\nmethod = "pm"\nout = "pm.nc"\ngrid = { approximation = ["ep", "laplace"] }\n',
     "does not name the grid key 'approximation'"),
    ('[[run]]\nmethod = "pm"\nout = "a.nc"\n\n[[run]]\nmethod = "gibbs"\nout = "a.nc"\n', "several runs write"),
    ('[[run]]\nmethod = "pm"\nout = "a.nc"\n\n[[run]]\nmethod = "nuts"\nout = "b.nc"\ncheckpoint = "c.npz"\n',
     "nuts writes no checkpoints"),
    ('[[run]]\nmethod = "pm"\nout = "a.nc"\n\n[compare]\nreference = "b.nc"\n', "is not the out of any run"),
    ('[[run]\nmethod = "pm"\n', "not valid TOML"),
])
def test_every_run_is_checked_before_any_runs(folder, text, fragment, capsys):
    path = write(folder, text)
    first_case = "num_importanse" in text  # a valid run 1 before the bad run 2: really run, nothing may start
    assert main(["run", str(path), *([] if first_case else ["--dry-run"])]) == 1
    err = capsys.readouterr().err
    assert fragment in err, err
    assert "Traceback" not in err and not any(folder.glob("*.nc"))


def test_a_missing_run_file_is_no_such_file(tmp_path):
    with pytest.raises(GpdslError, match="no such run file"):
        read_run_file(tmp_path / "absent.toml")


def test_runs_run_in_order_and_are_compared(folder, capsys):
    from gpdsl.results import arviz_compat
    from gpdsl.results.io import read_netcdf
    from gpdsl.results.method_output import results_json

    path = write(folder, '''
method = "pm"
settings = { chains = 2, warmup = 100, draws = 150, approximation = "laplace" }

[[run]]
out = "pm_{seed}.nc"
grid = { seed = [1, 2] }

[compare]
reference = "pm_1.nc"
table = "table.md"
''')
    assert main(["run", str(path), "--quiet"]) == 0
    captured = capsys.readouterr()
    for seed in (1, 2):
        results = read_netcdf(folder / f"pm_{seed}.nc")
        assert arviz_compat.root_attrs(results)["seed"] == seed
        settings = results_json(results, "settings")
        assert (settings["approximation"], settings["chains"], settings["draws"]) == ("laplace", 2, 150)
        timings = results_json(results, "timings")
        assert timings["total"] >= timings["compile"] + timings["warmup"] + timings["sampling"] > 0
    table = (folder / "table.md").read_text()
    assert "## Fits (reference: pm_1)" in table and "| pm_2 |" in table and table in captured.out
    assert "1/2 run 1 [seed=1]: pm" in captured.err and "2/2 run 1 [seed=2]: pm" in captured.err


def test_a_run_that_did_not_converge_is_named_and_the_file_exits_3(tmp_path, capsys):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(15, 2))
    values = {"N": 15, "D": 2, "X": X.tolist(), "y": (np.sin(X[:, 0]) + 0.1 * rng.normal(size=15)).tolist()}
    (tmp_path / "data.json").write_text(json.dumps(values))
    path = tmp_path / "runs.toml"
    path.write_text(f'model = "{ROOT / "models" / "gp_regression.gpm"}"\ndata = "data.json"\nseed = 3\n\n'
                    '[[run]]\nname = "short"\nmethod = "ml"\nout = "short.nc"\nsettings = { max_iterations = 2 }\n')
    assert main(["run", str(path), "--quiet"]) == 3
    err = capsys.readouterr().err
    assert "warning: short" in err and "did not converge after 2 iterations" in err and (tmp_path / "short.nc").exists()
