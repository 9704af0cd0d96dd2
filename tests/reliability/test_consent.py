"""Consent lives on the command line and in the Python call, never in a file: resume, run files and checkpoints
grant no permission to run external code; each refusal is one line naming ``--allow-external``; a failing external
function is a user error naming it; a path-like name is refused saying external code needs the flag."""

from __future__ import annotations

import json
import sys
import uuid

import numpy as np
import pytest

from gpdsl import api
from gpdsl.externals import ExternalRefused
from tests.command_line import run_in_process

MODEL = """// an external likelihood
data {{ int N; vector[N] x; vector[N] y; }}
parameters {{ real<lower=0> ell ~ lognormal(0, 1); real<lower=0> s ~ lognormal(-1, 0.5); }}
model {{ f ~ gp(x, rbf(lengthscale = ell)); y ~ external("{function}", f, s); }}
"""
SHORT = ["--method", "gibbs", "--chains", "2", "--warmup", "10", "--draws", "10", "--seed", "1", "--quiet"]
PROBE = """import pathlib
pathlib.Path(__file__).with_suffix(".imported").write_text("imported")

def loglik(y, f, s):
    pathlib.Path(__file__).with_suffix(".called").write_text("called")
    import jax.scipy.stats as stats
    import jax.numpy as jnp
    return jnp.sum(stats.norm.logpdf(y, f, s))
"""


def write_run(directory, function):
    """A model calling ``function`` and its data in ``directory``; returns the two paths."""
    rng = np.random.default_rng(0)
    x = np.linspace(0, 1, 10)
    (directory / "d.json").write_text(json.dumps({"N": 10, "x": x.tolist(),
                                                  "y": (np.sin(6 * x) + 0.2 * rng.normal(size=10)).tolist()}))
    (directory / "m.gpm").write_text(MODEL.format(function=function))
    return directory / "m.gpm", directory / "d.json"


def probe_module(directory, monkeypatch):
    """A module (fresh name) that marks its import and each call of its likelihood with a file beside it."""
    name = f"consent_probe_{uuid.uuid4().hex[:12]}"
    (directory / f"{name}.py").write_text(PROBE)
    monkeypatch.syspath_prepend(str(directory))
    return name, directory / f"{name}.imported", directory / f"{name}.called"


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if "error" in line]


def crafted_checkpoint(path, command, cwd):
    """A file shaped as a checkpoint whose identity records ``command`` run in ``cwd``."""
    with open(path, "wb") as stream:
        np.savez(stream, meta=np.asarray(json.dumps({"identity": {"command": command, "cwd": str(cwd)}})))


def test_sample_without_the_flag_is_refused_in_one_line_naming_it(tmp_path, capsys):
    model, data = write_run(tmp_path, "gpdsl.testing.external_likelihoods:normal_jax")
    status, _, err, _ = run_in_process(["sample", model, "--data", data, *SHORT, "--out", tmp_path / "fit.nc"],
                                       capsys)
    assert status == 1 and len(err.strip().splitlines()) == 1, err
    assert "m.gpm:4:" in err and "--allow-external" in err and "normal_jax" in err
    assert not (tmp_path / "fit.nc").exists()


def test_the_python_refusal_is_one_line_naming_the_flag_and_the_keyword(tmp_path):
    model, data = write_run(tmp_path, "gpdsl.testing.external_likelihoods:normal_jax")
    with pytest.raises(ExternalRefused) as refused:
        api.sample(model, data, "gibbs", seed=1, chains=2, warmup=10, draws=10)
    rendered = refused.value.render()
    assert "\n" not in rendered and "--allow-external" in rendered and "allow_external=True" in rendered


def test_a_checkpoint_recording_allow_external_grants_nothing_to_resume(tmp_path, capsys, monkeypatch):
    name, imported, called = probe_module(tmp_path, monkeypatch)
    write_run(tmp_path, f"{name}:loglik")
    checkpoint = tmp_path / "c.npz"
    command = ["sample", "m.gpm", "--data", "d.json", *SHORT, "--allow-external", "--checkpoint", "c.npz",
               "--out", "fit.nc"]
    crafted_checkpoint(checkpoint, command, tmp_path)
    monkeypatch.chdir(tmp_path)
    status, _, err, _ = run_in_process(["resume", checkpoint], capsys)
    assert status == 1 and len(error_lines(err)) == 1 and "Traceback" not in err, err
    assert "--allow-external" in error_lines(err)[0] and "c.npz" in error_lines(err)[0]
    assert not imported.exists() and not called.exists() and name not in sys.modules
    assert not (tmp_path / "fit.nc").exists()


@pytest.mark.parametrize("abbreviated", ["--allow-ext", "--allow"])
def test_an_abbreviated_flag_in_a_checkpoint_grants_nothing_either(tmp_path, capsys, monkeypatch, abbreviated):
    name, imported, _ = probe_module(tmp_path, monkeypatch)
    write_run(tmp_path, f"{name}:loglik")
    command = ["sample", "m.gpm", "--data", "d.json", *SHORT, abbreviated, "--checkpoint", "c.npz", "--out", "fit.nc"]
    crafted_checkpoint(tmp_path / "c.npz", command, tmp_path)
    monkeypatch.chdir(tmp_path)
    status, _, err, _ = run_in_process(["resume", tmp_path / "c.npz"], capsys)
    assert status == 1 and "--allow-external" in err and not imported.exists(), err
    assert abbreviated + " " not in err.splitlines()[0] + " "


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A finished gibbs run of an external likelihood with ``--checkpoint``, recorded with --allow-external and
    --overwrite."""
    import contextlib
    import io
    import os

    from gpdsl.cli import main

    directory = tmp_path_factory.mktemp("finished")
    write_run(directory, "gpdsl.testing.external_likelihoods:normal_jax")
    here = os.getcwd()
    os.chdir(directory)
    try:
        with contextlib.redirect_stderr(io.StringIO()) as err:
            status = main(["sample", "m.gpm", "--data", "d.json", *SHORT, "--allow-external", "--overwrite",
                           "--checkpoint", "c.npz", "--out", "fit.nc"])
    finally:
        os.chdir(here)
    assert status == 0, err.getvalue()
    return directory


def test_resume_runs_external_code_only_with_its_own_flag(finished_run, capsys, monkeypatch):
    out = finished_run / "fit.nc"
    out.unlink(missing_ok=True)
    monkeypatch.chdir(finished_run)
    status, _, err, _ = run_in_process(["resume", finished_run / "c.npz"], capsys)
    assert status == 1 and len(error_lines(err)) == 1 and "Traceback" not in err, err
    assert "gpdsl resume runs it only with --allow-external" in err and not out.exists()
    status, _, err, _ = run_in_process(["resume", finished_run / "c.npz", "--allow-external"], capsys)
    assert status == 0 and out.exists(), err


def test_resume_replaces_an_output_only_with_its_own_overwrite(finished_run, capsys, monkeypatch):
    out = finished_run / "fit.nc"
    out.write_text("kept")
    monkeypatch.chdir(finished_run)
    status, _, err, _ = run_in_process(["resume", finished_run / "c.npz", "--allow-external"], capsys)
    assert status == 1 and "fit.nc: the file exists" in err and out.read_text() == "kept", err
    status, _, err, _ = run_in_process(["resume", finished_run / "c.npz", "--allow-external", "--overwrite"], capsys)
    assert status == 0 and out.read_bytes()[:4] == b"\x89HDF", err


@pytest.mark.parametrize("command", [["resume", "c.npz"], ["check", "m.gpm"], ["data", "--list"], [1, 2], "sample"])
def test_a_checkpoint_recording_another_command_is_refused_in_one_line(tmp_path, capsys, monkeypatch, command):
    crafted_checkpoint(tmp_path / "c.npz", command, tmp_path)
    monkeypatch.chdir(tmp_path)
    status, _, err, _ = run_in_process(["resume", tmp_path / "c.npz"], capsys)
    first, *rest = err.strip().splitlines()
    assert status == 1 and "c.npz" in first and all(line.startswith("  hint: ") for line in rest), err


def test_a_run_file_cannot_allow_external_code(tmp_path, capsys, monkeypatch):
    name, imported, called = probe_module(tmp_path, monkeypatch)
    write_run(tmp_path, f"{name}:loglik")
    run = 'model = "m.gpm"\ndata = "d.json"\nmethod = "gibbs"\nout = "fit.nc"\nseed = 1\n'
    (tmp_path / "run.toml").write_text(run + "allow_external = true\n")
    for flags in ([], ["--allow-external"]):
        status, _, err, _ = run_in_process(["run", tmp_path / "run.toml", "--dry-run", *flags], capsys)
        assert status == 1 and len(err.strip().splitlines()) == 1, err
        assert "a run file cannot set allow_external" in err and "gpdsl run --allow-external" in err
    (tmp_path / "run.toml").write_text(run)
    status, _, err, _ = run_in_process(["run", tmp_path / "run.toml", "--dry-run"], capsys)
    assert status == 1 and "--allow-external" in err and len(error_lines(err)) == 1, err
    assert not imported.exists() and not called.exists()
    status, _, err, _ = run_in_process(["run", tmp_path / "run.toml", "--dry-run", "--allow-external"], capsys)
    assert status == 0, err


@pytest.mark.parametrize("function, named", [
    ("os:system", "os:system failed: TypeError"),
    ("gpdsl.testing.external_likelihoods:failing", "failing failed: ValueError: the pricer did not converge"),
    ("builtins:len", "builtins:len failed: TypeError"),
])
@pytest.mark.parametrize("groups", [[], ["--chain-groups", "2"]])
def test_a_failing_external_function_is_a_user_error_naming_it(tmp_path, capsys, caplog, function, named, groups):
    model, data = write_run(tmp_path, function)
    status, _, err, _ = run_in_process(["sample", model, "--data", data, *SHORT, "--allow-external", *groups,
                                        "--out", tmp_path / "fit.nc"], capsys)
    assert status == 1 and len(err.strip().splitlines()) == 1, err
    assert named in err and "internal error" not in err and "Traceback" not in err
    assert not [record for record in caplog.records if record.exc_info], "a traceback was logged"
    assert not (tmp_path / "fit.nc").exists()


@pytest.mark.parametrize("name", ["../../x:fn", "/etc/passwd:fn", "./x:fn", "..\\\\x:fn", "x/y.py:fn"])
@pytest.mark.parametrize("flags", [[], ["--allow-external"]])
def test_a_path_like_name_is_refused_saying_external_code_needs_the_flag(tmp_path, capsys, name, flags):
    model, data = write_run(tmp_path, name)
    status, _, err, _ = run_in_process(["sample", model, "--data", data, *SHORT, *flags, "--out", tmp_path / "f.nc"],
                                       capsys)
    first = err.splitlines()[0]
    assert status == 1 and "m.gpm:4:" in first and "file path" in first and "--allow-external" in first, err
    assert "Traceback" not in err and not (tmp_path / "f.nc").exists()
