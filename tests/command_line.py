"""The command line run in-process, as the tests that check its statuses and messages run it."""

from __future__ import annotations

import time

from gpdsl.cli import main


def run_in_process(argv, capsys) -> tuple[int, str, str, float]:
    """``(status, stdout, stderr, seconds)`` of ``gpdsl ARGV`` (argparse's exits included)."""
    capsys.readouterr()
    started = time.perf_counter()
    try:
        status = main([str(a) for a in argv])
    except SystemExit as exit_:
        status = exit_.code
    captured = capsys.readouterr()
    return status, captured.out, captured.err, time.perf_counter() - started
