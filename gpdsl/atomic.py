"""All-or-nothing file writes: write a temporary file beside the target, fsync, then rename."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Iterator

from gpdsl.errors import GpdslError


@contextlib.contextmanager
def atomic_target(path: str | os.PathLike, what: str = "file") -> Iterator[Path]:
    """Yield a temporary path to write; on success it replaces ``path``, on failure it is removed.

    Parameters
    ----------
    path : str or path-like
        The final file. Its directory must exist.
    what : str
        What is written, for error messages (``"results"``, ``"Stan program"``).

    Raises
    ------
    GpdslError
        The directory does not exist or the file system refuses the write.
    """
    target = Path(path)
    if not target.parent.is_dir():
        raise GpdslError(f"cannot write {what} to {target}: directory {target.parent} does not exist")
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(handle)
    try:
        yield Path(temporary)
        with open(temporary, "rb+") as stream:
            os.fsync(stream.fileno())
        os.chmod(temporary, _mode_for(target))
        os.replace(temporary, target)
    except BaseException as error:
        with contextlib.suppress(FileNotFoundError):
            os.remove(temporary)
        if isinstance(error, OSError):
            raise GpdslError(f"cannot write {what} to {target}: {error}") from error
        raise
    with contextlib.suppress(OSError):
        directory = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)


def _mode_for(target: Path) -> int:
    """An existing file's permissions, else those a plain ``open`` would give (0666 less the umask)."""
    try:
        return target.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def atomic_write_text(path: str | os.PathLike, text: str, what: str = "file") -> Path:
    """Write ``text`` to ``path`` atomically (see :func:`atomic_target`) and return the path."""
    with atomic_target(path, what) as temporary:
        temporary.write_text(text)
    return Path(path)


def check_writable(path: str | os.PathLike, what: str = "file", inputs=()) -> Path:
    """Refuse, before a long run starts, an output path that could not be written at its end.

    Parameters
    ----------
    path : str or path-like
        The output file.
    what : str
        What will be written, for messages.
    inputs : iterable of path-like
        Files the run reads (model, data), which the output must not replace.

    Returns
    -------
    Path

    Raises
    ------
    GpdslError
        The directory does not exist or is not writable, the path is a directory or not a regular
        file, or it is one of ``inputs``.
    """
    target = Path(path)
    if not target.parent.is_dir():
        raise GpdslError(f"cannot write {what} to {target}: directory {target.parent} does not exist")
    if not os.access(target.parent, os.W_OK | os.X_OK):
        raise GpdslError(f"cannot write {what} to {target}: directory {target.parent} is not writable")
    if target.exists() and not target.is_file():
        raise GpdslError(f"cannot write {what} to {target}: it exists and is not a regular file")
    for source in inputs:
        if source is not None and isinstance(source, (str, os.PathLike)) and Path(source).exists() \
                and target.exists() and os.path.samefile(source, target):
            raise GpdslError(f"cannot write {what} to {target}: it is an input of this run ({source}); "
                             "choose another output path")
    return target
