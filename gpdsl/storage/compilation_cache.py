"""A persistent cache of compiled XLA programs, so that a model compiles once per machine.

Stan users compile a model once and sample it many times; JAX recompiles every engine's programs in
every new process (one to several seconds each). :func:`enable` points JAX's persistent compilation
cache at ``<gpdsl cache>/jax`` (``$GPDSL_CACHE_DIR``, ``$XDG_CACHE_HOME/gpdsl`` or ``~/.cache/gpdsl``),
so a later run of the same program, at the same shapes and with the same JAX version, loads it
instead. The cache holds at most :data:`MAX_BYTES` (least recently used programs go first) and
can be deleted at any time. ``GPDSL_JAX_CACHE=0`` turns the cache off; a cache directory the user gave JAX
(``JAX_COMPILATION_CACHE_DIR`` or ``jax.config``) is left alone.
"""

from __future__ import annotations

import contextlib
import os

import jax

from gpdsl.datasets.storage import default_cache_dir

SWITCH_VARIABLE = "GPDSL_JAX_CACHE"
MIN_COMPILE_SECONDS = 0.3  # programs that compile faster than this are not worth a file
MAX_BYTES = 2 ** 30  # beyond this the least recently used programs are evicted (JAX locks the directory)


def enable() -> str | None:
    """Turn the persistent compilation cache on (idempotent); return its directory, or None if off.

    Call before compiling. Failures to create the directory leave the cache off rather than raising:
    it only saves time.
    """
    if os.environ.get(SWITCH_VARIABLE, "1").strip().lower() in ("0", "false", "no", "off"):
        return None
    current = jax.config.jax_compilation_cache_dir
    if current:
        return current
    directory = default_cache_dir() / "jax"
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    _drop_entries_without_access_time(directory)
    jax.config.update("jax_compilation_cache_dir", str(directory))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    jax.config.update("jax_compilation_cache_max_size", MAX_BYTES)
    return str(directory)


@contextlib.contextmanager
def keeping_small_programs():
    """Write the programs compiled in this block to the cache however quickly they compile.

    For the few small programs every run of a method compiles again (its start point, a check, the
    conversion of its results): 0.02-0.1 s each to compile, a few milliseconds to load. Everywhere else
    :data:`MIN_COMPILE_SECONDS` keeps the many one-operation programs out of the cache, where each new
    entry costs a scan of the directory. The threshold is process-wide: a program another thread
    compiles meanwhile may be written too.
    """
    option = "jax_persistent_cache_min_compile_time_secs"
    previous = getattr(jax.config, option)
    jax.config.update(option, 0.0)
    try:
        yield
    finally:
        jax.config.update(option, previous)


def _drop_entries_without_access_time(directory) -> None:
    """Delete programs written without eviction (no ``-atime`` file beside their ``-cache`` file).

    JAX's size-limited cache expects both files for every entry; one entry without its access time
    (written with no size limit, or cut off by a crash) makes every later write fail with a warning.
    """
    for entry in directory.glob("*-cache"):
        if not entry.with_name(entry.name[:-len("-cache")] + "-atime").exists():
            entry.unlink(missing_ok=True)
