"""What a checkpoint records about its run: the hashes of the model and data, the method, settings and seed
(only the same run resumes from it), the command that started it (``gpdsl resume`` runs it again, with only the
permissions its own command line gives), and the wall seconds the run has taken so far (``elapsed``: a resumed
run's timings are those of all its segments).

The driver (:func:`gpdsl.inference.driver.run_chains`) stores this identity in the checkpoint's ``meta`` record;
:func:`verify_resumable` compares it with a new run's before anything runs.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, is_dataclass
from pathlib import Path

import numpy as np

from gpdsl.errors import GpdslError

IDENTIFYING = ("method", "model_sha256", "data_sha256", "settings", "seed")
"""The entries that must agree for a run to resume from a checkpoint."""
FREE_SETTINGS = ("segment_size",)
"""Settings the draws do not depend on, which a resumed run may change."""

_DESCRIBED = {"method": "method", "model_sha256": "model (sha256 of its text)",
              "data_sha256": "data (sha256 of the validated values)", "settings": "settings", "seed": "seed"}


class CheckpointError(GpdslError, kind="checkpoint error"):
    """A checkpoint that cannot be read, or that another run wrote."""


def data_hash(data: dict) -> str:
    """sha256 of validated data values: every name with its values' dtype, shape and bytes, in name order."""
    digest = hashlib.sha256()
    for name in sorted(data):
        values = np.ascontiguousarray(np.asarray(data[name]))
        digest.update(f"{name}\0{values.dtype.str}\0{values.shape}\0".encode())
        digest.update(values.tobytes())
    return digest.hexdigest()


def run_identity(model, data: dict, method: str, settings, seed: int, command=None) -> dict:
    """The identity of a run a checkpoint records (see the module docstring).

    Parameters
    ----------
    model : Model
        The checked model.
    data : dict
        The validated data.
    method : str
    settings : dataclass
        The method's settings.
    seed : int
    command : list of str, optional
        The command line's arguments (after ``gpdsl``), for ``gpdsl resume``; recorded with the working directory.

    Returns
    -------
    dict
        JSON-ready.
    """
    values = asdict(settings) if is_dataclass(settings) else dict(settings)
    values = {name: value for name, value in values.items() if name not in FREE_SETTINGS}
    identity = {"method": method, "model_sha256": model.source_hash, "data_sha256": data_hash(data),
                "settings": json.loads(json.dumps(values, default=str)), "seed": int(seed)}
    if command is not None:
        identity.update(command=[str(argument) for argument in command], cwd=os.getcwd())
    return identity


def read_identity(path: str | os.PathLike) -> dict | None:
    """The identity recorded in the checkpoint at ``path``; None if it has none (written by the driver alone).

    Raises
    ------
    CheckpointError
        The file is not a checkpoint gpdsl can read.
    """
    meta = read_meta(path)
    identity = meta.get("identity")
    if identity is not None and not isinstance(identity, dict):
        raise damaged(path, "its identity is not a record")
    return identity


def read_meta(path: str | os.PathLike) -> dict:
    """The ``meta`` record of the checkpoint at ``path``, read without unpickling anything.

    Raises
    ------
    CheckpointError
        The file is missing, is not a NumPy archive (truncated, empty, another kind of file, or one holding
        pickled objects, which are never loaded), or holds no ``meta`` record that is a JSON object.
    """
    import errno
    import zipfile

    try:
        with np.load(path, allow_pickle=False) as stored:
            if not hasattr(stored, "files") or "meta" not in stored.files:
                raise damaged(path, "it holds no meta record")
            meta = json.loads(str(stored["meta"]))
    except FileNotFoundError:
        raise CheckpointError(f"no checkpoint {path}") from None
    except OSError as error:
        if error.errno in (errno.ENAMETOOLONG, errno.ENOTDIR, errno.ELOOP):
            raise
        raise damaged(path, f"it cannot be read ({error.strerror or error})") from None
    except (ValueError, EOFError, zipfile.BadZipFile) as error:
        reason = "it holds pickled objects, which gpdsl never loads" if "pickle" in str(error) else \
            f"not a NumPy archive ({type(error).__name__}: {str(error)[:120]})"
        raise damaged(path, reason) from None
    if not isinstance(meta, dict):
        raise damaged(path, "its meta record is not a JSON object")
    return meta


def damaged(path, reason: str) -> CheckpointError:
    """The error of a file that is not a checkpoint gpdsl wrote, or one damaged since."""
    return CheckpointError(f"{path} is not a gpdsl checkpoint, or it is damaged: {reason}",
                           hint="delete it to start the run afresh")


RESUMABLE = ("sample", "fit")
"""The commands a checkpoint may record for ``gpdsl resume``: the runs that write checkpoints."""


def recorded_command(path: str | os.PathLike) -> tuple[list[str], str]:
    """The command and working directory the checkpoint at ``path`` records for ``gpdsl resume``.

    Raises
    ------
    CheckpointError
        It records none (written from Python or by ``gpdsl run``), or what it records is not a ``gpdsl sample``
        or ``gpdsl fit`` with ``--checkpoint`` run in a directory that still exists.
    """
    identity = read_identity(path) or {}
    command, directory = identity.get("command"), identity.get("cwd")
    if not command:
        raise CheckpointError(f"checkpoint {path} records no command (it was written from Python or by "
                              "gpdsl run); resume it by running the same call or run file again")
    if not isinstance(command, list) or not all(isinstance(part, str) for part in command) \
            or not isinstance(directory, str):
        raise damaged(path, "its recorded command is not a list of arguments with a directory")
    if command[0] not in RESUMABLE or {"-h", "--help", "--version"} & set(command):
        raise damaged(path, f"it records 'gpdsl {' '.join(command)[:80]}', not a gpdsl sample or fit with "
                            "--checkpoint")
    if not Path(directory).is_dir():
        raise CheckpointError(f"the directory {directory} that the run of checkpoint {path} started in "
                              "no longer exists")
    return command, directory


def verify_resumable(path: str | os.PathLike, identity: dict) -> None:
    """Refuse to resume, from the checkpoint at ``path`` (if there is one), a run that is not the one it holds.

    Raises
    ------
    CheckpointError
        The checkpoint was written by a run with a different method, model, data, settings or seed, or cannot be
        read; the message names each difference.
    """
    if not Path(path).exists():
        return
    stored = read_identity(path)
    if stored is None:
        raise CheckpointError(f"checkpoint {path} records no run identity (it was written by an older gpdsl or "
                              "by run_chains directly); it cannot be checked against this run",
                              hint="delete it to start the run afresh")
    differences = [_difference(name, stored.get(name), identity[name]) for name in IDENTIFYING
                   if stored.get(name) != identity[name]]
    if differences:
        raise CheckpointError(f"checkpoint {path} was written by a different run: " + "; ".join(differences),
                              hint=f"run the command that wrote it (gpdsl resume {path}), or delete it or give "
                                   "another --checkpoint path to start afresh")


def _difference(name: str, stored, current) -> str:
    if name == "settings" and isinstance(stored, dict) and isinstance(current, dict):
        changed = [f"{key} {stored.get(key)!r} there, {current.get(key)!r} here"
                   for key in sorted({*stored, *current}) if stored.get(key) != current.get(key)]
        return "settings differ (" + ", ".join(changed) + ")"
    if name.endswith("sha256"):
        return f"the {_DESCRIBED[name]} differs ({str(stored)[:12]} there, {str(current)[:12]} here)"
    return f"the {_DESCRIBED[name]} differs ({stored!r} there, {current!r} here)"


def resumed_seed(path: str | os.PathLike) -> int | None:
    """The seed of the run whose checkpoint is at ``path``; None when there is no checkpoint (or it records none)."""
    if not Path(path).exists():
        return None
    seed = (read_identity(path) or {}).get("seed")
    return None if seed is None else int(seed)


def elapsed_before(path: str | os.PathLike | None) -> float:
    """The wall seconds the run of the checkpoint at ``path`` took up to its last checkpoint, over every process that
    ran it (its meta record's ``elapsed``); 0 when there is no checkpoint or it records none."""
    if path is None or not Path(path).is_file():
        return 0.0
    try:
        with np.load(path) as stored:
            elapsed = json.loads(str(stored["meta"])).get("elapsed")
    except (OSError, ValueError, KeyError, AttributeError, json.JSONDecodeError):
        return 0.0
    valid = isinstance(elapsed, (int, float)) and not isinstance(elapsed, bool) and elapsed >= 0
    return float(elapsed) if valid else 0.0
