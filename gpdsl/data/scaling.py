"""The centre and scale of standardised data: written beside the data, kept in the results.

``gpdsl data --standardize`` stores, beside each variable ``v`` it transformed, ``v__centre`` and
``v__scale``: one number, or one per column of a matrix, such that the original value is
``centre + scale * stored``. Stan reserves names that end in two underscores, so these never clash with a
model's data; every data reader sets them apart from the variables (:func:`split_scaling`), and a run
records them in its results (``data_scaling``) so that predictions can be shown in the original units.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from gpdsl.errors import DataError

CENTRE, SCALE = "__centre", "__scale"


@dataclass(frozen=True)
class Scaling:
    """How a data variable was standardised: ``original = centre + scale * stored``.

    Attributes
    ----------
    centre, scale : ndarray
        0-d, or 1-D with one entry per column of a matrix variable; every scale is positive.
    """

    centre: np.ndarray
    scale: np.ndarray

    def original(self, values) -> np.ndarray:
        """Stored values (draws, means) in the original units."""
        return self.centre + self.scale * np.asarray(values)

    def original_variance(self, values) -> np.ndarray:
        """Stored variances in the original units."""
        return self.scale ** 2 * np.asarray(values)

    def as_dict(self) -> dict[str, Any]:
        """``{"centre": ..., "scale": ...}`` as JSON numbers."""
        return {"centre": self.centre.tolist(), "scale": self.scale.tolist()}


def scaling_entries(name: str, centre, scale) -> dict[str, np.ndarray | float]:
    """The two data-file entries that record how ``name`` was standardised."""
    return {name + CENTRE: _numbers(centre), name + SCALE: _numbers(scale)}


def split_scaling(values: Mapping[str, Any], origin: str = "data") -> tuple[dict[str, Any], dict[str, Scaling]]:
    """Set the scaling entries of read data apart from its variables.

    Parameters
    ----------
    values : mapping
        Values by name, as a data reader returns them.
    origin : str
        What the values came from, for messages.

    Returns
    -------
    variables : dict
        Every other entry.
    scalings : dict of str to Scaling
        By the name of the variable they describe.

    Raises
    ------
    DataError
        A centre without its scale (or the reverse), a scale that is not positive, a value that is not finite,
        or a centre and scale of different shapes.
    """
    variables = {name: value for name, value in values.items() if not name.endswith((CENTRE, SCALE))}
    described = {name.removesuffix(CENTRE).removesuffix(SCALE) for name in values if name not in variables}
    scalings = {}
    for name in sorted(described):
        missing = [name + suffix for suffix in (CENTRE, SCALE) if name + suffix not in values]
        if missing:
            raise DataError(f"{origin} records how '{name}' was standardised without '{missing[0]}'",
                            hint=f"give both {name}{CENTRE} and {name}{SCALE}, or neither")
        centre, scale = (np.asarray(values[name + suffix], dtype=float) for suffix in (CENTRE, SCALE))
        if centre.shape != scale.shape or centre.ndim > 1:
            raise DataError(f"{origin}: {name}{CENTRE} and {name}{SCALE} must be numbers or vectors of one "
                            f"length; got shapes {centre.shape} and {scale.shape}")
        if not (np.all(np.isfinite(centre)) and np.all(np.isfinite(scale)) and np.all(scale > 0)):
            raise DataError(f"{origin}: {name}{SCALE} must be positive and {name}{CENTRE} finite")
        scalings[name] = Scaling(centre, scale)
    return variables, scalings


def scalings_json(scalings: Mapping[str, Scaling]) -> str:
    """The results attribute ``data_scaling``: every scaling by variable name, as JSON."""
    return json.dumps({name: scaling.as_dict() for name, scaling in scalings.items()})


def scalings_from_json(text: str | None) -> dict[str, Scaling]:
    """The scalings of a results attribute written by :func:`scalings_json` (none when absent)."""
    if not text:
        return {}
    return {name: Scaling(np.asarray(entry["centre"], dtype=float), np.asarray(entry["scale"], dtype=float))
            for name, entry in json.loads(text).items()}


def _numbers(value):
    array = np.asarray(value, dtype=float)
    return float(array) if array.ndim == 0 else array
