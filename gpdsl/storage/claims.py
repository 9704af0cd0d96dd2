"""Claims on output files: a run that will write ``fit.nc`` claims it before it starts, so that a second run started
meanwhile with the same output is refused, naming the file, rather than one silently replacing the other.

A claim is an exclusive lock (:func:`fcntl.flock`) on a file ``.fit.nc.lock`` beside the output, which holds the
claiming process's id and host for messages. The claim ends when the output is written (:mod:`gpdsl.storage.atomic`
releases it) or when its process ends, however it ends: the operating system drops the lock of a killed process,
so a stale ``.lock`` file blocks nothing and is reused by the next claim.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from gpdsl.errors import GpdslError

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: outputs are not claimed
    fcntl = None


@dataclass
class Claim:
    """This process's claim on an output file.

    Attributes
    ----------
    path : Path
        The output file.
    lock : Path
        The lock file beside it.
    descriptor : int
        The open lock file, which holds the lock while it is open.
    """

    path: Path
    lock: Path
    descriptor: int

    def release(self) -> None:
        """End the claim: remove the lock file and close it (idempotent)."""
        if _held.get(_key(self.path)) is self:
            del _held[_key(self.path)]
        if self.descriptor >= 0:
            with contextlib.suppress(OSError):
                if _same_file(self.descriptor, self.lock):
                    os.remove(self.lock)
            os.close(self.descriptor)
            self.descriptor = -1


_held: dict[str, Claim] = {}


def lock_path(path: str | os.PathLike) -> Path:
    """The lock file of a claim on ``path``: ``.NAME.lock`` beside it."""
    target = Path(path)
    return target.parent / f".{target.name}.lock"


def claim(path: str | os.PathLike, what: str = "file") -> Claim | None:
    """Claim the output ``path`` for this process until it is written (:func:`release`) or the process ends.

    Parameters
    ----------
    path : str or path-like
        The output file; its directory must exist.
    what : str
        What will be written, for messages.

    Returns
    -------
    Claim or None
        None where the file system (or the platform) has no locks: the output is then not claimed.

    Raises
    ------
    GpdslError
        Another running process claims ``path`` (named with its process id), or the lock file cannot be created.
    """
    target = Path(path)
    if _key(target) in _held:
        return _held[_key(target)]
    if fcntl is None:
        return None
    lock = lock_path(target)
    while True:
        try:
            descriptor = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as error:
            raise GpdslError(f"cannot write {what} to {target}: cannot create its lock file {lock}: "
                             f"{error.strerror}") from None
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder_of(descriptor)
            os.close(descriptor)
            raise _claimed_error(target, what, lock, holder) from None
        except OSError:
            os.close(descriptor)
            return None
        if _same_file(descriptor, lock):
            break
        os.close(descriptor)
    with contextlib.suppress(OSError):
        os.ftruncate(descriptor, 0)
        os.write(descriptor, json.dumps({"pid": os.getpid(), "host": socket.gethostname()}).encode())
    held = _held[_key(target)] = Claim(target, lock, descriptor)
    return held


def claimed_by_another(path: str | os.PathLike, what: str = "file") -> None:
    """Refuse ``path`` if another running process claims it (this process's own claim is no obstacle).

    Raises
    ------
    GpdslError
        Naming the file and the process that claims it.
    """
    target = Path(path)
    if fcntl is None or _key(target) in _held or not lock_path(target).is_file():
        return
    try:
        descriptor = os.open(lock_path(target), os.O_RDONLY)
    except OSError:
        return
    try:
        fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        raise _claimed_error(target, what, lock_path(target), _holder_of(descriptor)) from None
    except OSError:
        pass
    finally:
        os.close(descriptor)


def held(path: str | os.PathLike) -> Claim | None:
    """This process's claim on ``path``, if it holds one."""
    return _held.get(_key(Path(path)))


def release(path: str | os.PathLike | None) -> None:
    """End this process's claim on ``path``, if it holds one."""
    if path is not None and held(path) is not None:
        held(path).release()


def _claimed_error(target: Path, what: str, lock: Path, holder: str) -> GpdslError:
    return GpdslError(f"cannot write {what} to {target}: another gpdsl run ({holder}) is writing it",
                      hint=f"wait for it to end, or choose another output path; {lock} marks the claim and blocks "
                           "nothing once that run has ended")


def _holder_of(descriptor: int) -> str:
    """``process N on HOST`` as the lock file says, or ``another process`` when it cannot be read."""
    with contextlib.suppress(OSError, ValueError, AttributeError, TypeError):
        recorded = json.loads(os.pread(descriptor, 4096, 0).decode())
        return f"process {int(recorded['pid'])} on {str(recorded['host'])[:64]}"
    return "another process"


def _same_file(descriptor: int, path: Path) -> bool:
    """Whether the open ``descriptor`` is still the file at ``path`` (a released claim removes it)."""
    try:
        return os.path.samestat(os.fstat(descriptor), os.stat(path))
    except OSError:
        return False


def _key(path: Path) -> str:
    return os.path.realpath(path)


@atexit.register
def _release_all() -> None:
    for held_claim in list(_held.values()):
        held_claim.release()
