"""Checkpoints, read (issue 40): a truncated, empty, foreign or pickled file, a damaged ``meta`` record, a recorded
command that is no sample or fit (``resume``, ``check``, ``--help``, not a list of strings) and arrays that do not fit
the run are refused in one line naming the checkpoint, by ``gpdsl resume`` and by a run given ``--checkpoint``;
never an internal error, a recursion, or NumPy's advice to load pickles."""

import json
import shutil

import numpy as np
import pytest

from tests.reliability.helpers import make_work, refused

CHAINS, WARMUP, DRAWS = 2, 2, 3


def run_argv(work, checkpoint, out="again.nc"):
    return ["sample", work / "gp_classification.gpm", "--data", work / "cls.json", "--method", "gibbs", "--chains",
            CHAINS, "--warmup", WARMUP, "--draws", DRAWS, "--seed", 1, "--quiet", "--checkpoint", checkpoint,
            "--out", work / out]


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """A folder with the checkpoint of a finished gibbs run (``checkpoint.npz``) and its arrays by name."""
    from gpdsl.cli import main

    work = make_work(tmp_path_factory.mktemp("checkpoints"))
    assert main([str(a) for a in run_argv(work, work / "checkpoint.npz", "first.nc")]) == 0
    with np.load(work / "checkpoint.npz") as stored:
        arrays = {name: stored[name] for name in stored.files}
    return work, arrays


def archive(work, arrays, name, **changes):
    """A checkpoint like the written one, with arrays changed (None: dropped)."""
    values = {**arrays, **changes}
    path = work / name
    np.savez(path, **{key: value for key, value in values.items() if value is not None})
    return path


def with_meta(work, arrays, name, **meta_changes):
    meta = json.loads(str(arrays["meta"]))
    meta.update(meta_changes)
    return archive(work, arrays, name, meta=np.asarray(json.dumps(meta)))


def with_identity(work, arrays, name, **changes):
    meta = json.loads(str(arrays["meta"]))
    identity = dict(meta["identity"], **changes)
    return with_meta(work, arrays, name, identity=identity)


def raw(work, content, name):
    path = work / name
    path.write_bytes(content)
    return path


FILES = [
    ("truncated", lambda w, a: raw(w, (w / "checkpoint.npz").read_bytes()[:3000], "truncated.npz"), "not a NumPy"),
    ("empty", lambda w, a: raw(w, b"", "empty.npz"), "not a NumPy archive"),
    ("text", lambda w, a: raw(w, b"hello", "text.npz"), "not a gpdsl checkpoint"),
    ("a pickle", lambda w, a: raw(w, b"\x80\x04\x95" + b"\0" * 40, "pickle.npz"), "not a gpdsl checkpoint"),
    ("an npy of objects", lambda w, a: _npy_of_objects(w), "pickled objects, which gpdsl never loads"),
    ("a meta of objects", lambda w, a: archive(w, a, "objects.npz", meta=np.array([{"a": 1}], dtype=object)),
     "pickled objects, which gpdsl never loads"),
    ("a meta of text", lambda w, a: archive(w, a, "garbage.npz", meta=np.asarray("garbage")), "not a NumPy archive"),
    ("a meta list", lambda w, a: archive(w, a, "list.npz", meta=np.asarray("[1, 2]")), "not a JSON object"),
    ("no meta", lambda w, a: archive(w, a, "nometa.npz", meta=None), "holds no meta record"),
    ("an identity of text", lambda w, a: with_meta(w, a, "identity.npz", identity="x"), "identity is not a record"),
]


def _npy_of_objects(work):
    path = work / "objects.npy"
    np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    return shutil.move(path, work / "objects_npy.npz")


@pytest.mark.parametrize("make, culprit", [f[1:] for f in FILES], ids=[f[0] for f in FILES])
@pytest.mark.parametrize("command", ["resume", "sample --checkpoint"])
def test_a_file_that_is_no_checkpoint_is_refused(written, capsys, make, culprit, command):
    work, arrays = written
    path = make(work, arrays)
    argv = ["resume", path] if command == "resume" else run_argv(work, path)
    err = refused(argv, capsys, culprit)
    assert str(path) in err and "allow_pickle" not in err
    assert not (work / "again.nc").exists()


COMMANDS = [
    ("resume of itself", lambda w: ["resume", str(w / "self.npz")]),
    ("check", lambda w: ["check", "gp_classification.gpm"]),
    ("run", lambda w: ["run", "runs.toml"]),
    ("--version", lambda w: ["--version"]),
    ("--help of sample", lambda w: ["sample", "--help"]),
    ("an unknown command", lambda w: ["bogus"]),
    ("numbers", lambda w: [1, 2]),
    ("a string", lambda w: "sample"),
    ("a sample without --checkpoint", lambda w: ["sample", "gp_classification.gpm", "--data", "cls.json", "--method",
                                                 "gibbs", "--out", "x.nc"]),
]


@pytest.mark.parametrize("command", [c[1] for c in COMMANDS], ids=[c[0] for c in COMMANDS])
def test_resume_refuses_a_recorded_command_that_is_no_run_with_a_checkpoint(written, capsys, command):
    work, arrays = written
    path = with_identity(work, arrays, "self.npz", command=command(work), cwd=str(work))
    err = refused(["resume", path], capsys, f"{path} is not a gpdsl checkpoint, or it is damaged")
    assert "Recursion" not in err


@pytest.mark.parametrize("cwd", [3, None, ["x"]])
def test_resume_refuses_a_recorded_directory_that_is_no_text(written, capsys, cwd):
    work, arrays = written
    path = with_identity(work, arrays, "cwd.npz", command=["sample"], cwd=cwd)
    refused(["resume", path], capsys, "its recorded command is not a list of arguments with a directory")


DAMAGED = [
    ("no chain state", {"state_0": None}, "state_0 is not a file"),
    ("a chain state of the wrong shape", {"state_0": np.zeros((7, 7))}, "chain state has shape (7, 7)"),
    ("draws of the wrong shape", {"draws_draw_0": np.zeros(1)}, "draws draw has shape (1,)"),
    ("another structure", {"state_treedef": np.asarray("x")}, "have a different structure"),
]


@pytest.mark.parametrize("changes, culprit", [d[1:] for d in DAMAGED], ids=[d[0] for d in DAMAGED])
def test_arrays_that_do_not_fit_the_run_are_refused(written, capsys, changes, culprit):
    work, arrays = written
    path = archive(work, arrays, "arrays.npz", **changes)
    refused(run_argv(work, path), capsys, culprit, work / "again.nc")


@pytest.mark.parametrize("iteration", ["x", -1, 10**6, None, 2.5])
def test_an_iteration_out_of_range_is_refused(written, capsys, iteration):
    work, arrays = written
    path = with_meta(work, arrays, "iteration.npz", iteration=iteration)
    refused(run_argv(work, path), capsys, "its iteration", work / "again.nc")


@pytest.mark.parametrize("name, value", [("num_chains", 5), ("key", [1]), ("num_draws", "x")])
def test_a_checkpoint_of_another_run_is_refused(written, capsys, name, value):
    work, arrays = written
    path = with_meta(work, arrays, "other.npz", **{name: value})
    refused(run_argv(work, path), capsys, f"was written by a different run: its {name}", work / "again.nc")
