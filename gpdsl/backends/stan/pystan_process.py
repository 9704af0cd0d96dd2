"""The parent side of the PyStan backend: run one request in a ``pystan_worker`` subprocess."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable, Union

import numpy as np

import gpdsl
from gpdsl.backends.stan.pystan_support import pystan_unavailable
from gpdsl.backends.stan.pystan_worker import NOTICE
from gpdsl.errors import BackendError

Progress = Union[bool, Callable[[str], None]]

WORKER_MODULE = "gpdsl.backends.stan.pystan_worker"
OUTPUT_LINES_KEPT = 40


def to_json_value(value: Any) -> Any:
    """Turn data (NumPy arrays and scalars, booleans, nested lists and dicts) into JSON values."""
    if isinstance(value, dict):
        return {str(key): to_json_value(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json_value(item) for item in value]
    if isinstance(value, np.ndarray):
        return to_json_value(value.tolist())
    if isinstance(value, np.generic):
        return to_json_value(value.item())
    if isinstance(value, bool):
        return int(value)
    return value


def progress_printer(progress: Progress) -> Callable[[str], None]:
    """The line handler for ``progress``: stderr for ``True``, nothing for ``False``, else the callable."""
    if callable(progress):
        return progress
    if progress:
        return lambda line: print(line, file=sys.stderr, flush=True)
    return lambda line: None


def run_worker(
    command: str,
    program_code: str,
    data: dict,
    options: dict,
    seed: int | None = None,
    progress: Progress = True,
) -> tuple[dict, dict[str, np.ndarray]]:
    """Run ``command`` in a fresh ``pystan_worker`` process and return its metadata and arrays.

    Parameters
    ----------
    command : {"sample", "log_prob", "unconstrain", "layout"}
        What the worker does after building the model.
    program_code : str
        The Stan program.
    data : dict
        The Stan data, JSON-encodable after :func:`to_json_value`.
    options : dict
        The command's options.
    seed : int, optional
        PyStan's ``random_seed``.
    progress : bool or callable
        Where the worker's progress lines go (see :func:`progress_printer`).

    Raises
    ------
    BackendError
        With Stan's message if the worker reports an error, or with the worker's last output
        lines if it dies without a result, or with :func:`pystan_unavailable`'s reason before it starts.
    """
    unavailable = pystan_unavailable()
    if unavailable is not None:
        raise BackendError(unavailable)
    show = progress_printer(progress)
    with tempfile.TemporaryDirectory(prefix="gpdsl-pystan-") as directory:
        result_dir = Path(directory)
        request_path = result_dir / "request.json"
        request = {
            "command": command,
            "program_code": program_code,
            "data": to_json_value(data),
            "seed": seed,
            "options": to_json_value(options),
        }
        request_path.write_text(json.dumps(request))
        returncode, last_lines = _run_streaming(request_path, result_dir, show)
        result_path = result_dir / "result.json"
        if not result_path.exists():
            output = "\n".join(last_lines)
            raise BackendError(
                f"the PyStan worker exited with status {returncode} without a result; "
                f"its last output:\n{output}",
                hint="a first build needs about 2.5 GB of memory; rerun with progress=True to see the log",
            )
        metadata = json.loads(result_path.read_text())
        if "error" in metadata:
            raise BackendError(f"PyStan failed ({command}): {metadata['error']}")
        with np.load(result_dir / "result.npz") as archive:
            arrays = {name: archive[name] for name in archive.files}
    return metadata, arrays


def _worker_environment() -> dict[str, str]:
    environment = dict(os.environ, PYTHONUNBUFFERED="1")
    package_root = str(Path(gpdsl.__file__).resolve().parent.parent)
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, environment.get("PYTHONPATH")]))
    return environment


def relay(line: str, show: Callable[[str], None]) -> None:
    """Pass a worker's output line to ``show``; a notice (the start of a Stan build) goes to standard error even
    when ``show`` hides progress."""
    if line.startswith(NOTICE):
        print(f"gpdsl: {line[len(NOTICE):]}", file=sys.stderr, flush=True)
    else:
        show(line)


def _run_streaming(
    request_path: Path, result_dir: Path, show: Callable[[str], None]
) -> tuple[int, list[str]]:
    last_lines: collections.deque[str] = collections.deque(maxlen=OUTPUT_LINES_KEPT)
    process = subprocess.Popen(
        [sys.executable, "-m", WORKER_MODULE, str(request_path), str(result_dir)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        env=_worker_environment(),
        start_new_session=True,
    )

    def forward():
        for line in process.stdout:
            line = line.rstrip("\n")
            last_lines.append(line)
            relay(line, show)

    reader = threading.Thread(target=forward, daemon=True)
    reader.start()
    try:
        returncode = process.wait()
    finally:
        if process.poll() is None:
            _stop_process_group(process)
        reader.join(timeout=5)
    return returncode, list(last_lines)


def _stop_process_group(process: subprocess.Popen) -> None:
    """Stop the worker and the chain processes it forked (they share its new session's group)."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    except ProcessLookupError:
        pass
