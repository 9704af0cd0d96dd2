"""The optional CmdStanPy backend: find CmdStan, compile once per program text, sample into a StanFit."""

from __future__ import annotations

import hashlib
import os
import re
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
    ``$XDG_CACHE_HOME/gpdsl/cmdstan/<hash of program>``.

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
            model = cmdstanpy.CmdStanModel(stan_file=_cached_stan_file(program_code))
            sampling_started = time.perf_counter()
            fit = model.sample(
                data=to_json_value(data),
                chains=settings["chains"],
                iter_warmup=settings["warmup"],
                iter_sampling=settings["draws"],
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
            "cmdstan": _cmdstan_version(cmdstanpy),
        },
        sampling_time=sampling_time,
        warmup_share=warmup_share(elapsed_lines),
    )


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


def _cmdstan_version(cmdstanpy) -> str:
    version = cmdstanpy.cmdstan_version()
    return ".".join(map(str, version)) if version else "unknown"


def _import_cmdstanpy():
    try:
        import cmdstanpy
    except ImportError:
        message = "the cmdstanpy backend needs the optional package cmdstanpy"
        raise BackendError(message, hint=INSTALL_HINT) from None
    return cmdstanpy


def _cached_stan_file(program_code: str) -> str:
    digest = hashlib.sha256(program_code.encode()).hexdigest()[:16]
    cache_home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    directory = cache_home / "gpdsl" / "cmdstan" / digest
    directory.mkdir(parents=True, exist_ok=True)
    stan_file = directory / "model.stan"
    if not stan_file.exists() or stan_file.read_text() != program_code:
        stan_file.write_text(program_code)
    return str(stan_file)


def _version_key(path: Path) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", path.name))
