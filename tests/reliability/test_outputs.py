"""Outputs: a run claims its ``--out`` before it starts, so that a second run with the same output is refused
(naming it) instead of one silently replacing the other, and a killed run's claim blocks nothing; without
``--overwrite`` the output is created new; a full device is reported as "no space left on device", naming the file,
with nothing half-written; control characters from data and model files are escaped in every message."""

from __future__ import annotations

import errno
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections import namedtuple
from pathlib import Path

import numpy as np
import pytest

from gpdsl import api
from gpdsl.errors import GpdslError
from gpdsl.results import arviz_compat
from gpdsl.results.io import read_netcdf
from gpdsl.results.method_output import results_json
from gpdsl.source import printable
from gpdsl.storage import claims
from gpdsl.storage.atomic import PAUSE_VARIABLE, atomic_write_text
from tests.command_line import run_in_process
from tests.reliability.helpers import regression_file

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "models" / "gp_regression.gpm"
FIT = ["fit", MODEL, "--method", "ml", "--quiet"]
SAMPLE = ["sample", MODEL, "--method", "gibbs", "--chains", "2", "--warmup", "10", "--draws", "10", "--seed", "1",
          "--quiet"]


@pytest.fixture
def data(tmp_path):
    return regression_file(tmp_path)


def gpdsl(*argv, env=None) -> subprocess.Popen:
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.Popen([sys.executable, "-m", "gpdsl.cli", *map(str, argv)], env=environment,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def leftovers(directory: Path) -> list[str]:
    """Temporary and lock files left in ``directory``."""
    return sorted(p.name for p in directory.iterdir() if p.name.endswith((".tmp", ".lock")))


def test_two_runs_started_at_once_with_the_same_out_one_is_refused_naming_it(tmp_path, data):
    out = tmp_path / "r.nc"
    runs = {seed: gpdsl(*FIT, "--data", data, "--seed", seed, "--out", out) for seed in (1, 2)}
    finished = {seed: (run.wait(timeout=120), run.communicate()[1]) for seed, run in runs.items()}
    statuses = sorted(status for status, _ in finished.values())
    assert statuses == [0, 1], finished
    winner = next(seed for seed, (status, _) in finished.items() if status == 0)
    refused = next(err for status, err in finished.values() if status == 1)
    assert f"cannot write results to {out}" in refused and "Traceback" not in refused, refused
    assert "another gpdsl run" in refused or "the file exists" in refused
    assert int(arviz_compat.root_attrs(read_netcdf(out))["seed"]) == winner
    assert leftovers(tmp_path) == []


def _paused(process: subprocess.Popen, timeout: float = 60.0) -> str:
    said, deadline = "", time.monotonic() + timeout
    while "gpdsl test: paused" not in said:
        remaining = deadline - time.monotonic()
        assert remaining > 0 and process.poll() is None, f"the run ended or never paused: {said}"
        if select.select([process.stderr], [], [], remaining)[0]:
            said += process.stderr.readline()
    return said


def test_a_run_is_refused_while_another_writes_its_out_and_a_killed_runs_claim_blocks_nothing(tmp_path, data,
                                                                                              capsys):
    out = tmp_path / "r.nc"
    first = gpdsl(*FIT, "--data", data, "--seed", 1, "--out", out, env={PAUSE_VARIABLE: "1"})
    try:
        _paused(first)
        status, _, err, _ = run_in_process([*FIT, "--data", data, "--seed", 2, "--out", out], capsys)
        assert status == 1 and f"another gpdsl run (process {first.pid} on" in err and str(out) in err, err
        assert not out.exists()
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    assert (tmp_path / ".r.nc.lock").exists()
    status, _, err, _ = run_in_process([*FIT, "--data", data, "--seed", 2, "--out", out], capsys)
    assert status == 0 and int(arviz_compat.root_attrs(read_netcdf(out))["seed"]) == 2, err
    assert leftovers(tmp_path) == []


def test_a_second_claim_in_the_same_process_is_the_first(tmp_path):
    first = claims.claim(tmp_path / "x.nc", "results")
    assert claims.claim(tmp_path / "x.nc", "results") is first and claims.held(tmp_path / "x.nc") is first
    atomic_write_text(tmp_path / "x.nc", "done")
    assert claims.held(tmp_path / "x.nc") is None and leftovers(tmp_path) == []


def test_without_overwrite_a_file_that_appears_during_the_run_is_kept_and_the_results_too(tmp_path, data):
    out = tmp_path / "r.nc"
    prepared = api.prepare(MODEL, data, "ml", seed=1, out=out)
    out.write_text("written by another program meanwhile")
    with pytest.raises(GpdslError, match="appeared while this run ran") as refused:
        api.execute(prepared)
    kept = tmp_path / f"r.{os.getpid()}.nc"
    assert out.read_text() == "written by another program meanwhile" and str(kept) in refused.value.message
    assert int(arviz_compat.root_attrs(read_netcdf(kept))["seed"]) == 1 and leftovers(tmp_path) == []


def _full_disk(monkeypatch):
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr("shutil.disk_usage", lambda path: usage(10**6, 10**6, 0))


def _fails_half_way(error):
    def write(results, path):
        Path(path).write_bytes(b"\x89HDF\r\n\x1a\n half")
        raise error

    return write


@pytest.mark.parametrize("error", [RuntimeError("NetCDF: HDF error"),
                                   OSError(errno.ENOSPC, "No space left on device")])
def test_a_full_disk_at_the_results_write_is_said_with_nothing_half_written(tmp_path, data, capsys, monkeypatch,
                                                                            error):
    out = tmp_path / "r.nc"
    _full_disk(monkeypatch)
    monkeypatch.setattr(arviz_compat, "to_netcdf", _fails_half_way(error))
    status, _, err, _ = run_in_process([*FIT, "--data", data, "--seed", 1, "--out", out], capsys)
    assert status == 1 and f"cannot write results to {out}: no space left on device" in err.splitlines()[0], err
    assert "internal error" not in err and not out.exists() and leftovers(tmp_path) == []


def test_an_hdf_error_with_space_left_is_not_called_a_full_disk(tmp_path, data, capsys, monkeypatch):
    monkeypatch.setattr(arviz_compat, "to_netcdf", _fails_half_way(RuntimeError("NetCDF: HDF error")))
    status, _, err, _ = run_in_process([*FIT, "--data", data, "--seed", 1, "--out", tmp_path / "r.nc"], capsys)
    assert status != 0 and "no space left" not in err and leftovers(tmp_path) == []


def test_a_full_disk_at_a_checkpoint_write_stops_the_run_with_exit_1(tmp_path, data, capsys, monkeypatch):
    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(np, "savez", full)
    checkpoint, out = tmp_path / "c.npz", tmp_path / "r.nc"
    status, _, err, _ = run_in_process([*SAMPLE, "--data", data, "--checkpoint", checkpoint, "--out", out], capsys)
    assert status == 1 and f"cannot write checkpoint to {checkpoint}: no space left on device" in err, err
    assert not out.exists() and not checkpoint.exists() and leftovers(tmp_path) == []


def test_after_a_full_disk_at_the_results_write_the_checkpoint_resumes_the_run(tmp_path, data, capsys, monkeypatch):
    checkpoint, out = tmp_path / "c.npz", tmp_path / "r.nc"
    command = [*SAMPLE, "--data", data, "--checkpoint", checkpoint, "--out", out]
    with monkeypatch.context() as full:
        _full_disk(full)
        full.setattr(arviz_compat, "to_netcdf", _fails_half_way(RuntimeError("NetCDF: HDF error")))
        status, _, err, _ = run_in_process(command, capsys)
    assert status == 1 and "no space left on device" in err and checkpoint.exists() and not out.exists(), err
    status, _, err, _ = run_in_process(command, capsys)
    assert status == 0 and "resuming from checkpoint" in err and out.exists(), err


def test_control_characters_of_a_model_file_are_escaped(tmp_path, capsys):
    model = tmp_path / "m.gpm"
    model.write_text("data { int N; }\nparameters { real a\x1b[2J\u202e ~ normal(0, 1); }\n")
    status, _, err, _ = run_in_process(["check", model], capsys)
    assert status == 1 and "\\x1b" in err and "\x1b" not in err and "\u202e" not in err, err
    source, caret = err.splitlines()[1:3]
    assert source.index("\\x1b") == caret.index("^"), err


@pytest.mark.parametrize("name, content, shown", [
    ("values.json", json.dumps({"N": "\x1b[2Jabc", "D": 1, "X": [[1.0]], "y": [1.0]}), "\\u001b[2Jabc"),
    ("columns.csv", "X.1,y\x1b[31m\n1,2\n3,4\n", "y\\x1b[31m"),
    ("names.json", json.dumps({"N": 2, "D": 1, "X": [[1.0], [2.0]], "y": [1.0, 2.0], "e\x1b[31mvil\x9b": 1}),
     "e\\x1b[31mvil\\x9b"),
])
def test_control_characters_of_a_data_file_are_escaped(tmp_path, capsys, name, content, shown):
    (tmp_path / name).write_text(content)
    status, _, err, _ = run_in_process([*FIT, "--data", tmp_path / name, "--seed", 1, "--out", tmp_path / "r.nc"],
                                       capsys)
    assert status in (0, 1) and shown in err and "\x1b" not in err and "\x9b" not in err, err


def test_printable_escapes_every_control_character_but_tab_and_newline():
    controls = [chr(c) for c in (*range(0x20), *range(0x7f, 0xa0), 0x200e, 0x200f, *range(0x202a, 0x202f),
                                 *range(0x2066, 0x206a))]
    shown = printable("".join(controls))
    assert "\t" in shown and "\n" in shown
    assert not any(c in shown for c in controls if c not in "\t\n")
    assert printable("plain ascii, é and ∑") == "plain ascii, é and ∑"


def test_an_error_escapes_its_message_and_hint():
    rendered = GpdslError("bad \x1b[31mname", hint="try \x07 this").render()
    assert rendered == "error: bad \\x1b[31mname\n  hint: try \\x07 this"


def test_every_output_is_claimed_until_written_then_released(tmp_path, data):
    out = tmp_path / "r.nc"
    prepared = api.prepare(MODEL, data, "ml", seed=1, out=out)
    assert claims.held(out) is not None and (tmp_path / ".r.nc.lock").exists()
    results = api.execute(prepared)
    assert claims.held(out) is None and leftovers(tmp_path) == []
    assert results_json(read_netcdf(out), "timings")["total"] > 0


@pytest.fixture
def tiny_device(tmp_path):
    """A real file system of 48 KiB (a tmpfs), too small for a results file; skipped where mounting is not
    permitted (the monkeypatched tests above still run)."""
    mount_point = tmp_path / "tiny"
    mount_point.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48k", "tmpfs", str(mount_point)],
                             capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.strip() or mounted.returncode}")
    yield mount_point
    subprocess.run(["umount", "--lazy", str(mount_point)], check=False)


@pytest.mark.parametrize("target", ["results", "checkpoint"])
def test_a_really_full_device_is_said_with_nothing_half_written(tmp_path, tiny_device, data, capsys, target):
    """On a full device the results are not written at all, and a checkpoint is the last whole one written."""
    out = (tiny_device if target == "results" else tmp_path) / "r.nc"
    checkpoint = (tiny_device if target == "checkpoint" else tmp_path) / "c.npz"
    status, _, err, _ = run_in_process([*SAMPLE, "--draws", 400, "--data", data, "--checkpoint", checkpoint,
                                        "--out", out], capsys)
    path = out if target == "results" else checkpoint
    assert status == 1 and f"cannot write {target} to {path}: no space left on device" in err, err
    assert "internal error" not in err and "Traceback" not in err and not out.exists()
    left = sorted(p.name for p in tiny_device.iterdir())
    assert left in ([], ["c.npz"]), f"left on the full device: {left}"
    if left:
        with np.load(checkpoint, allow_pickle=False) as earlier:
            assert "meta" in earlier.files, "the checkpoint left is not a whole earlier one"
