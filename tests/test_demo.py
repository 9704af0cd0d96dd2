"""``make demo`` (issue 37): every command of the Makefile's demo recipe exits 0 and prints no warning that is
not gpdsl's own.

The commands are read from the Makefile, so the test follows the demo: ``$(BIN)/gpdsl`` runs as
``python -m gpdsl.cli`` in a subprocess (from the repository root, as ``make`` does), ``$(DEMO)`` is a temporary
folder. gpdsl's own warnings are lines that start with ``warning:`` and the summary's ``Warnings:`` block; a
Python warning (``...: UserWarning: ...``, its ``warnings.warn(`` source line) or a library's logged
``WARNING`` is a third party's. A library's logging handler may print a record's bare message, so the
subprocess marks every record of level WARNING or above at its end (``[logged WARNING by NAME]``); nothing else
of its output changes. Some notices come once a day or once per user (ArviZ 0.x's announcement of its 1.x), so
the commands run with a new cache folder (``XDG_CACHE_HOME``) that shares only PyStan's builds and matplotlib's
font list with the user's. The NUTS step builds a Stan program the first time (PyStan caches it): slow.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
THIRD_PARTY_WARNING = re.compile(r"\w*Warning\b|\bwarn\(|\bWARNING\b")
SHELL_ONLY = {"echo", "mkdir", "cat"}
RUN_MODULE = """\
import logging, runpy, sys

factory = logging.getLogRecordFactory()


def marked(*args, **kwargs):
    record = factory(*args, **kwargs)
    if record.levelno >= logging.WARNING:
        record.msg = f"{record.msg} [logged {record.levelname} by {record.name}]"
    return record


logging.setLogRecordFactory(marked)
module = sys.argv.pop(1)
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""
"""``python -c RUN_MODULE MODULE ARGS...``: ``python -m MODULE ARGS...`` with logged warnings marked."""


def demo_recipe(makefile: Path = ROOT / "Makefile") -> list[str]:
    """The lines of the ``demo`` target's recipe, continuation lines joined, without ``make``'s ``@`` and ``-``."""
    lines = makefile.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(r"demo\s*:", line))
    recipe, parts = [], []
    for line in lines[start + 1:]:
        if not line.startswith("\t"):
            break
        parts.append(line.strip().removesuffix("\\").strip())
        if not line.rstrip().endswith("\\"):
            recipe.append(" ".join(parts).lstrip("@-"))
            parts = []
    return recipe


def demo_commands(out: Path) -> list[list[str]]:
    """The demo's gpdsl commands as argument lists, ``$(DEMO)`` replaced by ``out``."""
    commands = []
    for line in demo_recipe():
        argv = shlex.split(line.replace("$(DEMO)", str(out)))
        if argv[0] == "$(BIN)/gpdsl":
            commands.append([sys.executable, "-c", RUN_MODULE, "gpdsl.cli", *argv[1:]])
        else:
            assert argv[0] in SHELL_ONLY, f"the demo runs {argv[0]!r}, which this test does not know: {line}"
    unexpanded = [arg for argv in commands for arg in argv if "$(" in arg]
    assert not unexpanded, f"Makefile variables this test does not substitute: {unexpanded}"
    return commands


def third_party_warnings(text: str) -> list[str]:
    """Lines of ``text`` that hold a warning not printed by gpdsl itself."""
    found, own_block = [], False
    for line in text.splitlines():
        if line.startswith("warning: "):
            continue
        if line.strip() == "Warnings:":
            own_block = True
            continue
        if own_block and line.startswith("  - "):
            continue
        own_block = False
        if THIRD_PARTY_WARNING.search(line):
            found.append(line)
    return found


def test_the_recipe_is_read_and_the_filter_tells_gpdsl_s_warnings_from_others(tmp_path):
    commands = demo_commands(tmp_path)
    subcommands = [argv[4] for argv in commands]
    assert subcommands[0] == "data" and {"check", "sample", "summary", "compare"} <= set(subcommands)
    assert any("--method" in argv and argv[argv.index("--method") + 1] == "nuts" for argv in commands)
    assert all(str(tmp_path) in " ".join(argv) for argv in commands if argv[4] != "check")
    own = "warning: 1 of 4 chains stopped early\nWarnings:\n  - ess_bulk below 100 for sigma\nNo sampler warnings."
    assert third_party_warnings(own) == []
    others = ["/x/arviz/stats.py:10: UserWarning: Shape validation failed", "  warnings.warn(msg)",
              "FutureWarning: the default will change", "WARNING:cmdstanpy:stan not found",
              "12:00:01 - cmdstanpy - WARNING - chain 1 failed", "RuntimeWarning: overflow in exp"]
    assert third_party_warnings("\n".join(others)) == others


def test_a_library_s_logged_and_python_warnings_are_seen(tmp_path):
    (tmp_path / "noisy.py").write_text(
        "import logging, sys, warnings\n"
        "log = logging.getLogger('somelib')\n"
        "log.addHandler(logging.StreamHandler())\n"
        "log.warning('Shape validation failed')\n"
        "log.info('not a warning')\n"
        "warnings.warn('the default will change', FutureWarning)\n"
        "print('warning: gpdsl says so', sys.argv[1:], file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", RUN_MODULE, "noisy", "--flag"], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(tmp_path)}, timeout=60)
    assert done.returncode == 0, done.stderr
    found = third_party_warnings(done.stderr)
    assert "Shape validation failed [logged WARNING by somelib]" in found
    assert any("FutureWarning: the default will change" in line for line in found)
    assert "warning: gpdsl says so ['--flag']" in done.stderr and not any("gpdsl says" in f for f in found)


def first_run_cache(folder: Path) -> Path:
    """A new cache folder, as on a user's first run, that links to the user's PyStan builds (``httpstan``) and
    matplotlib font list (a minute and some seconds to remake)."""
    user = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    folder.mkdir()
    for kept in ("httpstan", "matplotlib"):
        (user / kept).mkdir(parents=True, exist_ok=True)
        (folder / kept).symlink_to(user / kept, target_is_directory=True)
    return folder


@pytest.mark.slow
def test_make_demo_exits_0_and_prints_no_third_party_warning(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "XDG_CACHE_HOME": str(first_run_cache(tmp_path / "cache"))}
    env.pop("PYTHONWARNINGS", None)
    failures = []
    for argv in demo_commands(tmp_path):
        done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
        shown = " ".join(argv[4:])
        if done.returncode != 0:
            failures.append(f"gpdsl {shown}: exit {done.returncode}\n{done.stderr[-3000:]}")
        found = third_party_warnings(done.stdout + "\n" + done.stderr)
        if found:
            failures.append(f"gpdsl {shown}: third-party warnings:\n  " + "\n  ".join(found))
    assert not failures, "\n\n".join(failures)
    assert (tmp_path / "pima_compare.md").is_file() and (tmp_path / "pima_forest.png").is_file()
