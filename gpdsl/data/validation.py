"""Check data against a model's data declarations: presence, sizes, shapes, types, bounds, finiteness.

Sizes (``int`` data used as dimensions) may be omitted: each missing size is inferred from the first
data variable, in declaration order, whose declared shape uses it, and every other variable must agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import numpy as np

from gpdsl.errors import DataError
from gpdsl.ir.nodes import Constant, GPStatement, KernelCombination, LikelihoodStatement, Model, Ref, Variable
from gpdsl.ir.structure import kernel_nodes
from gpdsl.likelihoods import LIKELIHOODS
from gpdsl.ir.types import VarType

LABEL_RANGE_LIMIT = 20
"""Integer variables with both bounds at most this far apart are treated as category labels."""

SHOWN_VALUES = 10
INT64 = (-2**63, 2**63 - 1)


@dataclass(frozen=True)
class _InferredSize:
    value: int
    variable: str
    axis: int


def validate_data(
    model: Model, data: Mapping[str, Any], allow_missing: Iterable[str] = ()
) -> tuple[dict[str, np.ndarray | int | float], list[str]]:
    """Check data against the model's data block and normalise it.

    Parameters
    ----------
    model : Model
        The checked model whose ``data`` declarations the values must satisfy.
    data : mapping of str to array-like or scalar
        Values by variable name (e.g. from :func:`gpdsl.data.io.read_data`). Sizes may be omitted
        when another variable's shape determines them.
    allow_missing : iterable of str
        Data variables that may contain NaN (missing values); infinities are never allowed. A real variable
        stays ``float64``; an ``int`` one with missing entries is returned as ``float64`` with NaN there
        (its other entries checked as integers), without any as ``int64``.

    Returns
    -------
    values : dict of str to ndarray, int or float
        Every declared data variable in declaration order: sizes and ``int`` scalars as Python ints,
        ``real`` scalars as Python floats, arrays as ``int64`` or ``float64`` ndarrays of the
        declared shape.
    warnings : list of str
        One message per supplied name the data block does not declare (those values are dropped).

    Raises
    ------
    DataError
        A variable is missing, has the wrong shape or element type, violates its bounds, holds NaN
        or infinity, or a size is negative, not an integer or inconsistent with the shapes.
    """
    allowed = _check_allow_missing(model, allow_missing)
    arrays = {name: _as_numeric(model.data[name], value) for name, value in data.items() if name in model.data}
    warnings = [_unknown_warning(model, name) for name in data if name not in model.data]

    sizes, inferred = _resolve_sizes(model, arrays)
    for name, variable in model.data.items():
        if name not in arrays and name not in model.sizes:
            raise DataError(f"data '{name}' is missing: expected {_declared(variable.type, sizes)}")
    for name in model.sizes:
        if name not in sizes:
            raise DataError(
                f"data '{name}' is missing: expected int, a size that no data variable's shape "
                f"determines")

    values: dict[str, np.ndarray | int | float] = {}
    for name, variable in model.data.items():
        if name in model.sizes:
            values[name] = sizes[name]
        else:
            values[name] = _check_variable(variable, arrays[name], sizes, inferred, name in allowed)
    _check_observations(model, values, sizes)
    _check_warped_inputs(model, values)
    return values, warnings


# ---- conversion ------------------------------------------------------------------------------
def container_values(value: Any) -> Any:
    """What NumPy should convert: the values held by a pandas or xarray object, else ``value``.

    Parameters
    ----------
    value : any
        A pandas ``Series`` or ``DataFrame`` (``to_numpy()``), an xarray ``DataArray`` (``.values``),
        or anything else (returned as it is).

    Returns
    -------
    any
        The unwrapped values.
    """
    if hasattr(value, "to_numpy"):
        return value.to_numpy()
    if hasattr(value, "values") and not callable(value.values):
        return value.values
    return value


def _as_numeric(variable: Variable, value: Any) -> np.ndarray:
    name = variable.name
    value = container_values(value)
    try:
        array = np.asarray(value)
    except ValueError as exc:
        raise DataError(f"data '{name}' is not a rectangular array: {exc}") from None
    if variable.type.base == "int" and array.dtype.kind in "uO":
        _check_int64(name, array)
    if array.dtype.kind in "biuf":
        return array
    if array.dtype.kind == "O":
        try:
            return array.astype(np.float64)
        except OverflowError:
            index = _first(np.vectorize(_beyond_double, otypes=[bool])(array))
            raise DataError(f"data '{name}' holds an integer beyond double precision at {_element(name, index)} "
                            f"({_digits(array[index])})") from None
        except (TypeError, ValueError):
            pass
    shown = repr(value) if array.ndim == 0 else f"an array of {array.dtype}"
    raise DataError(f"data '{name}' must be numeric; got {shown}")


def _check_int64(name: str, array: np.ndarray) -> None:
    """Refuse integers outside the 64-bit range in an ``int`` variable, shown exactly (not wrapped around)."""
    outside = np.vectorize(lambda v: isinstance(v, (int, np.integer)) and not INT64[0] <= int(v) <= INT64[1],
                           otypes=[bool])(array) if array.size else np.zeros(array.shape, bool)
    if outside.any():
        index = _first(outside)
        where = f" at {_element(name, index)}" if index else ""
        raise DataError(f"data '{name}' holds {_digits(array[index])}{where}: integers are from {INT64[0]} to "
                        f"{INT64[1]}")


def _beyond_double(value) -> bool:
    try:
        float(value)
    except OverflowError:
        return True
    except (TypeError, ValueError):
        pass
    return False


def _digits(value) -> str:
    text = str(int(value))
    return text if len(text) <= 40 else f"{text[:20]}...{text[-10:]} ({len(text)} digits)"


def _check_allow_missing(model: Model, names: Iterable[str]) -> set[str]:
    allowed = set(names)
    for name in sorted(allowed):
        variable = model.data.get(name)
        if variable is None:
            raise DataError(f"allow_missing names '{name}', which is not a data variable of the model")
        outcome = any(statement.target.name == name for statement in model.likelihoods())
        if variable.type.base != "real" and not outcome:
            raise DataError(
                f"allow_missing names '{name}', declared {variable.type.describe()}: only real variables and "
                f"the outcomes of a likelihood can hold missing values (NaN)")
    return allowed


def _unknown_warning(model: Model, name: str) -> str:
    for role, declared in (("parameter", model.parameters), ("latent variable", model.latents)):
        if name in declared:
            return f"'{name}' is a {role} of the model, not data; ignored"
    return f"data '{name}' is not declared in the model's data block; ignored"


# ---- sizes -----------------------------------------------------------------------------------
def _resolve_sizes(model: Model, arrays: dict[str, np.ndarray]):
    sizes: dict[str, int] = {}
    inferred: dict[str, _InferredSize] = {}
    for name in model.sizes:
        if name in arrays:
            sizes[name] = _size_value(model.data[name], arrays[name])
    for name, variable in model.data.items():
        if name in model.sizes or name not in arrays:
            continue
        shape = variable.type.shape
        if arrays[name].ndim != len(shape):
            continue
        for axis, dim in enumerate(shape):
            if isinstance(dim, str) and dim not in sizes:
                sizes[dim] = int(arrays[name].shape[axis])
                inferred[dim] = _InferredSize(sizes[dim], name, axis)
    return sizes, inferred


def _size_value(variable: Variable, array: np.ndarray) -> int:
    name = variable.name
    if array.ndim != 0:
        raise DataError(f"size '{name}' must be a single integer; got an array of shape {array.shape}")
    value = array.item()
    if isinstance(value, float) and not value.is_integer():
        raise DataError(f"size '{name}' must be a non-negative integer; got {value!r}")
    if int(value) < 0:
        raise DataError(f"size '{name}' must be a non-negative integer; got {int(value)}")
    _check_bounds(variable, np.asarray(int(value)))
    return int(value)


# ---- one variable ----------------------------------------------------------------------------
def _check_variable(variable: Variable, array: np.ndarray, sizes: dict[str, int],
                    inferred: dict[str, _InferredSize], allow_missing: bool):
    vtype = variable.type
    expected = vtype.concrete_shape(sizes)
    array = _check_shape(variable, array, expected, sizes, inferred)
    _check_finite(variable, array, allow_missing)
    missing = np.isnan(array) if array.dtype.kind == "f" else np.zeros(array.shape, bool)
    if vtype.base == "int" and missing.any():
        if not missing.all():
            filled = np.where(missing, array[~missing][0], array)  # checked where observed, indices kept
            _check_bounds(variable, _as_integers(variable, filled), sizes)
        return np.where(missing, np.nan, np.round(array)).astype(np.float64)
    if vtype.base == "int":
        array = _as_integers(variable, array)
    else:
        array = array.astype(np.float64)
    _check_bounds(variable, array, sizes)
    if array.ndim == 0:
        return int(array) if vtype.base == "int" else float(array)
    return np.array(array, copy=True)


def _check_shape(variable, array, expected, sizes, inferred) -> np.ndarray:
    if array.shape == expected:
        return array
    if array.size == 0 and int(np.prod(expected)) == 0:
        return array.reshape(expected)
    shape = variable.type.shape
    if array.ndim == len(expected):
        for axis, dim in enumerate(shape):
            origin = inferred.get(dim) if isinstance(dim, str) else None
            if origin and array.shape[axis] != origin.value and origin.variable != variable.name:
                raise DataError(
                    f"size '{dim}' is inconsistent: inferred as {origin.value} from dimension "
                    f"{origin.axis + 1} of '{origin.variable}', but dimension {axis + 1} of "
                    f"'{variable.name}' (declared {variable.type.describe()}) has length "
                    f"{array.shape[axis]}",
                    hint=f"supply '{dim}' explicitly or fix the shapes")
    raise DataError(
        f"data '{variable.name}' has shape {_shape_text(array.shape)}: expected "
        f"{_declared(variable.type, sizes)} = {_shape_text(expected)}")


def _check_finite(variable: Variable, array: np.ndarray, allow_missing: bool) -> None:
    if array.dtype.kind != "f":
        return
    infinite = np.isinf(array)
    if infinite.any():
        index = _first(infinite)
        raise DataError(f"data '{variable.name}' contains {array[index].item()} at "
                        f"{_element(variable.name, index)}: values must be finite")
    missing = np.isnan(array)
    if missing.any() and not allow_missing:
        hint = ("only variables the model allows to be missing may hold NaN"
                if variable.type.base == "real" else None)
        raise DataError(f"data '{variable.name}' contains NaN at "
                        f"{_element(variable.name, _first(missing))}", hint=hint)


def _as_integers(variable: Variable, array: np.ndarray) -> np.ndarray:
    if array.dtype.kind == "f":
        fractional = array != np.round(array)
        if fractional.any():
            if _label_range(variable.type) is not None:
                _check_labels(variable, array)
            index = _first(fractional)
            raise DataError(
                f"data '{variable.name}' must hold integers (declared {variable.type.describe()}); "
                f"{_element(variable.name, index)} = {array[index].item()!r}")
        outside = (array < INT64[0]) | (array >= 2.0**63)
        if outside.any():
            index = _first(outside)
            where = f" at {_element(variable.name, index)}" if index else ""
            raise DataError(f"data '{variable.name}' holds {array[index].item()!r}{where}: integers are from "
                            f"{INT64[0]} to {INT64[1]}")
    return array.astype(np.int64)


def _check_bounds(variable: Variable, array: np.ndarray, sizes: Mapping[str, int] | None = None) -> None:
    if variable.type.base == "int" and _label_range(variable.type) is not None:
        _check_labels(variable, array)
    vtype = variable.type.concrete_bounds(sizes or {})
    for side, bound, outside in (("lower", vtype.lower, np.less), ("upper", vtype.upper, np.greater)):
        if bound is None:
            continue
        violations = outside(array, bound)
        if violations.any():
            index = _first(violations)
            raise DataError(
                f"data '{variable.name}' violates its {side} bound {_number(bound)} (declared "
                f"{variable.type.describe()}): {_element(variable.name, index)} = {array[index].item()!r}")


def _check_labels(variable: Variable, array: np.ndarray) -> None:
    low, high = _label_range(variable.type)
    found = np.unique(array)
    if found.size == 0 or (found.min() >= low and found.max() <= high and (found == np.round(found)).all()):
        return
    allowed = f"{low} or {high}" if high - low == 1 else f"an integer from {low} to {high}"
    shown = ", ".join(_number(v) for v in found[:SHOWN_VALUES])
    if found.size > SHOWN_VALUES:
        shown += f", ... ({found.size} distinct values)"
    raise DataError(f"{variable.name} must be {allowed} (declared {variable.type.describe()}); "
                    f"found values {{{shown}}}: recode the labels")


def _label_range(vtype: VarType) -> tuple[int, int] | None:
    if vtype.base != "int" or not all(isinstance(b, (int, float)) for b in (vtype.lower, vtype.upper)):
        return None
    if not 0 < vtype.upper - vtype.lower <= LABEL_RANGE_LIMIT:
        return None
    return int(vtype.lower), int(vtype.upper)


# ---- likelihoods -----------------------------------------------------------------------------
def _check_observations(model: Model, values: dict, sizes: dict[str, int]) -> None:
    """Observations that their built-in likelihood gives zero probability (a negative count, a success
    count above its trials, an ordinal label outside 1..K, a non-positive gamma observation)."""
    for statement, loops in model.walk():
        if not isinstance(statement, LikelihoodStatement) or loops or statement.target.indices:
            continue
        likelihood = LIKELIHOODS.get(statement.distribution.name)
        if likelihood is None or likelihood.invalid_observations is None:
            continue
        y = np.asarray(values[statement.target.name], dtype=float)
        shaped = (*likelihood.own_shape, *likelihood.row_params)
        args = {name: _argument_value(expr, values, sizes, name in shaped) for name, expr in statement.distribution.args}
        invalid, requirement = likelihood.invalid_observations(y, args)
        invalid = np.asarray(invalid) & ~np.isnan(y)
        if invalid.any():
            index = _first(np.broadcast_to(invalid, y.shape)) if y.ndim else ()
            name = statement.target.name
            shown = [f"{_element(arg, index)} = {_number(value[index] if np.ndim(value) else value)}"
                     for arg, value in args.items() if value is not None and arg not in shaped
                     and isinstance(dict(statement.distribution.args)[arg], Ref)]
            raise DataError(f"data '{name}' must hold {requirement} for {likelihood.name}: "
                            f"{_element(name, index)} = {_number(y[index])}"
                            + (f" ({', '.join(shown)})" if shown else ""))


def _check_warped_inputs(model: Model, values: dict) -> None:
    """Data inputs of a ``warp`` kernel outside [0, 1], where the Kumaraswamy CDF is defined."""
    for statement, _ in model.walk():
        if not isinstance(statement, GPStatement):
            continue
        for node in kernel_nodes(statement.kernel):
            if not (isinstance(node, KernelCombination) and node.name == "warp"):
                continue
            inputs = statement.inputs
            components = range(len(inputs.components)) if node.component is None else [node.component]
            for c in components:
                expr = inputs.components[c]
                if not (isinstance(expr, Ref) and expr.role == "data"):
                    continue
                array = np.asarray(values[expr.name], dtype=float)
                outside = ~((array >= 0) & (array <= 1))
                if node.columns is not None and array.ndim >= 2:
                    selected = np.zeros(array.shape[-1], dtype=bool)
                    selected[node.columns[0]:node.columns[1]] = True
                    outside &= selected
                if outside.any():
                    index = _first(outside)
                    raise DataError(f"data '{expr.name}' must lie in [0, 1] as the input of warp (the Kumaraswamy "
                                    f"CDF): {_element(expr.name, index)} = {_number(array[index])}")


def _argument_value(expr, values: dict, sizes: dict[str, int], own_shape: bool):
    """A likelihood argument's value when it is data or a constant; zeros of its shape when ``own_shape`` (a vector
    shared by every observation, or a matrix with a row per observation)."""
    if own_shape:
        return np.zeros(expr.type.concrete_shape(sizes))
    if isinstance(expr, Ref) and expr.role == "data":
        return np.asarray(values[expr.name])
    if isinstance(expr, Constant):
        return np.asarray(expr.value)
    return None


# ---- messages --------------------------------------------------------------------------------
def _declared(vtype: VarType, sizes: Mapping[str, int]) -> str:
    symbols = list(dict.fromkeys(d for d in vtype.shape if isinstance(d, str)))
    if not symbols:
        return vtype.describe()
    values = ", ".join(f"{s}={sizes.get(s, '?')}" for s in symbols)
    return f"{vtype.describe()} ({values})"


def _shape_text(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(n) for n in shape) + ("," if len(shape) == 1 else "") + ")"


def _first(mask: np.ndarray) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argwhere(mask)[0])


def _element(name: str, index: tuple[int, ...]) -> str:
    """Stan's 1-based spelling of one element, e.g. ``X[2, 3]``; the bare name for a scalar."""
    return f"{name}[{', '.join(str(i + 1) for i in index)}]" if index else name


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))
