"""A ``gpdsl sample`` killed with SIGKILL, then resumed from the command line, gives the draws of an uninterrupted run
bit for bit.

The kills land at points made observable by :data:`gpdsl.storage.atomic.PAUSE_VARIABLE` (read only by tests): the process
pauses just after a checkpoint write of warmup or of sampling, or inside a write (its temporary file written, the
target not yet replaced), says so on standard error, and is killed there. Each run is a subprocess; one run is
killed at each of the three points in turn, resumed by the same command or by ``gpdsl resume``.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from gpdsl.storage.atomic import PAUSE_VARIABLE
from gpdsl.cli import main

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "models" / "gp_classification.gpm"
WARMUP, DRAWS, SEGMENT = 200, 200, 10
RUN = ["sample", str(MODEL), "--data", "data.json", "--method", "gibbs", "--chains", "2", "--warmup", str(WARMUP),
       "--draws", str(DRAWS), "--segment-size", str(SEGMENT), "--seed", "7", "--quiet"]
GROUPS = ("posterior", "sample_stats", "log_likelihood", "posterior_predictive")


def _gpdsl(cwd: Path, *argv: str, env: dict | None = None, **popen) -> subprocess.Popen:
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.Popen([sys.executable, "-m", "gpdsl.cli", *argv], cwd=cwd, env=environment,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


def _finish(process: subprocess.Popen) -> str:
    _, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    return err


def _kill_when_paused(process: subprocess.Popen, timeout: float = 90.0) -> str:
    """Wait for the pause announced on standard error, then SIGKILL the process; return what it said."""
    said, deadline = "", time.monotonic() + timeout
    while "gpdsl test: paused" not in said:
        remaining = deadline - time.monotonic()
        assert remaining > 0 and process.poll() is None, f"the run ended or never paused: {said}"
        ready, _, _ = select.select([process.stderr], [], [], remaining)
        if ready:
            said += process.stderr.readline()
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL
    return said


def _iteration(checkpoint: Path) -> int:
    with np.load(checkpoint) as stored:
        return json.loads(str(stored["meta"]))["iteration"]


def _groups(path: Path) -> dict:
    tree = xr.open_datatree(path)
    return {name: tree[name].to_dataset().load() for name in GROUPS if name in tree}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    work = tmp_path_factory.mktemp("kill")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 2))
    y = (X[:, 0] + 0.3 * rng.normal(size=20) > 0).astype(int)
    (work / "data.json").write_text(json.dumps({"N": 20, "D": 2, "X": X.tolist(), "y": y.tolist()}))
    _finish(_gpdsl(work, *RUN, "--out", "reference.nc"))
    return work, _groups(work / "reference.nc")


# One run killed three times, each kill resumed: (the pause, the checkpoint's iteration after the kill, how the
# killed run is resumed). The write count restarts in each process, so a resumed run's write N ends iteration
# (its start + N segments).
KILLS = [
    ("warmup", "5:after", 5 * SEGMENT, "again"),
    ("sampling", "25:after", 30 * SEGMENT, "again"),
    ("checkpoint write", "6", 35 * SEGMENT, "resume"),
]


@pytest.mark.slow
def test_a_run_killed_in_warmup_in_sampling_and_inside_a_write_resumes_to_the_uninterrupted_draws(reference):
    work, expected = reference
    checkpoint, out = work / "killed.npz", work / "killed.nc"
    command = [*RUN, "--checkpoint", checkpoint.name, "--out", out.name]
    resume = {"again": lambda env=None: _gpdsl(work, *command, env=env),
              "resume": lambda env=None: _gpdsl(ROOT / "tests", "resume", str(checkpoint), env=env)}
    how = "again"
    for point, pause, iteration, next_how in KILLS:
        said = _kill_when_paused(resume[how]({PAUSE_VARIABLE: pause}))
        assert ("inside" in said) == (point == "checkpoint write"), point
        assert _iteration(checkpoint) == iteration and not out.exists(), point
        assert len(list(work.glob(f".{checkpoint.name}.*.tmp"))) == (point == "checkpoint write"), point
        how = next_how
    said = _finish(resume[how]())
    assert f"resuming from checkpoint {checkpoint.name}" in said
    assert not list(work.glob(f".{checkpoint.name}.*.tmp"))
    resumed = _groups(out)
    assert resumed.keys() == expected.keys()
    for group, values in expected.items():
        for name in values.data_vars:
            np.testing.assert_array_equal(resumed[group][name].values, values[name].values, err_msg=f"{group}.{name}")


def test_a_checkpoint_of_other_data_or_settings_is_refused_naming_them(reference, capsys, monkeypatch):
    work, _ = reference
    source = work / "killed.npz"
    if not source.exists():
        pytest.skip("needs the killed run's checkpoint")
    other = json.loads((work / "data.json").read_text())
    other["y"][0] = 1 - other["y"][0]
    (work / "other.json").write_text(json.dumps(other))
    command = [*RUN, "--checkpoint", source.name, "--out", "refused.nc"]
    command[command.index("data.json")] = "other.json"
    command[command.index("--draws") + 1] = "300"
    monkeypatch.chdir(work)
    status = main(command)
    err = capsys.readouterr().err
    assert status == 1
    assert "was written by a different run" in err and "the data (sha256" in err and "draws 200 there, 300 here" in err
    assert "Traceback" not in err and not (work / "refused.nc").exists()


def test_a_write_removes_only_the_temporaries_killed_writes_to_its_target_left(tmp_path):
    from gpdsl.storage.atomic import atomic_write_text

    stale = [tmp_path / ".fit.nc.abc_1234.tmp", tmp_path / ".fit.nc.zzzzzzzz.tmp"]
    kept = [tmp_path / ".fit.nc.other.tmp", tmp_path / ".fit.nc2.abcdefgh.tmp", tmp_path / "fit.nc.abcdefgh.tmp"]
    for path in (*stale, *kept):
        path.write_text("partial")
    atomic_write_text(tmp_path / "fit.nc", "whole")
    assert (tmp_path / "fit.nc").read_text() == "whole"
    assert not any(path.exists() for path in stale) and all(path.exists() for path in kept)


def _toy_checkpoint(path):
    import jax
    import jax.numpy as jnp

    from gpdsl.inference.driver import run_chains

    step = lambda key, x, adapting: (x + jax.random.normal(key), {})  # noqa: E731
    run_chains(step, jnp.zeros(2), jax.random.PRNGKey(0), 2, 2, extract=lambda x: x, progress=False,
               checkpoint_path=path)


def test_checkpoints_that_record_no_run_are_refused_by_resume_and_by_a_run(reference, tmp_path, capsys):
    work, _ = reference
    checkpoint = tmp_path / "bare.npz"
    _toy_checkpoint(checkpoint)
    assert main(["resume", str(checkpoint)]) == 1
    assert "records no command" in capsys.readouterr().err
    command = [*RUN, "--checkpoint", str(checkpoint), "--out", str(tmp_path / "out.nc")]
    command[command.index("data.json")] = str(work / "data.json")
    status = main(command)
    err = capsys.readouterr().err
    assert status == 1 and "records no run identity" in err and not (tmp_path / "out.nc").exists()
    (tmp_path / "broken.npz").write_bytes(b"not a checkpoint")
    assert main(["resume", str(tmp_path / "broken.npz")]) == 1
    assert "is not a gpdsl checkpoint" in capsys.readouterr().err


@pytest.mark.slow
def test_killed_at_random_moments_until_it_finishes_the_run_gives_the_uninterrupted_draws(reference):
    """SIGKILL at random times (seeded) after the process starts, wherever that lands: loading, compiling, a
    segment, a checkpoint write or the results' write; the same command is run again until one run has written
    its results."""
    work, _ = reference
    checkpoint, out = work / "random.npz", work / "random.nc"
    command = [*RUN, "--warmup", "400", "--draws", "400", "--checkpoint", checkpoint.name, "--out", out.name]
    rng = np.random.default_rng(11)
    kills = 0
    for _ in range(30):
        process = _gpdsl(work, *command)
        try:
            process.wait(timeout=rng.uniform(3.0, 9.0))
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=30)
            kills += 1
            if out.exists():  # killed after its results were written: the run is complete
                break
            continue
        assert process.returncode == 0, process.stderr.read()
        break
    assert out.exists() and kills >= 1
    print(f"{kills} kills before a run finished")
    resumed = _groups(out)
    reference_run = _gpdsl(work, *command[:-4], "--out", "random_reference.nc")
    _finish(reference_run)
    uninterrupted = _groups(work / "random_reference.nc")
    for group, values in uninterrupted.items():
        for name in values.data_vars:
            np.testing.assert_array_equal(resumed[group][name].values, values[name].values, err_msg=f"{group}.{name}")
