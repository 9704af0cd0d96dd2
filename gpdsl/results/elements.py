"""Split vector and matrix variables into scalar elements labelled like ``tau[1]``.

Element indices count from 1, as in the model language: ``tau[1]`` in a model file, in a summary, a
plot, ``gpdsl compare`` and the NetCDF coordinates of a results file name the same element.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import xarray as xr

from gpdsl.errors import GpdslError

SAMPLE_DIMS = ("chain", "draw")
FIRST_INDEX = 1


def element_coordinates(length: int) -> np.ndarray:
    """The coordinate values of an element dim of ``length`` entries: ``1 .. length``, as the language counts."""
    return np.arange(FIRST_INDEX, FIRST_INDEX + length)


@dataclass(frozen=True)
class Element:
    """One scalar element of a variable.

    Parameters
    ----------
    label : str
        ``name`` for a scalar, ``name[i]`` or ``name[i, j]`` (coordinate values, from 1 unless the
        results name their coordinates otherwise) otherwise.
    var_name : str
        The variable it belongs to.
    selection : dict
        Dim name to integer position, for ``DataArray.isel``.
    """

    label: str
    var_name: str
    selection: dict[str, int]

    def draws(self, dataset: xr.Dataset) -> np.ndarray:
        """The element's draws as a ``(chain, draw)`` array."""
        return dataset[self.var_name].isel(self.selection).transpose(*SAMPLE_DIMS).values

    def value(self, per_element: xr.Dataset) -> float:
        """The element's entry in a dataset of per-element statistics (ess, r_hat)."""
        return float(per_element[self.var_name].isel(self.selection).values)


def checked_var_names(dataset: xr.Dataset, var_names: Sequence[str] | None, group: str = "posterior") -> list[str]:
    """The requested variables of the group, or every variable; an unknown name is a :class:`GpdslError`."""
    available = [str(name) for name in dataset.data_vars]
    if var_names is None:
        return available
    if isinstance(var_names, str):
        var_names = [var_names]
    unknown = [name for name in var_names if name not in available]
    if unknown:
        raise GpdslError(
            f"no {group} variable named {', '.join(map(repr, unknown))}",
            hint=f"the {group} group has: {', '.join(available)}",
        )
    return list(var_names)


def elements(dataset: xr.Dataset, var_names: Sequence[str]) -> Iterator[Element]:
    """Every scalar element of the named variables, in row-major order."""
    for name in var_names:
        array = dataset[name]
        element_dims = [dim for dim in array.dims if dim not in SAMPLE_DIMS]
        shape = [array.sizes[dim] for dim in element_dims]
        for index in np.ndindex(*shape):
            if not element_dims:
                yield Element(name, name, {})
                continue
            labels = [_coord_label(array, dim, i) for dim, i in zip(element_dims, index)]
            yield Element(f"{name}[{', '.join(labels)}]", name, dict(zip(element_dims, index)))


def _coord_label(array: xr.DataArray, dim: str, position: int) -> str:
    if dim in array.coords:
        return str(array.coords[dim].values[position])
    return str(position + FIRST_INDEX)
