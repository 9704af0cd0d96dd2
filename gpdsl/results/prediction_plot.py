"""The predictions group drawn as bands: ``gpdsl plot FIT.nc --kind predictions``.

Each predicted quantity is drawn against the new points' index (a forecast's ``series_index``): a predictive
``<name>_mean`` with ``<name>_variance`` as the mean and +-2 sd, draws (``chain``, ``draw``) as their mean
and 5-95% band, and a forecast's ``<name>_observed`` as points. A matrix quantity gets one panel per
column. A standardised outcome is drawn in its original units
(:func:`~gpdsl.results.original_units.in_original_units`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from gpdsl.errors import GpdslError
from gpdsl.results.elements import checked_var_names
from gpdsl.results.original_units import in_original_units, stored_model

SAMPLE_DIMS = ("chain", "draw")
MAX_PANELS = 12
PANEL_COLUMNS = 3


@dataclass(frozen=True)
class Band:
    """One panel: a centre line and a band over the new points, optionally observed values."""

    title: str
    position: np.ndarray
    centre: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    observed: np.ndarray | None = None
    axis: str = "new point"


def prediction_bands(results: Any, var_names: Sequence[str] | None = None,
                     original_units: bool = True) -> tuple[list[Band], list[str]]:
    """The panels of the predictions plot and the variables drawn in the original units.

    Parameters
    ----------
    results : arviz.InferenceData or xarray.DataTree
        Results with a ``predictions`` group (a run with ``--predict``, a forecast).
    var_names : sequence of str, optional
        Predicted quantities (``y_mean``, ``f``); every one by default.
    original_units : bool
        Draw a standardised outcome in its original units.

    Returns
    -------
    bands : list of Band
    mapped : list of str

    Raises
    ------
    GpdslError
        No predictions group, an unknown variable, or nothing that can be drawn.
    """
    model = stored_model(results) if original_units else None
    dataset, mapped = in_original_units(results, "predictions", model)
    names = [name for name in checked_var_names(dataset, var_names, "predictions")
             if not name.endswith(("_variance", "_observed")) and name != "series_index"]
    position = np.asarray(dataset["series_index"]).ravel() if "series_index" in dataset else None
    bands = []
    for name in names:
        bands += _bands(dataset, name, position)
    if not bands:
        raise GpdslError("the predictions group holds nothing to draw as bands",
                         hint=f"it has: {', '.join(map(str, dataset.data_vars))}")
    return bands[:MAX_PANELS], [name for name in mapped if name in names]


def _bands(dataset, name: str, position) -> list[Band]:
    array = dataset[name]
    sample = [dim for dim in array.dims if dim in SAMPLE_DIMS]
    draws = array.stack(sample=sample).transpose("sample", ...).values if sample else array.values[None]
    if draws.ndim == 1 or draws.shape[1] < 2:
        return []
    draws = draws.reshape(draws.shape[0], draws.shape[1], -1)
    base = name.removesuffix("_mean")
    variance_name = base + "_variance"
    if name.endswith("_mean") and variance_name in dataset:
        variance = dataset[variance_name]
        variances = variance.stack(sample=sample).transpose("sample", ...).values if sample else variance.values[None]
        variances = variances.reshape(draws.shape)
        centre = draws.mean(0)
        sd = np.sqrt(variances.mean(0) + draws.var(0))
        lower, upper, label = centre - 2 * sd, centre + 2 * sd, "mean +- 2 sd"
    elif draws.shape[0] > 1:
        centre = draws.mean(0)
        lower, upper = np.quantile(draws, [0.05, 0.95], axis=0)
        label = "mean, 5-95%"
    else:
        return []
    observed = dataset[base + "_observed"].values.reshape(draws.shape[1], -1) \
        if base + "_observed" in dataset else None
    indexed = position is not None and len(position) == draws.shape[1]
    index = position if indexed else np.arange(1, draws.shape[1] + 1)
    columns = draws.shape[2]
    return [Band(f"{name}{f'[, {column + 1}]' if columns > 1 else ''} ({label})", index, centre[:, column],
                 lower[:, column], upper[:, column], None if observed is None else observed[:, column],
                 "series index" if indexed else "new point")
            for column in range(columns)]


def draw_predictions(results: Any, var_names: Sequence[str] | None = None, original_units: bool = True):
    """The predictions plot as a matplotlib figure (see :func:`prediction_bands`)."""
    from matplotlib.figure import Figure

    bands, mapped = prediction_bands(results, var_names, original_units)
    columns = min(PANEL_COLUMNS, len(bands))
    rows = -(-len(bands) // columns)
    figure = Figure(figsize=(4.2 * columns, 3.0 * rows))
    for number, band in enumerate(bands, start=1):
        axes = figure.add_subplot(rows, columns, number)
        axes.fill_between(band.position, band.lower, band.upper, color="C0", alpha=0.25, linewidth=0)
        axes.plot(band.position, band.centre, color="C0")
        if band.observed is not None:
            axes.plot(band.position, band.observed, "k.", markersize=3)
        axes.set_title(band.title, fontsize=9)
        axes.set_xlabel(band.axis)
    units = f"; {', '.join(mapped)} in the data's original units" if mapped else ""
    figure.suptitle(f"predictions{units}", fontsize=10)
    figure.tight_layout()
    return figure
