"""Progress on standard error (issue 37, item 3): a stage shows a bar that the batched work inside it moves, or a line
with its seconds; nothing when progress is off; and a run's stages after the chains appear with progress and vanish
with ``--quiet``."""

import json

import jax.numpy as jnp
import numpy as np
import pytest

from gpdsl.inference import progress
from gpdsl.inference.draw_map import over_draws
from tests.command_line import run_in_process


class RecordedBar:
    """Stands in for tqdm: records the steps it is moved by."""

    def __init__(self, total, **_):
        self.total, self.steps, self.closed = total, [], False

    def update(self, steps):
        self.steps.append(steps)

    def close(self):
        self.closed = True


def test_a_stage_shows_a_bar_that_the_batches_of_over_draws_move_to_its_total(capsys, monkeypatch):
    draws = np.arange(600.0).reshape(2, 300)
    with progress.draw_stage("predictions at 3 new inputs", draws):
        doubled = over_draws(lambda x: 2 * x, draws)
    err = capsys.readouterr().err
    assert "predictions at 3 new inputs" in err and "600/600" in err
    np.testing.assert_array_equal(doubled, 2 * draws)
    bars = []
    monkeypatch.setattr(progress, "bar", lambda total, **options: bars.append(RecordedBar(total)) or bars[-1])
    with progress.draw_stage("predictions", draws):
        over_draws(lambda x: 2 * x, draws)
    assert [(bar.total, bar.steps, bar.closed) for bar in bars] == [(600, [256, 256, 88], True)]


def test_a_stage_without_steps_says_its_start_and_its_seconds(capsys):
    with progress.stage("variational start"):
        progress.advance(5)  # no bar: nothing to move
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "variational start ..."
    assert lines[1].startswith("variational start: done in ") and lines[1].endswith(" s")


def test_nothing_is_shown_when_progress_is_off_or_outside_a_stage(capsys):
    draws = np.ones((1, 300))
    with progress.draw_stage("predictions", draws, enabled=False):
        over_draws(jnp.sin, draws)
    over_draws(jnp.sin, draws)
    progress.say("iteration 50", enabled=False)
    assert capsys.readouterr().err == ""


def test_an_inner_stage_moves_its_own_bar_and_the_outer_one_resumes(capsys):
    with progress.stage("outer", total=10, unit="it"):
        with progress.stage("inner", total=3, unit="it"):
            progress.advance(3)
        progress.advance(10)
    err = capsys.readouterr().err
    assert "inner: 100%" in err and "3/3" in err and "10/10" in err


def test_counted_says_one_thing_or_several():
    assert progress.counted(1, "chain") == "1 chain"
    assert progress.counted(4, "new input") == "4 new inputs"


@pytest.fixture(scope="module")
def classification_files(tmp_path_factory):
    """A small GP classification data set and new inputs, as files for the command line."""
    folder = tmp_path_factory.mktemp("progress")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 1))
    y = (X[:, 0] + 0.3 * rng.normal(size=20) > 0).astype(int)
    data, new = folder / "data.json", folder / "new.json"
    data.write_text(json.dumps({"N": 20, "D": 1, "X": X.tolist(), "y": y.tolist()}))
    new.write_text(json.dumps({"X": [[-1.0], [0.0], [0.5], [2.0]]}))
    return folder, data, new


@pytest.mark.parametrize("quiet", [False, True])
def test_pm_predictions_show_their_stage_and_quiet_hides_it(classification_files, capsys, quiet):
    """``gpdsl sample --method pm --predict``: after the chains' bar, the predictions (the approximation at each of the
    2 x 30 draws) have their own bar on standard error; ``--quiet`` shows neither."""
    folder, data, new = classification_files
    argv = ["sample", "models/gp_classification.gpm", "--data", data, "--method", "pm", "--approximation", "laplace",
            "--num-importance", "4", "--chains", "2", "--warmup", "20", "--draws", "30", "--predict", new,
            "--out", folder / f"pm_{quiet}.nc", "--overwrite", "--seed", "3", *(["--quiet"] if quiet else [])]
    status, out, err, _ = run_in_process(argv, capsys)
    assert status in (0, 3), err
    if quiet:
        assert "predictions at" not in err and "%|" not in err
    else:
        assert "sampling" in err
        assert "predictions at 4 new inputs (laplace at each draw)" in err and "60/60" in err
    assert "predictions at" not in out
