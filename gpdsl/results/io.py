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
    check_attributes(results, f"results file {source}")
    for group, dataset in groups.items():
        for name, array in dataset.data_vars.items():
            if array.dtype.kind not in "biuf":
                raise GpdslError(f"results file {source}: {group} variable '{name}' holds {array.dtype}, not numbers")
    return results


def check_attributes(results: Any, origin: str = "these results") -> None:
    """Refuse results whose root attributes are not what gpdsl writes: a JSON attribute
    (:data:`~gpdsl.results.method_output.JSON_ATTRIBUTES`) that is not a JSON object, a ``seed`` that is not an
    integer, a ``data_scaling`` that is not a record of scalings, a ``method`` or ``latent`` that is not text.

    Parameters
    ----------
    results : arviz.InferenceData or xarray.DataTree
    origin : str
        What holds them, for messages (``results file fit.nc``).

    Raises
    ------
    GpdslError
        ``results file fit.nc: attribute settings is malformed (...)``.
    """
    import json

    from gpdsl.data.scaling import scalings_from_json
    from gpdsl.results.method_output import JSON_ATTRIBUTES

    attrs = arviz_compat.root_attrs(results)
    for name in JSON_ATTRIBUTES:
        if name not in attrs:
            continue
        try:
            value = json.loads(attrs[name]) if isinstance(attrs[name], str) else attrs[name]
        except ValueError as error:
            raise GpdslError(f"{origin}: attribute {name} is malformed (not JSON: {error})") from None
        if not isinstance(value, dict):
            kind = "null" if value is None else "a list" if isinstance(value, list) else \
                "a string" if isinstance(value, str) else "a number"
            raise GpdslError(f"{origin}: attribute {name} is malformed ({kind}, not a JSON object)")
    for name in ("method", "latent", "model_source", "model_name"):
        if name in attrs and not isinstance(attrs[name], str):
            raise GpdslError(f"{origin}: attribute {name} is malformed (a number, not text)")
    if "seed" in attrs:
        try:
            seed = int(str(attrs["seed"]))
        except ValueError:
            raise GpdslError(f"{origin}: attribute seed is malformed ({str(attrs['seed'])[:40]!r} is not an "
                             "integer)") from None
        if not 0 <= seed < 2**63:
            raise GpdslError(f"{origin}: attribute seed is malformed ({seed} is out of range)")
    try:
        scalings_from_json(attrs.get("data_scaling"))
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise GpdslError(f"{origin}: attribute data_scaling is malformed ({error})") from None
