"""Dask (issue 40): a scheduler address that is malformed, or where no scheduler listens, is refused in one line
naming ``--scheduler`` within seconds (not Dask's ``OSError`` after 30 s of retries), before anything compiles or
runs, and nothing is written."""

import pytest

from tests.reliability.helpers import make_work, refused

pytest.importorskip("distributed")

UNREACHABLE = ["tcp://127.0.0.1:1", "127.0.0.1:1", "localhost:1", "tcp://127.0.0.1:9", "local:1"]
MALFORMED = ["tcp://127.0.0.1:99999", "tcp://127.0.0.1:0", "tcp://", "two words", "tcp://host/path", ""]
REACH_LIMIT = 8.0
"""Seconds an unreachable scheduler's refusal may take: the reach check's 5 s and the start of the command."""


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return make_work(tmp_path_factory.mktemp("dask"))


def commands(work, out):
    return {"sample, chain groups": ["sample", work / "gp_classification.gpm", "--data", work / "cls.json", "--method",
                                     "pm", "--chains", 2, "--warmup", 5, "--draws", 5, "--seed", 1, "--out", out],
            "fit, one task": ["fit", work / "gp_regression.gpm", "--data", work / "reg.json", "--method", "ml",
                              "--seed", 1, "--out", out]}


@pytest.mark.parametrize("scheduler", UNREACHABLE)
@pytest.mark.parametrize("command", ["sample, chain groups", "fit, one task"])
def test_an_unreachable_scheduler_is_refused_within_seconds(work, capsys, scheduler, command):
    out = work / "unreachable.nc"
    err = refused([*commands(work, out)[command], "--scheduler", scheduler], capsys, f"--scheduler {scheduler}",
                  out, quick=REACH_LIMIT, one_line=True)
    assert "no Dask scheduler can be reached" in err


@pytest.mark.parametrize("scheduler", MALFORMED)
def test_a_malformed_address_is_refused_at_once(work, capsys, scheduler):
    out = work / "malformed.nc"
    refused([*commands(work, out)["sample, chain groups"], "--scheduler", scheduler], capsys, "--scheduler", out,
            one_line=True)


@pytest.mark.parametrize("where", ["in the file", "on the command line"])
def test_a_run_file_on_an_unreachable_scheduler_is_refused_within_seconds(work, capsys, where):
    run_file = work / "dask.toml"
    scheduler = "tcp://127.0.0.1:1"
    run_file.write_text(('scheduler = "tcp://127.0.0.1:1"\n' if where == "in the file" else "")
                        + 'model = "gp_regression.gpm"\ndata = "reg.json"\nmethod = "ml"\nseed = 1\nout = "d.nc"\n')
    flags = [] if where == "in the file" else ["--scheduler", scheduler]
    refused(["run", run_file, *flags], capsys, f"--scheduler {scheduler}", work / "d.nc", quick=REACH_LIMIT)


@pytest.mark.parametrize("scheduler", ["two words", "tcp://127.0.0.1:99999"])
def test_gpdsl_run_checks_its_scheduler_flag(work, capsys, scheduler):
    run_file = work / "flag.toml"
    run_file.write_text('model = "gp_regression.gpm"\ndata = "reg.json"\nmethod = "ml"\nseed = 1\nout = "f.nc"\n')
    refused(["run", run_file, "--scheduler", scheduler, "--dry-run"], capsys, "--scheduler", work / "f.nc")
