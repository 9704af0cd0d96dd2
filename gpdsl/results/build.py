"""Turn any engine's draws into ArviZ-conventional results."""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

import gpdsl
from gpdsl.errors import DataError
from gpdsl.results import arviz_compat
from gpdsl.results.elements import element_coordinates

SAMPLE_DIMS = ("chain", "draw")
SAMPLED_GROUPS = ("posterior", "sample_stats", "log_likelihood", "posterior_predictive", "predictions")
FIXED_GROUPS = ("observed_data", "constant_data")


def build_results(
    posterior: Mapping[str, np.ndarray],
    dims: Mapping[str, Sequence[str]] | None = None,
    sample_stats: Mapping[str, np.ndarray] | None = None,
    observed_data: Mapping[str, np.ndarray] | None = None,
    constant_data: Mapping[str, np.ndarray] | None = None,
    predictions: Mapping[str, np.ndarray] | None = None,
    posterior_predictive: Mapping[str, np.ndarray] | None = None,
    log_likelihood: Mapping[str, np.ndarray] | None = None,
    attrs: Mapping[str, Any] | None = None,
    coords: Mapping[str, Sequence[Any]] | None = None,
) -> Any:
    """Collect draws and data into the results object of the installed ArviZ.

    Parameters
    ----------
    posterior : mapping of str to numpy.ndarray
        Each parameter's draws, shaped ``(chain, draw, *shape)``.
    dims : mapping of str to list of str, optional
        Each variable's dims after ``(chain, draw)`` (``"<group>/<variable>"`` for one group's variable alone,
        e.g. the pointwise log-likelihood of the observed entries of an outcome with missing ones), named after
        the model's size symbols
        (``"N"``, ``"D"``). Applies to every group. A variable without an entry gets
        ``<name>_dim_<i>``. Variables that share a dim must agree in its length. A dim
        repeated within one variable (``K`` with dims ``["D", "D"]``) is stored as ``D``,
        ``D__2``, ... because xarray needs distinct dims; the repeats take ``D``'s coords.
    sample_stats : mapping of str to numpy.ndarray, optional
        Sampler statistics shaped ``(chain, draw)`` under ArviZ names (``lp``,
        ``acceptance_rate``, ``diverging``, ``tree_depth``, ``step_size``, ``energy``,
        ``n_steps``).
    observed_data, constant_data : mapping of str to numpy.ndarray, optional
        Data arrays, without chain and draw dims.
    predictions, posterior_predictive : mapping of str to numpy.ndarray, optional
        Draws shaped ``(chain, draw, *shape)``.
    log_likelihood : mapping of str to numpy.ndarray, optional
        Pointwise log-likelihood of each observed variable, ``(chain, draw, *points)`` (ArviZ's layout for
        ``loo`` and ``compare``).
    attrs : mapping, optional
        Run metadata (``method``, ``settings``, ``seed``, ``wall_time``, ``model_hash``).
        ``created_at`` and ``gpdsl_version`` are added when missing. Dicts and lists of
        dicts are stored as JSON strings, ``None`` values are dropped and booleans become
        integers, so that every value survives NetCDF.
    coords : mapping of str to sequence, optional
        Coordinate values of a dim; ``chain`` and ``draw`` without an entry are indexed ``0 .. n-1``
        (ArviZ's convention), element dims ``1 .. n`` (the model language's).

    Returns
    -------
    arviz.InferenceData or xarray.DataTree
        ``InferenceData`` under ArviZ 0.x, ``DataTree`` under ArviZ 1.x. The attrs are on
        the root and on every group.

    Raises
    ------
    DataError
        If an array has the wrong number of dims, chains or draws disagree between sampled
        groups, or two variables give the same dim different lengths.
    """
    dims = {name: list(names) for name, names in (dims or {}).items()}
    inputs = {
        "posterior": posterior,
        "sample_stats": sample_stats,
        "log_likelihood": log_likelihood,
        "posterior_predictive": posterior_predictive,
        "predictions": predictions,
        "observed_data": observed_data,
        "constant_data": constant_data,
    }
    inputs = {group: dict(values) for group, values in inputs.items() if values}
    if "posterior" not in inputs:
        raise DataError("results need at least one posterior variable")

    dim_names = _dim_names(inputs, dims)
    coord_values = _coords(inputs, dim_names, coords or {})
    stored_attrs = normalized_attrs(attrs or {})
    datasets = {
        group: _dataset(values, dim_names[group], coord_values, stored_attrs)
        for group, values in inputs.items()
    }
    return arviz_compat.make_container(datasets, stored_attrs)


def normalized_attrs(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """Run metadata in a form NetCDF stores and reads back unchanged.

    Parameters
    ----------
    attrs : mapping
        The metadata given to :func:`build_results`.

    Returns
    -------
    dict
        The metadata with ``created_at`` and ``gpdsl_version`` added when missing.
    """
    stored = {}
    for key, value in attrs.items():
        if value is None:
            continue
        if isinstance(value, (bool, np.bool_)):
            value = int(value)
        elif isinstance(value, dict) or (
            isinstance(value, (list, tuple)) and any(isinstance(v, (dict, list, tuple)) for v in value)
        ):
            value = json.dumps(value, sort_keys=True)
        stored[str(key)] = value
    stored.setdefault("created_at", datetime.datetime.now(datetime.timezone.utc).isoformat())
    stored.setdefault("gpdsl_version", gpdsl.__version__)
    return stored


def _dim_names(
    inputs: dict[str, dict[str, np.ndarray]], dims: dict[str, list[str]]
) -> dict[str, dict[str, tuple[str, ...]]]:
    names: dict[str, dict[str, tuple[str, ...]]] = {}
    sample_shape = None
    for group, values in inputs.items():
        names[group] = {}
        sampled = group in SAMPLED_GROUPS
        for var, array in values.items():
            array = np.asarray(array)
            leading = SAMPLE_DIMS if sampled else ()
            if array.ndim < len(leading):
                raise DataError(
                    f"{group} variable '{var}' has shape {array.shape}; expected (chain, draw, ...)"
                )
            if sampled:
                if sample_shape is None:
                    sample_shape = (array.shape[:2], group, var)
                elif array.shape[:2] != sample_shape[0]:
                    raise DataError(
                        f"{group} variable '{var}' has {array.shape[0]} chains x {array.shape[1]} "
                        f"draws but {sample_shape[1]} variable '{sample_shape[2]}' has "
                        f"{sample_shape[0][0]} x {sample_shape[0][1]}"
                    )
            extra = array.ndim - len(leading)
            given = dims.get(f"{group}/{var}", dims.get(var, [f"{var}_dim_{i}" for i in range(extra)]))
            if len(given) != extra:
                raise DataError(
                    f"{group} variable '{var}' has shape {array.shape} but dims {given} name "
                    f"{len(given)} dims after {'(chain, draw)' if sampled else 'none'}"
                )
            shape = array.shape[len(leading):]
            for dim in set(given):
                lengths = {n for d, n in zip(given, shape) if d == dim}
                if len(lengths) > 1:
                    raise DataError(
                        f"{group} variable '{var}' has shape {array.shape} but repeats dim '{dim}' "
                        f"with lengths {sorted(lengths)}"
                    )
            names[group][var] = (*leading, *_distinct(given))
    return names


def _distinct(dims: Sequence[str]) -> list[str]:
    seen: dict[str, int] = {}
    distinct = []
    for dim in dims:
        seen[dim] = seen.get(dim, 0) + 1
        distinct.append(dim if seen[dim] == 1 else f"{dim}__{seen[dim]}")
    return distinct


def _coords(
    inputs: dict[str, dict[str, np.ndarray]],
    dim_names: dict[str, dict[str, tuple[str, ...]]],
    coords: Mapping[str, Sequence[Any]],
) -> dict[str, np.ndarray]:
    lengths: dict[str, tuple[int, str]] = {}
    for group, values in inputs.items():
        for var, array in values.items():
            for dim, length in zip(dim_names[group][var], np.shape(array)):
                if dim in lengths and lengths[dim][0] != length:
                    raise DataError(
                        f"dim '{dim}' has length {length} in '{var}' but {lengths[dim][0]} "
                        f"in '{lengths[dim][1]}'"
                    )
                lengths.setdefault(dim, (length, var))
    values = {}
    for dim, (length, var) in lengths.items():
        base, repeat, suffix = dim.rpartition("__")
        if not (repeat and suffix.isdigit() and dim not in coords):
            base = dim
        if base in coords:
            given = np.asarray(coords[base])
            if given.shape != (length,):
                raise DataError(
                    f"coords for dim '{dim}' have {given.size} values but '{var}' has length {length}"
                )
            values[dim] = given
        else:
            values[dim] = np.arange(length) if dim in SAMPLE_DIMS else element_coordinates(length)
    return values


def _dataset(
    values: dict[str, np.ndarray],
    dim_names: dict[str, tuple[str, ...]],
    coords: dict[str, np.ndarray],
    attrs: dict[str, Any],
) -> xr.Dataset:
    variables = {var: (dim_names[var], np.asarray(array)) for var, array in values.items()}
    used = {dim for names in dim_names.values() for dim in names}
    return xr.Dataset(
        variables,
        coords={dim: coords[dim] for dim in coords if dim in used},
        attrs=dict(attrs),
    )
