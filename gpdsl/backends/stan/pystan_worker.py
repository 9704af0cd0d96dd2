"""The child side of the PyStan backend: ``python -m gpdsl.backends.stan.pystan_worker REQUEST RESULT_DIR``.

PyStan forks chain processes and runs an asyncio event loop, so it runs here, in a process of its
own that never imports JAX. The request is a JSON file (``command``, ``program_code``, ``data`` and
the command's options). The worker writes ``result.json`` (metadata, or ``{"error": ...}``) and, for
array results, ``result.npz`` into RESULT_DIR. Progress lines go to stdout, which the parent streams.
"""

from __future__ import annotations

import asyncio
import fcntl
import io
import json
import os
import re
import signal
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

HEARTBEAT_SECONDS = 10
NOTICE = "gpdsl-notice: "
"""A line the parent shows on standard error even when progress is hidden (``--quiet``)."""


class _LineWriter(io.TextIOBase):
    """Forwards each write's non-blank lines to ``sink``; claims ``fileno`` so httpstan can still silence
    the compiler on that descriptor and PyStan sees a non-terminal (no ANSI redraws).
    """

    def __init__(self, sink, lock: threading.Lock, descriptor: int):
        super().__init__()
        self._sink, self._lock, self._descriptor = sink, lock, descriptor

    def write(self, text: str) -> int:
        for line in text.split("\n"):
            if line.strip():
                _emit(self._sink, self._lock, line.rstrip())
        return len(text)

    def fileno(self) -> int:
        return self._descriptor


def _emit(sink, lock: threading.Lock, line: str) -> None:
    with lock:
        sink.write(line + "\n")
        sink.flush()


@contextmanager
def _heartbeat(sink, lock: threading.Lock, what: str):
    stop = threading.Event()
    start = time.perf_counter()

    def beat():
        while not stop.wait(HEARTBEAT_SECONDS):
            _emit(sink, lock, f"gpdsl: {what} ({time.perf_counter() - start:.0f} s so far)")

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _stan_message(error: BaseException) -> str:
    """The Stan text inside PyStan's wrapping of a services exception, else ``str(error)``."""
    text = str(error)
    match = re.search(r"Exception during call to services function: `\w+\((['\"])(.*)\1\)`", text, re.DOTALL)
    if match:
        text = match.group(2).encode().decode("unicode_escape")
    return text.strip() or type(error).__name__


def _draws_by_chain(values: np.ndarray, dims: list[int], num_draws: int, num_chains: int) -> np.ndarray:
    """PyStan's ``fit[name]`` is ``(*dims, draw * num_chains + chain)``; return ``(chain, draw, *dims)``.

    The element order within ``dims`` is already row-major-correct because PyStan reshapes the
    column-major flat Stan output with ``order="F"``.
    """
    by_draw_chain = values.reshape(*dims, num_draws, num_chains)
    return np.moveaxis(by_draw_chain, (-1, -2), (0, 1))


BROKEN_BUILD_AGE_SECONDS = 120


def remove_broken_build(directory: Path, now: float | None = None) -> bool:
    """Delete httpstan's cache entry ``directory`` of one program if a killed build left it half made.

    httpstan writes the compiled extension module, then the compiler's log ``stderr.log``. A build killed
    between the two leaves a module that httpstan takes as built, and every later request for the program
    then fails inside httpstan (reading the missing log), which PyStan reports as an unparsable reply.
    An entry with no log whose newest file is older than ``BROKEN_BUILD_AGE_SECONDS`` (no build still
    writing it) is removed, so that the next build starts afresh.

    Parameters
    ----------
    directory : Path
        ``httpstan.cache.model_directory(model_name)``.
    now : float, optional
        The current time (``time.time()``).

    Returns
    -------
    bool
        Whether the entry was removed.
    """
    import shutil
    from importlib.machinery import EXTENSION_SUFFIXES

    if not directory.is_dir() or (directory / "stderr.log").exists():
        return False
    files = [path for path in directory.iterdir() if path.is_file()]
    if not any(path.name.endswith(tuple(EXTENSION_SUFFIXES)) for path in files):
        return False
    newest = max(path.stat().st_mtime for path in files)
    if (time.time() if now is None else now) - newest < BROKEN_BUILD_AGE_SECONDS:
        return False
    shutil.rmtree(directory, ignore_errors=True)
    return True


def is_built(directory: Path) -> bool:
    """Whether httpstan's cache entry ``directory`` holds a finished build (its extension module and its log)."""
    from importlib.machinery import EXTENSION_SUFFIXES

    if not directory.is_dir() or not (directory / "stderr.log").exists():
        return False
    return any(path.name.endswith(tuple(EXTENSION_SUFFIXES)) for path in directory.iterdir())


def _build(request: dict, sink, lock: threading.Lock):
    import httpstan.cache
    import httpstan.models
    import stan

    model_name = httpstan.models.calculate_model_name(request["program_code"])
    directory = httpstan.cache.model_directory(model_name)
    notice = "still building the Stan model; a first build of a program takes about a minute"
    if not is_built(directory):
        _emit(sink, lock, f"{NOTICE}building the Stan program ({model_name}): about a minute the first time; "
                          "httpstan caches it for later runs")
    with _heartbeat(sink, lock, notice), building(directory):
        if remove_broken_build(directory):
            _emit(sink, lock, f"gpdsl: removed an unfinished build of this program from httpstan's cache "
                              f"({model_name}); building it again")
        return stan.build(request["program_code"], data=request["data"], random_seed=request.get("seed"))


@contextmanager
def building(directory: Path):
    """Hold an exclusive lock on the build of the program cached in ``directory`` (one of httpstan's model entries).

    Two processes building the same program at once would both write its entry; the second now waits and
    finds it built. The lock files live beside httpstan's ``models`` directory, never inside it (httpstan
    takes every entry there for a model).
    """
    locks = directory.parent.parent / "gpdsl-build-locks"
    locks.mkdir(parents=True, exist_ok=True)
    with open(locks / f"{directory.name}.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _sample(request: dict, sink, lock: threading.Lock) -> tuple[dict, dict[str, np.ndarray]]:
    options = request["options"]
    started = time.perf_counter()
    model = _build(request, sink, lock)
    built = time.perf_counter()
    arguments = dict(
        num_chains=options["chains"],
        num_warmup=options["warmup"],
        num_samples=options["draws"] * options["thin"],
        num_thin=options["thin"],
        delta=options["adapt_delta"],
        max_depth=options["max_depth"],
    )
    if options.get("init") is not None:
        arguments["init"] = options["init"]
    with sampling_in(_fit_directory(model)):
        fit = model.sample(**arguments)
    sampled = time.perf_counter()

    num_chains, num_draws = fit.num_chains, -(-fit.num_samples // fit.num_thin)
    arrays = {}
    for name, dims in zip(fit.param_names, fit.dims):
        arrays[f"draw.{name}"] = _draws_by_chain(fit[name], list(dims), num_draws, num_chains)
    for name in fit.sample_and_sampler_param_names:
        arrays[f"stat.{name}"] = _draws_by_chain(fit[name][0], [], num_draws, num_chains)
    metadata = {
        "param_names": list(fit.param_names),
        "dims": [list(dims) for dims in fit.dims],
        "sample_stat_names": list(fit.sample_and_sampler_param_names),
        "build_seconds": built - started,
        "sampling_seconds": sampled - built,
        "stan_messages": _elapsed_lines(fit.stan_outputs),
    }
    return metadata, arrays


def _elapsed_lines(stan_outputs) -> list[str]:
    """The lines of Stan's output that report elapsed warmup and sampling times."""
    lines = []
    for output in stan_outputs:
        for line in output.splitlines():
            if b"seconds (" in line and b'"logger"' in line:
                lines.append(line.decode("utf-8", "replace"))
    return lines


def _fit_directory(model) -> Path:
    import httpstan.cache

    return httpstan.cache.model_directory(model.model_name) / "fits"


@contextmanager
def sampling_in(directory: Path):
    """Sample with a shared lock on a model's fit directory, removing httpstan's cached fits when alone.

    httpstan caches every fit and replays a cached one for a seeded request it has seen, without
    sampling (the run would report almost no sampling time), and the fits pile up on disk. The cached
    fits are therefore removed before and after sampling, but only while no other gpdsl worker holds
    the lock: a concurrent run of the same model (another process) keeps the fits it is writing
    and has yet to read.

    Parameters
    ----------
    directory : Path
        httpstan's ``fits`` directory of the model.
    """
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".gpdsl-sampling.lock", "a") as lock:
        remove_fits_if_alone(lock, directory)
        fcntl.flock(lock, fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
            remove_fits_if_alone(lock, directory)


def remove_fits_if_alone(lock, directory: Path) -> bool:
    """Delete the cached fits in ``directory`` if no other process holds ``lock``; whether it did."""
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    try:
        for path in directory.glob("*.jsonlines.gz"):
            path.unlink(missing_ok=True)
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
    return True


async def _post_each(model, route: str, payloads: list[dict]) -> list[dict]:
    import stan.common

    replies = []
    async with stan.common.HttpstanClient() as client:
        for payload in payloads:
            response = await client.post(f"/{model.model_name}/{route}", json=payload)
            if response.status != 200:
                raise RuntimeError(response.json().get("message", response.content.decode()))
            replies.append(response.json())
    return replies


def _log_prob(request: dict, sink, lock: threading.Lock) -> tuple[dict, dict[str, np.ndarray]]:
    model = _build(request, sink, lock)
    options = request["options"]
    payloads = [
        {"data": model.data, "unconstrained_parameters": point, "adjust_transform": options["jacobian"]}
        for point in options["points"]
    ]
    replies = asyncio.run(_post_each(model, "log_prob", payloads))
    arrays = {"log_prob": np.array([reply["log_prob"] for reply in replies], dtype=float)}
    if options["gradient"]:
        replies = asyncio.run(_post_each(model, "log_prob_grad", payloads))
        gradients = [reply["log_prob_grad"] for reply in replies]
        arrays["gradient"] = np.array(gradients, dtype=float).reshape(len(payloads), -1)
    return {}, arrays


def _unconstrain(request: dict, sink, lock: threading.Lock) -> tuple[dict, dict[str, np.ndarray]]:
    model = _build(request, sink, lock)
    unconstrained = model.unconstrain_pars(request["options"]["constrained_params"])
    return {}, {"unconstrained": np.asarray(unconstrained, dtype=float)}


def _layout(request: dict, sink, lock: threading.Lock) -> tuple[dict, dict[str, np.ndarray]]:
    model = _build(request, sink, lock)
    metadata = {
        "param_names": list(model.param_names),
        "dims": [list(dims) for dims in model.dims],
        "constrained_param_names": list(model.constrained_param_names),
    }
    return metadata, {}


COMMANDS = {"sample": _sample, "log_prob": _log_prob, "unconstrain": _unconstrain, "layout": _layout}


PARENT_POLL_SECONDS = 2.0


def _stop_with_parent() -> None:
    """End this worker's process group (it and httpstan's sampling processes) once the process that
    started it has gone, so that a killed ``gpdsl`` or script leaves no samplers running."""
    parent = os.getppid()

    def watch():
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_SECONDS)
        os.killpg(os.getpgid(0), signal.SIGKILL)

    threading.Thread(target=watch, daemon=True, name="gpdsl-parent-watch").start()


def _without_request_timeouts() -> None:
    """Let PyStan's requests to httpstan take as long as they need.

    PyStan talks to httpstan through an ``aiohttp`` session with aiohttp's default limit of 300 s per
    request; reading a long run's draws back (or any request on a busy machine) can take longer, and the
    run then fails with a bare ``TimeoutError`` after all its sampling is done. This worker already ends
    with its parent, so no request needs a limit of its own.
    """
    import functools

    import aiohttp

    aiohttp.ClientSession = functools.partial(aiohttp.ClientSession, timeout=aiohttp.ClientTimeout(total=None))


def run(request_path: Path, result_dir: Path) -> int:
    """Serve one request; the exit status is 0 on success and 1 when ``result.json`` holds an error."""
    _stop_with_parent()
    _without_request_timeouts()
    sink, original_stderr = sys.stdout, sys.stderr
    lock = threading.Lock()
    sys.stdout = _LineWriter(sink, lock, sink.fileno())
    sys.stderr = _LineWriter(sink, lock, original_stderr.fileno())
    request = json.loads(request_path.read_text())
    try:
        import httpstan
        import stan

        metadata, arrays = COMMANDS[request["command"]](request, sink, lock)
        metadata["versions"] = {"pystan": stan.__version__, "httpstan": httpstan.__version__}
    except BaseException as error:  # everything must reach the parent as a message, not a traceback
        failure = {"error": _stan_message(error), "error_type": type(error).__name__}
        (result_dir / "result.json").write_text(json.dumps(failure))
        return 1
    finally:
        sys.stdout, sys.stderr = sink, original_stderr
    np.savez(result_dir / "result.npz", **arrays)
    (result_dir / "result.json").write_text(json.dumps(metadata))
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m gpdsl.backends.stan.pystan_worker REQUEST.json RESULT_DIR")
    sys.exit(run(Path(sys.argv[1]), Path(sys.argv[2])))
