"""Path names (issue 40): a file name longer than the system allows, or a path through a file, given to any command's
path argument is refused in one line naming the path (shortened), not an ``OSError`` traceback."""

from pathlib import Path

import pytest

from tests.reliability.helpers import make_work, refused

LONG = "a" * 5000


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return make_work(tmp_path_factory.mktemp("path_names"))


def commands(work, bad):
    sample = ["sample", work / "gp_classification.gpm", "--data", work / "cls.json", "--method", "gibbs", "--seed", 1]
    fit = ["fit", work / "gp_regression.gpm", "--data", work / "reg.json", "--method", "ml", "--seed", 1]
    return {
        "check FILE": ["check", bad + ".gpm"],
        "methods FILE": ["methods", bad + ".gpm"],
        "compile FILE": ["compile", bad + ".gpm"],
        "sample --data": ["sample", work / "gp_classification.gpm", "--data", bad + ".json", "--method", "pm",
                          "--out", work / "o.nc"],
        "sample --out": [*sample, "--out", bad + ".nc"],
        "sample --checkpoint": [*sample, "--out", work / "o.nc", "--checkpoint", bad + ".npz"],
        "sample --proposal-from": ["sample", work / "gp_classification.gpm", "--data", work / "cls.json", "--method",
                                   "pm", "--out", work / "o.nc", "--proposal-from", bad + ".nc"],
        "fit --predict": [*fit, "--out", work / "o.nc", "--predict", bad + ".json"],
        "summary FIT": ["summary", bad + ".nc"],
        "plot FIT": ["plot", bad + ".nc", "-o", work / "p.png"],
        "compare FIT": ["compare", bad + ".nc"],
        "resume CHECKPOINT": ["resume", bad + ".npz"],
        "run RUN": ["run", bad + ".toml"],
        "forecast --data": ["forecast", work / "gp_narx.gpm", "--data", bad + ".json", "--lag", 2, "--out",
                            work / "o.nc"],
    }


COMMANDS = list(commands(Path("."), "x"))


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("kind", ["too long", "through a file"])
def test_a_path_that_cannot_name_a_file_is_one_line(work, capsys, command, kind):
    bad = str(work / LONG) if kind == "too long" else str(work / "reg.json" / "inside")
    argv = commands(work, bad)[command]
    err = refused(argv, capsys, "", work / "o.nc")
    message = [line for line in err.strip().splitlines() if not line.startswith("  hint:")][-1]
    assert len(message) < 400, err
    if kind == "too long":
        assert "(5004 characters)" in err or "(5003 characters)" in err or "(5005 characters)" in err or \
               "File name too long" in err, err
