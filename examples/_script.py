"""What every script under ``examples/`` shares: a failure ends in one clear line, never a traceback.

``run(main)`` calls ``main()`` and turns any error into ``<script>: error: <what went wrong>`` on
stderr with exit status 1: a bad argument, a missing dependency, a gpdsl error (with its hint), an
unreadable file, or an unexpected exception (named by its type). Set ``GPDSL_EXAMPLES_TRACEBACK=1``
to get the traceback of an unexpected exception instead.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

UNEXPECTED = "unexpected"


class ExampleError(Exception):
    """A problem the user can fix, reported in one line."""


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line with exit status 1 (argparse's own: usage, 2)."""

    def error(self, message):
        raise ExampleError(f"{message} (see --help)")


def make_parser(doc: str | None) -> argparse.ArgumentParser:
    """An argument parser for a script, described by the first line of ``doc``."""
    description = (doc or "").strip().splitlines()[0] if doc else None
    return _Parser(description=description)


def _one_line(text: str) -> str:
    return "; ".join(line.strip() for line in str(text).splitlines() if line.strip())


def _message(error: BaseException) -> str:
    if isinstance(error, ExampleError):
        return str(error)
    if isinstance(error, ModuleNotFoundError):
        return (f"missing dependency: the module {error.name!r} is not installed "
                "(set up the environment with: make setup)")
    if isinstance(error, ImportError):
        return f"missing dependency: {error}"
    try:
        from gpdsl.errors import GpdslError
    except ImportError:
        GpdslError = ()
    if isinstance(error, GpdslError):
        return error.render()
    if isinstance(error, OSError) and error.filename is not None:
        return f"{error.filename}: {error.strerror or error}"
    return f"{UNEXPECTED} {type(error).__name__}: {error}"


def run(main) -> int:
    """Run ``main()`` and return its exit status; any error becomes one line on stderr and status 1."""
    script = Path(sys.argv[0]).name
    try:
        return main() or 0
    except KeyboardInterrupt:
        print(f"{script}: interrupted", file=sys.stderr)
        return 1
    except Exception as error:
        message = _message(error)
        if message.startswith(UNEXPECTED) and os.environ.get("GPDSL_EXAMPLES_TRACEBACK"):
            raise
        print(f"{script}: error: {_one_line(message)}", file=sys.stderr)
        return 1
