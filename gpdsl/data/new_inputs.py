"""The values to predict at (``--predict``) checked against the model before a run, not after it.

New inputs are shaped as the GP input variable they stand for, with any number of points in place of the
training points: ``matrix[N, D] X`` takes ``(m, D)``, ``array[T] matrix[N, 2] X`` takes ``(T, m, 2)``; tuple inputs
over one index, ``gp((t, g), ...)``, take ``(m, 2)``, the components' columns side by side. A method
that reads new values by name (a GPLVM's new outputs and the inputs of its latent inputs' GP prior) is given them
shaped the same way.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from gpdsl.errors import DataError
from gpdsl.ir.nodes import Model


def verify_new_inputs(model: Model, data: dict, new_inputs, by_name: bool) -> None:
    """Refuse values to predict at whose shape does not fit the model's inputs, or that are not finite.

    Parameters
    ----------
    model : Model
    data : dict
        The validated training data (its sizes give the widths).
    new_inputs : array_like or mapping, optional
        What ``--predict`` read: one array (the GP's inputs), or, with ``by_name``, values by variable name.
    by_name : bool
        The method reads new values by name (new outputs may hold NaN where unobserved).

    Raises
    ------
    DataError
        Naming the variable, the shape expected (``m`` for the number of new points) and the shape given.
    """
    if new_inputs is None:
        return
    points = _points(model)
    if by_name:
        if not isinstance(new_inputs, Mapping):
            raise DataError("the values to predict at must be variables by name (a data file)")
        known = {name: value for name, value in new_inputs.items()
                 if name in model.data and _free_axis(model, name, points) is not None}
        if not known:
            names = [n for n in model.data if _free_axis(model, n, points) is not None]
            raise DataError(f"the values to predict at (--predict) hold none of the model's variables with one value "
                            f"per point ({', '.join(names) or 'none'}); they hold "
                            f"{', '.join(map(str, new_inputs)) or 'nothing'}")
        inputs = _inputs(model)
        if inputs and not set(known) & set(inputs):
            raise DataError(f"the values to predict at (--predict) need new inputs {' or '.join(inputs)} of the GP "
                            f"prior of the latent inputs; they hold {', '.join(map(str, new_inputs))}")
        for name, value in known.items():
            values = _check(model, data, name, value, points, missing_allowed=name not in inputs)
            if not set(known) & set(inputs):
                free = _free_axis(model, name, points)
                empty = np.isnan(values).all(axis=tuple(a for a in range(values.ndim) if a != free))
                if empty.any():
                    raise DataError(f"new point {int(np.argmax(empty)) + 1} of '{name}' to predict at (--predict) is "
                                    "entirely missing (NaN), and no inputs are given for it: there is nothing to "
                                    "predict from")
        return
    if _fits_tuple_inputs(model, data, new_inputs):
        return
    candidates = [name for name in _inputs(model) if _free_axis(model, name, points) is not None]
    errors = []
    for name in candidates:
        try:
            _check(model, data, name, new_inputs, points, missing_allowed=False)
            return
        except DataError as error:
            errors.append(error)
    if errors:
        raise errors[0]


def _fits_tuple_inputs(model: Model, data: dict, new_inputs) -> bool:
    """``new_inputs`` is a finite ``(m, width)`` matrix of points of a GP whose inputs are a tuple over one index,
    ``gp((t, g), ...)``, its components' columns side by side (``[t_i, g_i]`` per row)."""
    from gpdsl.ir.structure import process_nodes

    values = np.asarray(new_inputs, dtype=float) if not isinstance(new_inputs, Mapping) else None
    if values is None or values.ndim != 2 or values.shape[0] == 0 or not np.all(np.isfinite(values)):
        return False
    for node in process_nodes(model):
        inputs = node.statement.inputs
        if len(inputs.components) > 1 and len(inputs.index_shape) == 1:
            width = sum(int(data[d]) if isinstance(d, str) else int(d) for d in inputs.dims)
            if values.shape[1] == width:
                return True
    return False


def _inputs(model: Model) -> list[str]:
    from gpdsl.ir.structure import process_nodes

    names = [name for node in process_nodes(model) for name in node.statement.inputs.names if name in model.data]
    return list(dict.fromkeys(names))


def _points(model: Model) -> set:
    from gpdsl.ir.structure import process_nodes

    return {node.statement.inputs.index_shape[-1] for node in process_nodes(model) if node.statement.inputs.index_shape}


def _free_axis(model: Model, name: str, points: set) -> int | None:
    """The axis of the variable ``name`` that counts points (``N`` of ``matrix[N, D]``), or None."""
    symbols = model.data[name].type.shape
    return next((axis for axis, dim in enumerate(symbols) if dim in points), None)


def _check(model: Model, data: dict, name: str, value, points: set, missing_allowed: bool) -> np.ndarray:
    declared = model.data[name]
    shape = tuple(int(d) for d in declared.type.concrete_shape(data))
    free = _free_axis(model, name, points)
    expected = "(" + ", ".join("m" if axis == free else str(n) for axis, n in enumerate(shape)) + \
        ("," if len(shape) == 1 else "") + f") ({declared.type.describe()} with m >= 1 new points)"
    what = f"the new values of '{name}' to predict at (--predict)"
    try:
        values = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise DataError(f"{what} are not an array of numbers: they must be of shape {expected}") from None
    if len(shape) == 1 and values.ndim == 2 and values.shape[1] == 1:
        values = values[:, 0]
    if values.ndim == 1 and len(shape) == 2:
        width = shape[1 - free]
        if width == 1:
            values = np.expand_dims(values, 1 - free)
        elif missing_allowed and values.size == width:
            values = np.expand_dims(values, free)
    if values.ndim != len(shape) or any(values.shape[axis] != n for axis, n in enumerate(shape) if axis != free) \
            or values.shape[free] == 0:
        raise DataError(f"{what} must be of shape {expected}; got shape {values.shape}")
    bad = np.isinf(values) if missing_allowed else ~np.isfinite(values)
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        raise DataError(f"{what} hold {values[index]} at "
                        f"{name}[{', '.join(str(i + 1) for i in index)}]: they must be finite"
                        + (" (NaN marks an unobserved value)" if missing_allowed else ""))
    return values


def input_matrix(value, width: int | None, subject: str) -> np.ndarray:
    """``value`` as a finite float matrix of ``width`` columns (a vector when ``width`` is 1), or a DataError.

    Parameters
    ----------
    value : array_like
        New input points, one per row.
    width : int or None
        The training inputs' number of columns (None: no matrix fits, always an error).
    subject : str
        What the error names, e.g. ``"new inputs of 'f'"``.

    Returns
    -------
    numpy.ndarray, shape (m, width)
    """
    points = np.asarray(value, dtype=float)
    if points.ndim == 1 and width == 1:
        points = points[:, None]
    if points.ndim != 2 or points.shape[1] != width or not np.all(np.isfinite(points)):
        raise DataError(f"{subject} must be a finite matrix with {width} column(s); got shape {points.shape}")
    return points
