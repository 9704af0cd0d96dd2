"""A run resumed from a checkpoint records the seconds of all its segments (before and after the kill), and
``gpdsl compare`` measures its ESS per second over the whole run."""

from __future__ import annotations

import json
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gpdsl.inference.driver import Interrupted, run_chains
from gpdsl.inference.optimise import adam
from gpdsl.results.compare import compare
from gpdsl.results.io import read_netcdf
from gpdsl.results.method_output import results_json
from gpdsl.storage.checkpoint import elapsed_before
from tests.command_line import run_in_process
from tests.reliability.helpers import regression_file

ROOT = Path(__file__).resolve().parents[2]
PAUSE = 0.01
WARMUP, DRAWS, SEGMENT = 20, 20, 5


def slow_step(rng_key, position, adapting):
    """A random walk whose every iteration sleeps :data:`PAUSE` seconds on the host (at least: per chain, where
    chains share a device)."""
    def pause(value):
        time.sleep(PAUSE)
        return np.asarray(value)

    position = jax.pure_callback(pause, jax.ShapeDtypeStruct(position.shape, position.dtype), position,
                                 vmap_method="sequential")
    return position + jax.random.normal(rng_key, position.shape), {"moved": jnp.ones(())}


def chains(path, on_segment=None):
    return run_chains(slow_step, jnp.zeros((2, 1)), jax.random.key(0), WARMUP, DRAWS, extract=lambda x: x,
                      segment_size=SEGMENT, progress=False, checkpoint_path=path, resume=True, on_segment=on_segment)


def test_a_resumed_chain_run_adds_the_seconds_of_its_earlier_segments(tmp_path):
    path = tmp_path / "c.npz"

    def stop(iteration, phase):
        if iteration >= WARMUP + SEGMENT:
            raise Interrupted("killed by the test")

    with pytest.raises(Interrupted):
        chains(path, stop)
    with np.load(path) as stored:
        before = json.loads(str(stored["meta"]))
    assert before["timings"]["warmup"] >= WARMUP * PAUSE and before["elapsed"] >= before["timings"]["warmup"]
    resumed = chains(path).timings
    assert resumed["resumed_at"] == WARMUP + SEGMENT
    assert resumed["warmup"] == before["timings"]["warmup"]
    assert resumed["sampling"] >= DRAWS * PAUSE > before["timings"]["sampling"]
    assert resumed["compile"] >= before["timings"]["compile"]
    assert resumed["total"] >= before["elapsed"] + (DRAWS - SEGMENT) * PAUSE
    assert elapsed_before(path) >= before["elapsed"]


def test_a_resumed_optimisation_adds_the_seconds_of_its_earlier_chunks(tmp_path):
    path = tmp_path / "adam.npz"

    def objective(x, key, batch):
        return -jnp.sum((x - 1.0) ** 2)

    class Killed(Exception):
        pass

    def slow_then_killed(steps, value):
        time.sleep(0.1)
        if steps == 30:
            raise Killed

    with pytest.raises(Killed):
        adam.maximise(objective, np.zeros(2), [adam.Phase(50)], chunk=10, checkpoint=path, report=slow_then_killed)
    earlier = elapsed_before(path)
    assert earlier >= 0.2
    resumed = adam.maximise(objective, np.zeros(2), [adam.Phase(50)], chunk=10, checkpoint=path,
                            report=lambda steps, value: time.sleep(0.1))
    assert resumed.seconds >= earlier + 0.2 and resumed.seconds >= elapsed_before(path) >= earlier + 0.1


@pytest.fixture
def data(tmp_path):
    return regression_file(tmp_path)


def test_a_resumed_command_line_run_records_and_compares_by_the_whole_runs_seconds(tmp_path, data, capsys,
                                                                                    monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = ["sample", ROOT / "models" / "gp_regression.gpm", "--data", data, "--method", "gibbs", "--chains", "2",
           "--warmup", "30", "--draws", "30", "--segment-size", "10", "--seed", "3", "--quiet",
           "--checkpoint", "c.npz"]
    status, _, err, _ = run_in_process([*run, "--out", "first.nc"], capsys)
    assert status == 0, err
    whole = results_json(read_netcdf(tmp_path / "first.nc"), "timings")
    status, _, err, _ = run_in_process([*run, "--out", "resumed.nc"], capsys)
    assert status == 0 and "resuming from checkpoint" in err, err
    resumed = results_json(read_netcdf(tmp_path / "resumed.nc"), "timings")
    assert resumed["warmup"] == whole["warmup"] > 0 and resumed["sampling"] == whole["sampling"] > 0
    assert resumed["compile"] >= whole["compile"]
    assert resumed["total"] >= resumed["compile"] + resumed["warmup"] + resumed["sampling"]
    fits = compare(tmp_path / "first.nc", tmp_path / "resumed.nc").fits
    assert fits["min_ess_per_s"].iloc[0] == pytest.approx(fits["min_ess_per_s"].iloc[1], rel=1e-12)
    status, _, err, _ = run_in_process(["resume", "c.npz", "--overwrite"], capsys)
    assert status == 0 and "resuming from checkpoint" in err, err
    again = results_json(read_netcdf(tmp_path / "first.nc"), "timings")
    assert again["warmup"] == whole["warmup"] and again["sampling"] == whole["sampling"]
