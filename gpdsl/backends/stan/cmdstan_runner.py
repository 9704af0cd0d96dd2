"""The optional CmdStanPy backend: find CmdStan, compile once per program and CmdStan, sample into a StanFit."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from gpdsl.backends.stan.initialization import initialization_failure
from gpdsl.backends.stan.pystan_process import Progress, to_json_value
from gpdsl.backends.stan.runners import (
    StanFit,
    arviz_sample_stats,
    sampler_settings,
    warmup_share,
)
from gpdsl.backends.stan.stanc import check_program, stanc_version
from gpdsl.errors import BackendError

INSTALL_HINT = (
    "pip install gpdsl[cmdstan], then install CmdStan with "
    "`python -c 'import cmdstanpy; cmdstanpy.install_cmdstan()'`"
)
SIG_FIGS = 18
"""Significant digits of CmdStan's output (its most; its default of 6 rounds every draw)."""
EXE_CHECK_SECONDS = 60


def find_cmdstan() -> Path | None:
    """The CmdStan installation CmdStanPy would use, or ``None``.

    The ``CMDSTAN`` environment variable wins; otherwise the newest ``~/.cmdstan/cmdstan-*``.
    Returns ``None`` when cmdstanpy is not importable or no directory holding a CmdStan
    ``makefile`` is found.
    """
    try:
        import cmdstanpy  # noqa: F401
    except ImportError:
        return None
    if os.environ.get("CMDSTAN"):
        candidates = [Path(os.environ["CMDSTAN"]).expanduser()]
    else:
        candidates = sorted(Path("~/.cmdstan").expanduser().glob("cmdstan-*"), key=_version_key, reverse=True)
    for candidate in candidates:
        if (candidate / "makefile").is_file():
            return candidate
    return None


def sample_cmdstanpy(program_code: str, data: dict, *args, progress: Progress = True, **options) -> StanFit:
    """Sample a Stan program with CmdStan's NUTS through CmdStanPy.

    Parameters and result are those of :func:`gpdsl.backends.stan.runners.sample_pystan`; a
    callable ``progress`` turns CmdStanPy's progress bars off. Draws are written with CmdStan's
    full precision (18 significant digits). The executable is cached under
    ``$XDG_CACHE_HOME/gpdsl/cmdstan/<hash of program, CmdStan path and version>``.

    Raises
    ------
    BackendError
        If cmdstanpy or CmdStan is missing, or compilation or sampling fails; an initialization
        failure names Stan's reasons in a few lines.
    """
    started = time.perf_counter()
    cmdstanpy = _import_cmdstanpy()
    cmdstan = find_cmdstan()
    if cmdstan is None:
        raise BackendError("CmdStan is not installed: set CMDSTAN or install it", hint=INSTALL_HINT)
    settings = sampler_settings(*args, **options)
    check_program(program_code)
    cmdstanpy.set_cmdstan_path(str(cmdstan))
    with tempfile.TemporaryDirectory(prefix="gpdsl-cmdstan-") as output_dir:
        try:
            model = compiled_model(cmdstanpy, program_code, cmdstan)
            sampling_started = time.perf_counter()
            fit = model.sample(
                data=to_json_value(data),
                chains=settings["chains"],
                iter_warmup=settings["warmup"],
                iter_sampling=settings["draws"] * settings["thin"],
                thin=settings["thin"],
                seed=settings["seed"],
                adapt_delta=settings["adapt_delta"],
                max_treedepth=settings["max_depth"],
                inits=to_json_value(settings["init"]),
                sig_figs=SIG_FIGS,
                output_dir=output_dir,
                show_progress=progress is True,
            )
            sampling_time = time.perf_counter() - sampling_started
            draws_by_name = _draws_by_chain(fit)
            stats = {name: values.T for name, values in fit.method_variables().items()}
            elapsed_lines = _csv_comment_lines(fit)
        except (RuntimeError, ValueError, OSError) as error:
            failure = initialization_failure(_console_text(output_dir), settings["init"])
            raise (failure or BackendError(f"CmdStan failed: {error}")) from None
    return StanFit(
        draws=draws_by_name,
        sample_stats=arviz_sample_stats(stats),
        settings=settings,
        wall_time=time.perf_counter() - started,
        backend="cmdstanpy",
        versions={
            "stanc": stanc_version(),
            "cmdstanpy": cmdstanpy.__version__,
            "cmdstan": cmdstan_version(cmdstan),
        },
        sampling_time=sampling_time,
        warmup_share=warmup_share(elapsed_lines),
    )


def compiled_model(cmdstanpy, program_code: str, cmdstan: Path):
    """The ``CmdStanModel`` of ``program_code`` built by ``cmdstan``, from the cache when its executable runs.

    An executable that no longer runs (say, the TBB library it was linked to has gone) is built again.

    Raises
    ------
    BackendError
        If the executable does not run even after a fresh build.
    """
    stan_file = cached_stan_file(program_code, cmdstan)
    model = cmdstanpy.CmdStanModel(stan_file=stan_file)
    if _run_failure(model.exe_file) is None:
        return model
    model = cmdstanpy.CmdStanModel(stan_file=stan_file, force_compile=True)
    failure = _run_failure(model.exe_file)
    if failure is not None:
        raise BackendError(
            f"the Stan program's executable built by CmdStan at {cmdstan} does not run: {failure}",
            hint=f"check that CmdStan there builds its examples (make examples/bernoulli/bernoulli in {cmdstan})",
        )
    return model


def executable_key(program_code: str, cmdstan: Path, version: str) -> str:
    """The cache key of a program's executable: its text and the CmdStan (path and version) that builds it."""
    identity = "\0".join([program_code, str(Path(cmdstan).resolve()), version])
    return hashlib.sha256(identity.encode()).hexdigest()[:16]


def cached_stan_file(program_code: str, cmdstan: Path) -> str:
    """Write ``program_code`` into its cache directory (see :func:`executable_key`); the ``.stan`` file's path."""
    key = executable_key(program_code, cmdstan, cmdstan_version(cmdstan))
    cache_home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    directory = cache_home / "gpdsl" / "cmdstan" / key
    directory.mkdir(parents=True, exist_ok=True)
    stan_file = directory / "model.stan"
    if not stan_file.exists() or stan_file.read_text() != program_code:
        stan_file.write_text(program_code)
    return str(stan_file)


def cmdstan_version(cmdstan: Path) -> str:
    """The ``CMDSTAN_VERSION`` in CmdStan's makefile, or ``"unknown"``."""
    try:
        makefile = (Path(cmdstan) / "makefile").read_text(errors="replace")
    except OSError:
        return "unknown"
    match = re.search(r"^CMDSTAN_VERSION\s*:?=\s*(\S+)", makefile, re.MULTILINE)
    return match.group(1) if match else "unknown"


def _run_failure(exe_file) -> str | None:
    """Why the executable cannot run its ``info`` command (the loader's message, or its exit status), or None."""
    try:
        done = subprocess.run([str(exe_file), "info"], check=False, capture_output=True, text=True, errors="replace",
                              stdin=subprocess.DEVNULL, timeout=EXE_CHECK_SECONDS)
    except (OSError, subprocess.TimeoutExpired) as error:
        return str(error)
    if done.returncode == 0:
        return None
    lines = [line for line in (done.stderr + done.stdout).splitlines() if line.strip()]
    return f"exit status {done.returncode}" + (f": {lines[-1].strip()}" if lines else "")


def _console_text(output_dir: str) -> str:
    """CmdStan's console output of every chain (cmdstanpy's ``*-stdout.txt`` files)."""
    return "\n".join(path.read_text(errors="replace") for path in sorted(Path(output_dir).glob("*-stdout.txt")))


def _csv_comment_lines(fit) -> list[str]:
    """The comment lines of CmdStan's output CSV files (they hold the elapsed times)."""
    lines = []
    for path in fit.runset.csv_files:
        with open(path, encoding="utf-8") as handle:
            lines.extend(line for line in handle if line.startswith("#"))
    return lines


def _draws_by_chain(fit) -> dict[str, np.ndarray]:
    """``stan_variable`` stacks the chains (chain 1's draws first); split them into ``(chain, draw, ...)``."""
    return {
        name: np.asarray(values).reshape(fit.chains, fit.num_draws_sampling, *np.shape(values)[1:])
        for name, values in fit.stan_variables().items()
    }


def _import_cmdstanpy():
    try:
        import cmdstanpy
    except ImportError:
        message = "the cmdstanpy backend needs the optional package cmdstanpy"
        raise BackendError(message, hint=INSTALL_HINT) from None
    return cmdstanpy


def _version_key(path: Path) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", path.name))
