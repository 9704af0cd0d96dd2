"""The Stan-to-C++ compiler ``stanc``: locate httpstan's bundled binary and check programs with it."""

from __future__ import annotations

import functools
import importlib.util
import os
import subprocess
import tempfile
from pathlib import Path

from gpdsl.errors import BackendError

STANC_TIMEOUT_SECONDS = 60


def find_stanc() -> Path:
    """The ``stanc`` binary shipped inside the ``httpstan`` wheel.

    Returns
    -------
    Path
        The executable.

    Raises
    ------
    BackendError
        If httpstan is not installed or its directory holds no executable ``stanc``.
    """
    spec = importlib.util.find_spec("httpstan")
    if spec is None or not spec.submodule_search_locations:
        raise BackendError("httpstan is not installed, so stanc is unavailable", hint="pip install pystan")
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "stanc"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise BackendError(
        "the httpstan package has no executable stanc binary",
        hint="reinstall PyStan from a wheel: pip install --force-reinstall httpstan pystan",
    )


@functools.cache
def stanc_version() -> str:
    """The version reported by ``stanc --version``, e.g. ``"stanc3 v2.35.0"``."""
    completed = _run_stanc(["--version"])
    if completed.returncode != 0:
        raise BackendError(f"stanc --version failed: {completed.stderr.strip()}")
    return completed.stdout.strip().removesuffix("(Unix)").strip()


def check_program(code: str, name: str = "model") -> None:
    """Run ``stanc`` on a Stan program and raise if it is rejected.

    Only the Stan-to-C++ translation runs (milliseconds); no C++ is compiled.

    Parameters
    ----------
    code : str
        The Stan program text.
    name : str, optional
        The name shown in stanc's messages (``Syntax error in 'name', line 4, ...``).

    Raises
    ------
    BackendError
        With stanc's message if the program has a syntax or semantic error.
    """
    with tempfile.TemporaryDirectory(prefix="gpdsl-stanc-") as directory:
        source = Path(directory) / "program.stan"
        source.write_text(code)
        completed = _run_stanc(
            [str(source), f"--filename-in-msg={name}", f"--o={Path(directory) / 'program.hpp'}"]
        )
    if completed.returncode != 0:
        message = (completed.stderr or completed.stdout).strip()
        raise BackendError(f"stanc rejected the Stan program:\n{message}")


def _run_stanc(arguments: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(find_stanc()), *arguments],
        capture_output=True,
        text=True,
        timeout=STANC_TIMEOUT_SECONDS,
    )
