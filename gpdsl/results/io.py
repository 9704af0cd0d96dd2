"""Results files: atomic NetCDF writes and checked reads."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from gpdsl.storage.atomic import atomic_target
from gpdsl.errors import GpdslError
from gpdsl.results import arviz_compat


def write_netcdf(results: Any, path: str | os.PathLike, replace: bool = True) -> Path:
    """Write results to a NetCDF file, all or nothing.

    The file is written to a temporary name in the same directory, flushed to disk and then
    renamed over ``path``, so a reader sees either the old file or the complete new one; on a full
    device the error says so and nothing is left behind.

    Parameters
    ----------
    results : arviz.InferenceData or xarray.DataTree
        What :func:`~gpdsl.results.build_results` returned.
    path : str or path-like
        Where to write; an existing file is replaced only once the new one is complete.
    replace : bool
        Replace an existing file; without it the file is created new and never replaces one
        (:func:`~gpdsl.storage.atomic.atomic_target`).

    Returns
    -------
    pathlib.Path
        The path written.

    Raises
    ------
    GpdslError
        If ``results`` is not a results object, or the file cannot be written.
    """
    if not arviz_compat.is_container(results):
        raise GpdslError(
            f"cannot write {type(results).__name__} as results; expected "
            f"{arviz_compat.Container.__name__} from build_results"
        )
    target = Path(path)
    with atomic_target(target, "results", replace=replace) as temporary:
        arviz_compat.to_netcdf(results, temporary)
    return target


def read_netcdf(path: str | os.PathLike) -> Any:
    """Read a results file written by :func:`write_netcdf`.

    Parameters
    ----------
    path : str or path-like
        The NetCDF file.

    Returns
    -------
    arviz.InferenceData or xarray.DataTree
        The same kind of object :func:`~gpdsl.results.build_results` returns, loaded into
        memory (the file is closed).

    Raises
    ------
    GpdslError
        If the file is missing, is not NetCDF, or was not written by gpdsl.
    """
    source = Path(path)
    if not source.is_file():
        raise GpdslError(f"results file {source} does not exist")
    try:
        results = arviz_compat.from_netcdf(source)
    except Exception as error:
        raise GpdslError(
            f"{source} is not a readable NetCDF results file: {error}",
            hint="results files are written by gpdsl's samplers (write_netcdf)",
        ) from error
    groups = arviz_compat.groups(results)
    written_by_gpdsl = "gpdsl_version" in arviz_compat.root_attrs(results) or any(
        "gpdsl_version" in ds.attrs for ds in groups.values()
    )
    if "posterior" not in groups or not written_by_gpdsl:
        raise GpdslError(
            f"{source} is not a gpdsl results file (no posterior group with gpdsl attributes)"
        )
    return results
