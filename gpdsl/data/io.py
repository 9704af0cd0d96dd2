"""Read model data from JSON, CSV, NetCDF or a Python mapping, and load it checked against a model.

See ``docs/data.md`` for the formats, in particular the CSV column-naming convention.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
from collections.abc import Mapping
from itertools import product
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from gpdsl.data.memory import check_arrays, check_text_file
from gpdsl.data.scaling import Scaling, split_scaling
from gpdsl.data.validation import container_values, validate_data
from gpdsl.errors import DataError
from gpdsl.ir.nodes import Model
from gpdsl.source import Source, Span

DataValue = np.ndarray | int | float

SUFFIXES = {".json": "json", ".csv": "csv", ".nc": "netcdf", ".nc4": "netcdf"}

_JSON_SPECIAL = {"nan": math.nan, "inf": math.inf, "+inf": math.inf, "-inf": -math.inf,
                 "infinity": math.inf, "+infinity": math.inf, "-infinity": -math.inf}
_CSV_MISSING = {"nan", "na"}
_COLUMN = re.compile(r"^(?P<name>[A-Za-z_]\w*)(?P<index>(?:\.\d+)*|(?:\[\s*\d+(?:\s*,\s*\d+)*\s*\])+)$")
_INTEGER = re.compile(r"^[+-]?\d+$")


def load_data(
    source: str | os.PathLike | Mapping[str, Any], model: Model, allow_missing: Iterable[str] = ()
) -> tuple[dict[str, DataValue], list[str]]:
    """Read data and check it against the model's data block.

    Parameters
    ----------
    source : str, path-like or mapping
        A ``.json``, ``.csv`` or ``.nc`` file, or values by name (see :func:`read_data`).
    model : Model
        The checked model.
    allow_missing : iterable of str
        Real data variables that may contain NaN.

    Returns
    -------
    values : dict of str to ndarray, int or float
        Every declared data variable, normalised (see :func:`~gpdsl.data.validation.validate_data`).
    warnings : list of str
        Supplied names the model does not declare as data (dropped).

    Raises
    ------
    DataError
        The source cannot be read or the data disagree with the declarations.
    """
    return validate_data(model, read_data(source, model), allow_missing)


def read_data(source: str | os.PathLike | Mapping[str, Any], model: Model | None = None) -> dict[str, DataValue]:
    """Read data values by name, without checking them against a model.

    Parameters
    ----------
    source : str, path-like or mapping
        A path ending in ``.json`` (CmdStan's JSON data format), ``.csv`` (one column per vector,
        ``X.1, X.2, ...`` for the columns of a matrix ``X``), ``.nc`` (NetCDF: each data variable by
        name), or a mapping (``dict``, ``xarray.Dataset``) of lists, arrays, pandas objects or
        scalars.
    model : Model, optional
        Used by the CSV reader, where a single-value column for a variable the model declares as a
        scalar becomes that scalar, and by the NetCDF reader, where a size the file does not hold as
        a variable is taken from the dimension of the same name.

    Returns
    -------
    dict of str to ndarray, int or float
        Arrays keep their element type (integers stay integers); 0-d values become Python scalars. The
        record of a standardisation (``v__centre``, ``v__scale``) is set apart (:func:`read_scaled_data`).

    Raises
    ------
    DataError
        The file is absent, unreadable, malformed, has an unknown extension, or a value is ragged.
    """
    return read_scaled_data(source, model)[0]


def read_scaled_data(source: str | os.PathLike | Mapping[str, Any],
                     model: Model | None = None) -> tuple[dict[str, DataValue], dict[str, Scaling]]:
    """Read data values by name and the record of how they were standardised (see :func:`read_data`).

    Returns
    -------
    values : dict of str to ndarray, int or float
        As :func:`read_data` returns them.
    scalings : dict of str to Scaling
        The ``v__centre`` and ``v__scale`` entries of :mod:`gpdsl.data.scaling`, by variable name.
    """
    origin = "data" if isinstance(source, Mapping) else f"data file '{source}'"
    return split_scaling(_read_values(source, model), origin)


def _read_values(source, model):
    if isinstance(source, Mapping):
        return {str(name): _from_python(str(name), value, "data") for name, value in source.items()}
    if not isinstance(source, (str, os.PathLike)):
        raise DataError(f"cannot read data from a {type(source).__name__}: pass a file path or a dict")
    path = Path(source)
    kind = SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise DataError(f"cannot read data file '{path}': unknown extension '{path.suffix}'",
                        hint="use .json (CmdStan JSON), .csv or .nc (NetCDF)")
    if path.is_dir():
        raise DataError(f"data file '{path}' is a directory, not a file")
    if not path.exists():
        raise DataError(f"data file '{path}' does not exist")
    if not path.is_file():
        raise DataError(f"data file '{path}' is not a regular file (a pipe or a device)")
    if kind != "netcdf":
        check_text_file(path, kind)
    if kind == "json":
        return _read_json(path)
    if kind == "csv":
        return _read_csv(path, model)
    return _read_netcdf(path, model)


# ---- Python values ---------------------------------------------------------------------------
def _from_python(name: str, value: Any, origin: str, exact: bool = False) -> DataValue:
    value = container_values(value)
    try:
        array = np.array(value, dtype=object) if exact else np.asarray(value)
    except ValueError:
        raise DataError(f"{origin} '{name}' is ragged: nested lists must have equal lengths at "
                        f"each level") from None
    if array.dtype.kind == "O" and array.ndim > 0 and any(isinstance(v, (list, tuple)) for v in array.flat):
        raise DataError(f"{origin} '{name}' is ragged: nested lists must have equal lengths at each level")
    return array.item() if array.ndim == 0 else array


# ---- JSON ------------------------------------------------------------------------------------
MAX_JSON_DEPTH = 32
"""Deepest nesting of a JSON data file: data arrays have a few dimensions, not thousands."""


def _read_text(path: Path, kind: str) -> str:
    """The file's text as UTF-8, without a byte-order mark (spreadsheets write one)."""
    try:
        return path.read_text(encoding="utf-8-sig")
    except OSError as error:
        raise DataError(f"cannot read {kind} data file '{path}': {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise DataError(f"cannot read {kind} data file '{path}': not UTF-8 text ({error.reason} at byte "
                        f"{error.start})") from None


def _read_json(path: Path) -> dict[str, DataValue]:
    text = _read_text(path, "JSON")
    depth = _json_depth(text)
    if depth > MAX_JSON_DEPTH:
        raise DataError(f"JSON data file '{path}' nests arrays or objects {depth} deep; data are at most "
                        f"{MAX_JSON_DEPTH} deep")
    try:
        content = json.loads(text, object_pairs_hook=lambda pairs: _unique_keys(path, pairs))
    except json.JSONDecodeError as exc:
        span = Span.point(Source(text, str(path)), exc.lineno, exc.colno)
        raise DataError(f"cannot parse JSON data file '{path}' (line {exc.lineno}, column "
                        f"{exc.colno}): {exc.msg}", span=span) from None
    if not isinstance(content, dict):
        raise DataError(f"JSON data file '{path}' must hold an object of variables by name; "
                        f"got a {type(content).__name__}")
    origin = f"JSON data file '{path}': variable"
    values = {}
    for name, value in content.items():
        outside: list[int] = []
        values[name] = _from_python(name, _json_numbers(name, value, origin, outside), origin, exact=bool(outside))
    return values


def _unique_keys(path: Path, pairs: list) -> dict:
    """A JSON object's members, refusing a name given twice (JSON parsers differ on which one wins)."""
    content = {}
    for key, value in pairs:
        if key in content:
            raise DataError(f"JSON data file '{path}': '{key}' is given twice; give each variable once")
        content[key] = value
    return content


def _json_depth(text: str) -> int:
    """The deepest nesting of brackets and braces outside strings (counted before parsing, which recurses)."""
    depth = deepest = 0
    for token in re.finditer(r'"(?:[^"\\]|\\.)*"|[\[{]|[\]}]', text):
        mark = token.group()
        if mark in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif mark in "]}":
            depth -= 1
    return deepest


def _json_numbers(name: str, value: Any, origin: str, outside: list) -> Any:
    """CmdStan's JSON: numbers, nested lists, and the strings NaN, Inf, -Inf, Infinity, -Infinity; an integer
    beyond 64 bits is put in ``outside`` too (the variable is then kept exact, as Python integers)."""
    if isinstance(value, list):
        return [_json_numbers(name, item, origin, outside) for item in value]
    if isinstance(value, str) and value.strip().lower() in _JSON_SPECIAL:
        return _JSON_SPECIAL[value.strip().lower()]
    if value is None:  # null: a missing value, as NaN
        return math.nan
    if isinstance(value, int) and not isinstance(value, bool) and not -2**63 <= value < 2**63:
        outside.append(value)
        return value
    if isinstance(value, (bool, int, float)):
        return value
    raise DataError(f"{origin} '{name}' holds {json.dumps(value)}: values must be numbers, nested "
                    f"lists of numbers, null (missing), or \"NaN\", \"Inf\", \"-Inf\"")


# ---- NetCDF ----------------------------------------------------------------------------------
def _read_netcdf(path: Path, model: Model | None) -> dict[str, DataValue]:
    import xarray as xr

    try:
        with xr.open_dataset(path) as dataset:
            check_arrays(path, dataset.data_vars)
            values = {str(name): _netcdf_values(path, array, model) for name, array in dataset.data_vars.items()}
            dims = dict(dataset.sizes)
    except (OSError, ValueError) as exc:
        raise DataError(f"cannot read NetCDF data file '{path}': {exc}") from None
    if not values:
        raise DataError(f"NetCDF data file '{path}' holds no variables (is it damaged or empty?)")
    for size in model.sizes if model else ():
        if size not in values and size in dims:
            values[size] = int(dims[size])
    return values


def _netcdf_values(path: Path, array, model: Model | None) -> DataValue:
    array = _declared_order(path, array, model)
    values = np.asarray(array.values)
    stored = np.dtype(array.encoding.get("dtype", values.dtype))
    if stored.kind in "iub" and values.dtype.kind == "f" and not np.isnan(values).any():
        values = values.astype(stored)
    return values.item() if values.ndim == 0 else values


def _declared_order(path: Path, array, model: Model | None):
    """A NetCDF variable with its dimensions in the order the model declares them, by their names.

    Dimensions named after the declared sizes (``X`` stored as ``(D, N)`` for ``matrix[N, D] X``) are transposed
    to the declared order; a dimension named after one of the model's sizes in a place the declaration gives to
    another is refused, since its values would be read transposed (unnoticed when the sizes are equal).
    """
    declared = model.data.get(str(array.name)) if model is not None else None
    if declared is None:
        return array
    names = [str(dim) for dim in array.dims]
    shape = [dim if isinstance(dim, str) else None for dim in declared.type.shape]
    if len(names) == len(shape) and sorted(names) == sorted(d for d in shape if d) and len(set(names)) == len(names):
        return array.transpose(*shape)
    misplaced = [(name, want) for name, want in zip(names, shape) if name in model.sizes and name != want]
    if len(names) != len(shape) or not misplaced:
        return array
    name, want = misplaced[0]
    declared_dims = ", ".join(str(d) for d in declared.type.shape)
    raise DataError(f"NetCDF data file '{path}': variable '{array.name}' has dimensions ({', '.join(names)}), but the "
                    f"model declares {array.name} as {declared.type.describe()}: its dimension "
                    f"{names.index(name) + 1} is named {name} where {want or 'a fixed size'} is declared",
                    hint=f"name its dimensions ({declared_dims}) or store it in that order")


# ---- CSV -------------------------------------------------------------------------------------
def _read_csv(path: Path, model: Model | None) -> dict[str, DataValue]:
    reader = csv.reader(io.StringIO(_read_text(path, "CSV"), newline=""))
    try:
        rows = list(reader)
    except csv.Error as error:
        raise DataError(f"CSV data file '{path}', line {reader.line_num}: {error}") from None
    if not rows:
        raise DataError(f"CSV data file '{path}' is empty: expected a header row of column names")
    header = [name.strip() for name in rows[0]]
    body = rows[1:]
    if not any(cell.strip() for row in body for cell in row):
        raise DataError(f"CSV data file '{path}' has a header row but no values")
    for number, row in enumerate(body, start=2):
        if len(row) > len(header):
            raise DataError(f"CSV data file '{path}', line {number}: {len(row)} cells but "
                            f"{len(header)} column names")
    cells = {i: [row[i].strip() if i < len(row) else "" for row in body] for i in range(len(header))}

    variables: dict[str, dict[tuple[int, ...], list[str]]] = {}
    for position, column in enumerate(header):
        name, index = _parse_column(path, column)
        columns = variables.setdefault(name, {})
        if index in columns:
            raise DataError(f"CSV data file '{path}': column '{column}' appears twice")
        columns[index] = cells[position]
    scalars = {name for name, v in model.data.items() if not v.type.shape} if model else set()
    return {name: _csv_variable(path, name, columns, name in scalars)
            for name, columns in variables.items()}


def _parse_column(path: Path, column: str) -> tuple[str, tuple[int, ...]]:
    match = _COLUMN.match(column)
    if match is None:
        raise DataError(
            f"CSV data file '{path}': column name '{column}' is not a variable name with optional "
            f"indices (y, X.1, X[1], X.1.2 or X[1,2])",
            hint="write pandas frames with index=False" if column in ("", "Unnamed: 0") else None)
    index = tuple(int(i) for i in re.findall(r"\d+", match["index"]))
    if any(i < 1 for i in index):
        raise DataError(f"CSV data file '{path}': column '{column}' has index 0; indices are 1-based")
    return match["name"], index


def _csv_variable(path: Path, name: str, columns: dict[tuple[int, ...], list[str]], scalar: bool):
    ranks = {len(index) for index in columns}
    if len(ranks) > 1:
        raise DataError(f"CSV data file '{path}': variable '{name}' mixes columns with different "
                        f"numbers of indices ({', '.join(_column_name(name, i) for i in sorted(columns))})")
    extent = tuple(max(index[k] for index in columns) for k in range(ranks.pop()))
    grid = list(product(*(range(1, n + 1) for n in extent)))
    absent = [index for index in grid if index not in columns]
    if absent:
        raise DataError(
            f"CSV data file '{path}': '{name}' has columns up to "
            f"{_column_name(name, extent)} but lacks {', '.join(_column_name(name, i) for i in absent)}")

    length = max((_filled_length(cells) for cells in columns.values()), default=0)
    for index in grid:
        cells = columns[index][:length]
        if "" in cells:
            raise DataError(
                f"CSV data file '{path}', line {cells.index('') + 2}: column "
                f"'{_column_name(name, index)}' is empty where other columns of '{name}' have "
                f"values", hint="write NaN for a missing value")

    parsed = [[_parse_cell(path, name, index, row, columns[index][row]) for index in grid]
              for row in range(length)]
    all_integers = all(isinstance(v, int) for row in parsed for v in row)
    exact = all_integers and any(not -2**63 <= v < 2**63 for row in parsed for v in row)
    kind = object if exact else np.int64 if all_integers else np.float64
    array = np.array(parsed, dtype=kind).reshape((length,) + extent)
    if scalar and array.shape == (1,):
        return array.item()
    return array


def _filled_length(cells: list[str]) -> int:
    """The number of rows up to the last non-empty cell (shorter variables leave trailing rows empty)."""
    for row in range(len(cells), 0, -1):
        if cells[row - 1] != "":
            return row
    return 0


def _parse_cell(path: Path, name: str, index: tuple[int, ...], row: int, cell: str) -> int | float:
    if _INTEGER.match(cell):
        return int(cell)
    if cell.lower() in _CSV_MISSING:
        return math.nan
    try:
        return float(cell)
    except ValueError:
        raise DataError(f"CSV data file '{path}', line {row + 2}: column '{_column_name(name, index)}' "
                        f"holds '{cell}', which is not a number") from None


def _column_name(name: str, index: tuple[int, ...]) -> str:
    return name + "".join(f".{i}" for i in index)
