"""The README's commands: every data file they use is made by a `gpdsl data` command shown, and reads."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest

from gpdsl.api import check_file, new_inputs_from_file, output_variables
from gpdsl.cli import main
from gpdsl.data.io import load_data
from gpdsl.datasets.model_data import loaders

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
FILE_FLAGS = ("--data", "--predict", "--labels")


def shell_commands(text: str) -> list[list[str]]:
    """The gpdsl commands of the README's ``sh`` blocks, continuation lines joined, ``&&`` split."""
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.DOTALL):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            for part in line.split("#")[0].split("&&"):
                argv = shlex.split(part)
                if argv and argv[0] == "gpdsl" and "..." not in argv:
                    commands.append(argv[1:])
    return commands


COMMANDS = shell_commands(README)
DATA = [argv for argv in COMMANDS if argv[0] == "data" and "-o" in argv]
USES = [argv for argv in COMMANDS if argv[0] != "data"]


def _after(argv, flag):
    return argv[argv.index(flag) + 1] if flag in argv else None


def test_every_data_file_the_readme_uses_is_made_by_a_command_it_shows():
    made = {_after(argv, "-o") for argv in DATA}
    used = {_after(argv, flag) for argv in USES for flag in FILE_FLAGS} - {None}
    assert used and used <= made, used - made
    assert {"data.json", "new.json", "oil.json", "labels.json", "series.json"} <= made


def test_the_readme_data_commands_write_what_its_models_read(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GPDSL_CACHE_DIR", str(tmp_path / "cache"))
    mirror = os.environ.get("GPDSL_DATA_MIRROR")
    written = set()
    for argv in DATA:
        if not mirror and "offline" not in loaders()[argv[1]].description:
            continue
        assert main(argv) == 0, argv
        written.add(_after(argv, "-o"))
    if not mirror:
        assert {"data.json", "new.json", "series.json"} <= written
    checked = 0
    for argv in USES:
        data, model_path = _after(argv, "--data"), next((a for a in argv if a.endswith(".gpm")), None)
        if data not in written or model_path is None or argv[0] not in ("sample", "fit"):
            continue
        model, _ = check_file(ROOT / model_path)
        load_data(data, model, allow_missing=output_variables(model))
        predict, method = _after(argv, "--predict"), _after(argv, "--method") or \
            {"sample": "nuts", "fit": "vem"}[argv[0]]
        if predict in written:
            assert new_inputs_from_file(predict, model, method) is not None
        checked += 1
    assert checked >= 2


@pytest.mark.parametrize("argv", USES, ids=lambda argv: " ".join(argv[:3]))
def test_the_readme_commands_parse(argv):
    from gpdsl.cli import build_parser

    build_parser().parse_args(argv)


def test_the_readme_counts_the_shipped_model_files():
    count = len(list((ROOT / "models").glob("*.gpm")))
    assert f"`models/` holds {count} model files" in (ROOT / "README.md").read_text()
