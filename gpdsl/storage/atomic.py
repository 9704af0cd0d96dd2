"""All-or-nothing file writes: write a temporary file beside the target, fsync, then rename (or, for an output that
must be new, link: create-new, never replacing a file); a write also removes the temporary files that killed writes
to the same target left behind, and ends this process's claim on the target (:mod:`gpdsl.storage.claims`). A write
that fails for want of space says "no space left on device" and leaves nothing behind."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import stat
import sys
import time
import tempfile
from pathlib import Path
from typing import Iterator

from gpdsl.errors import GpdslError
from gpdsl.storage import claims

PAUSE_VARIABLE = "GPDSL_TEST_PAUSE_WRITE"
"""Read only by tests: ``N`` pauses the ``N``-th write of the process (counting from 1) for a minute after its
temporary file is written and before it replaces the target, ``N:after`` just after it replaced the target; either
says so on standard error, so that a test can kill the process at that point."""
_writes = 0
NEARLY_FULL = 16 * 2**20
"""Bytes free under which a write that failed without saying why (an HDF library's "HDF error") is reported as
having run out of space."""


@contextlib.contextmanager
def atomic_target(path: str | os.PathLike, what: str = "file", replace: bool = True) -> Iterator[Path]:
    """Yield a temporary path to write; on success it replaces ``path``, on failure it is removed.

    Parameters
    ----------
    path : str or path-like
        The final file. Its directory must exist.
    what : str
        What is written, for error messages (``"results"``, ``"Stan program"``).
    replace : bool
        Replace an existing ``path``; without it the file is created new, and a file that appeared at ``path``
        while the output was computed is kept (the new one is then kept beside it, and named).

    Raises
    ------
    GpdslError
        The directory does not exist, the device is full (``no space left on device``), ``path`` appeared and
        ``replace`` is false, or the file system refuses the write.
    """
    target = Path(path)
    if not target.parent.is_dir():
        raise GpdslError(f"cannot write {what} to {target}: directory {target.parent} does not exist")
    remove_stale_temporaries(target)
    try:
        handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as error:
        raise GpdslError(f"cannot write {what} to {target}: {error.strerror}") from None
    os.close(handle)
    try:
        yield Path(temporary)
        _pause_if_asked(target, "inside")
        with open(temporary, "rb+") as stream:
            os.fsync(stream.fileno())
        os.chmod(temporary, _mode_for(target))
        if replace:
            os.replace(temporary, target)
        else:
            _create_new(Path(temporary), target, what)
    except BaseException as error:
        full = _out_of_space(error, target.parent)
        with contextlib.suppress(FileNotFoundError):
            os.remove(temporary)
        if full is not None:
            raise GpdslError(f"cannot write {what} to {target}: no space left on device{full}",
                             hint="free space on its file system, or write elsewhere") from error
        if isinstance(error, OSError):
            raise GpdslError(f"cannot write {what} to {target}: {error}") from error
        raise
    claims.release(target)
    with contextlib.suppress(OSError):
        directory = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
    _pause_if_asked(target, "after")


def _create_new(temporary: Path, target: Path, what: str) -> None:
    """Give the written ``temporary`` the name ``target`` unless a file has it (a link fails then: create-new)."""
    try:
        os.link(temporary, target)
    except FileExistsError:
        kept = target.with_name(f"{target.stem}.{os.getpid()}{target.suffix}")
        os.replace(temporary, kept)
        raise GpdslError(f"cannot write {what} to {target}: a file of that name appeared while this run ran, and "
                         f"is kept; this run's {what} are in {kept}") from None
    except OSError as error:
        if error.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
            raise
        if os.path.lexists(target):
            raise GpdslError(f"cannot write {what} to {target}: a file of that name appeared while this run ran") \
                from None
        os.replace(temporary, target)
        return
    os.remove(temporary)


def _out_of_space(error: BaseException, directory: Path) -> str | None:
    """Why a failed write ran out of space (``""`` or how much was free), or None if it did not."""
    cause = error
    while cause is not None:
        if isinstance(cause, OSError) and cause.errno in (errno.ENOSPC, errno.EDQUOT):
            return ""
        cause = cause.__cause__ or cause.__context__
    if not isinstance(error, Exception) or isinstance(error, GpdslError):
        return None
    try:
        free = shutil.disk_usage(directory).free
    except OSError:
        return None
    if free >= NEARLY_FULL:
        return None
    return f" ({free / 2**20:.1f} MB free on its file system; the writer said {type(error).__name__}: {error})"


def remove_stale_temporaries(path: str | os.PathLike) -> list[Path]:
    """Remove the temporary files that writes to ``path`` killed before their rename left beside it.

    Returns
    -------
    list of Path
        The files removed.
    """
    target = Path(path)
    pattern = re.compile(rf"\.{re.escape(target.name)}\.[A-Za-z0-9_]{{8}}\.tmp")
    removed = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(target.parent):
            if pattern.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(entry.path)
                    removed.append(Path(entry.path))
    return removed


def _pause_if_asked(target: Path, where: str) -> None:
    global _writes
    if where == "inside":
        _writes += 1
    asked = os.environ.get(PAUSE_VARIABLE)
    if asked and asked == (str(_writes) if where == "inside" else f"{_writes}:after"):
        print(f"gpdsl test: paused {where} write {_writes} to {target}", file=sys.stderr, flush=True)
        time.sleep(60)


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


def check_writable(path: str | os.PathLike, what: str = "file", inputs=(), overwrite: bool = False) -> Path:
    """Refuse, before a long run starts, an output path that could not be written at its end, or whose
    writing would destroy something: every command that writes a file checks its path here.

    Parameters
    ----------
    path : str or path-like
        The output file.
    what : str
        What will be written, for messages.
    inputs : iterable of path-like
        Files the command reads (model, data, results), which the output must never replace.
    overwrite : bool
        Replace an existing file (``--overwrite``); without it an existing file is refused.

    Returns
    -------
    Path

    Raises
    ------
    GpdslError
        The directory does not exist or is not writable, the path is a directory, a pipe, a device or
        another special file, it is one of ``inputs`` (compared by real path, so through links too), it
        exists and ``overwrite`` is false, or it exists read-only.
    """
    target = Path(path)
    refuse = f"cannot write {what} to {target}"
    claims.claimed_by_another(target, what)
    if target.is_dir():
        raise GpdslError(f"{refuse}: it is a directory", hint="give a file name in it")
    if not target.parent.is_dir():
        raise GpdslError(f"{refuse}: directory {target.parent} does not exist")
    if not os.access(target.parent, os.W_OK | os.X_OK):
        raise GpdslError(f"{refuse}: directory {target.parent} is not writable")
    for source in inputs:
        if isinstance(source, (str, os.PathLike)) and _same_file(source, target):
            raise GpdslError(f"{refuse}: it is an input of this run ({source}); choose another output path")
    if os.path.lexists(target):
        mode = target.stat().st_mode if target.exists() else 0
        if not stat.S_ISREG(mode):
            raise GpdslError(f"{refuse}: it exists and is {_kind_of(target, mode)}, not a regular file")
        if not overwrite:
            raise GpdslError(f"{refuse}: the file exists", hint="give --overwrite (overwrite=True in Python) to "
                                                                "replace it, or choose another output path")
        if not mode & 0o222:
            raise GpdslError(f"{refuse}: the file is read-only (mode {stat.S_IMODE(mode):04o}); make it writable "
                             "to replace it")
    return target


def claim_output(path: str | os.PathLike, what: str = "file", inputs=(), overwrite: bool = False) -> Path:
    """:func:`check_writable`, then claim ``path`` for this process until it is written
    (:func:`gpdsl.storage.claims.claim`): a run started meanwhile with the same output is refused, naming it.

    Raises
    ------
    GpdslError
        As :func:`check_writable`, or another running process claims ``path``.
    """
    target = check_writable(path, what, inputs, overwrite)
    claims.claim(target, what)
    try:
        check_writable(target, what, inputs, overwrite)
    except GpdslError:
        claims.release(target)
        raise
    return target


def _same_file(source, target: Path) -> bool:
    if os.path.realpath(source) == os.path.realpath(target):
        return True
    try:
        return os.path.samefile(source, target)
    except OSError:
        return False


def _kind_of(target: Path, mode: int) -> str:
    if not target.exists():
        return "a broken symbolic link"
    for test, kind in ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return "a special file"
