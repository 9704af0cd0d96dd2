"""A packaged dataset as the data a model file reads (``gpdsl data NAME -o FILE.json``).

Forms, by the model they feed:

- ``xy`` -- ``N``, ``D``, inputs ``X`` (N x D) and targets ``y``: GP regression and classification
  (``models/gp_regression.gpm``, ``models/gp_classification.gpm``);
- ``inputs`` -- ``X`` only: new inputs for ``--predict``;
- ``labels`` -- ``labels``: the class of each row, for ``gpdsl plot --kind latent --labels``;
- ``series`` -- ``y``: a series for ``gpdsl forecast``;
- ``gplvm`` -- ``N``, ``D``, ``Q`` and outputs ``Y`` centred over the rows kept (the dataset's inputs as N x D outputs, with
  ``--with-target`` its target as the first column): Bayesian GPLVMs; with ``time`` also ``t``, the row's
  position (1, 2, ...) in the dataset, for dynamical GPLVMs; with ``inputs`` those columns as observed
  inputs ``X`` (N x k) rather than outputs, for supervised GPLVMs;
- ``times`` -- ``t`` only: the positions of rows, new times for a dynamical GPLVM's ``--predict``;
- ``timeseries`` -- ``N``, times ``t`` (the one input column chosen: the dataset's only one, or ``columns``)
  and targets ``y``: a GP over one time axis, ``f ~ gp(t, k)``.

``standardize`` centres and scales each input column and a real-valued regression target (not counts,
nor survival times, which keep their censoring indicator beside them) by its mean and sd over every row
of the dataset, so files of different rows (training and new inputs) are on one scale; the
outputs ``Y`` of the gplvm form by their mean and sd over the rows kept. Class labels, series (``gpdsl
forecast`` standardises them itself) and times are kept as they are. What was done is written beside the
values (``X__centre``, ``X__scale``, ``y__centre``, ...: :mod:`gpdsl.data.scaling`), and runs keep it in
their results, so that predictions can be shown in the original units.

A simulated dataset (a :class:`Simulator`, e.g. ``tegner_sequential``) has no table and no forms: its generator
writes the model's data directly (:func:`simulated_data`), sized by steps and rows and drawn with a seed.
"""

from __future__ import annotations

import functools
import json
import math
import os
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from gpdsl.data.scaling import scaling_entries
from gpdsl.errors import DatasetError

FORMS = ("xy", "inputs", "labels", "series", "gplvm", "times", "timeseries")


@dataclass(frozen=True)
class Loader:
    """A dataset ``gpdsl data`` can write: its loader and one line on what it is."""

    load: Callable[[], Any]
    description: str


@dataclass(frozen=True)
class Simulator:
    """A simulated dataset ``gpdsl data`` can write: its generator, one line on it, and its default sizes.

    ``simulate(steps, rows, seed)`` returns the model's data as a dict (the variables by name);
    ``values(steps, rows)`` is the number of float64 values its largest array holds (None: not checked).
    """

    simulate: Callable[[int, int, int], dict]
    description: str
    steps: int
    rows: int
    seed: int
    values: Callable[[int, int], int] | None = None


@functools.cache
def loaders() -> dict[str, Loader | Simulator]:
    """The datasets ``gpdsl data`` writes, by name (``offline``: shipped by a dependency or simulated)."""
    from gpdsl import datasets as d

    def entry(name):
        return d.get_entry(name).description

    return {
        "pima_tr": Loader(d.pima_tr, entry("pima_tr") + "; offline"),
        "airquality": Loader(d.airquality, entry("airquality") + "; offline"),
        "airquality_complete": Loader(lambda: d.airquality(complete_cases=True),
                                      "airquality, the 111 days without a missing value; offline"),
        "air_passengers": Loader(d.air_passengers, entry("air_passengers") + "; offline"),
        "veteran": Loader(d.veteran, entry("veteran") + "; cens beside y; offline"),
        "lung": Loader(d.lung, entry("lung") + "; cens beside y; offline"),
        "lung_complete": Loader(lambda: d.lung(complete_cases=True),
                                "lung, the 168 patients without a missing covariate; cens beside y; offline"),
        "bio_chemists": Loader(d.bio_chemists, entry("bio_chemists") + "; offline"),
        "births_usa_1969": Loader(d.births_usa_1969, entry("births_usa_1969") + "; y births"),
        "births_usa_1969_relative": Loader(lambda: d.births_usa_1969(relative=True),
                                           "births_usa_1969, y births relative to the mean x 100, as the HSGP "
                                           "paper models them"),
        "oil_flow": Loader(d.oil_flow, entry("oil_flow") + " (training split)"),
        "oil_flow_test": Loader(lambda: d.oil_flow("test"), "oil flow, test split"),
        "usps_3_vs_5": Loader(lambda: d.usps_pair(3, 5, "train"), "USPS digits 3 (1) against 5 (0), training split"),
        "pima": Loader(d.pima, entry("pima")),
        "breast_cancer_wisconsin": Loader(d.breast_cancer_wisconsin, entry("breast_cancer_wisconsin")),
        "ionosphere": Loader(d.ionosphere, entry("ionosphere")),
        "glass_window": Loader(d.glass_window, "glass: window (1) or not (0)"),
        "new_thyroid": Loader(d.new_thyroid, entry("new_thyroid")),
        "abalone_male_female": Loader(d.abalone_male_female, "abalone: male (1) or female (0)"),
        "concrete": Loader(d.concrete, entry("concrete")),
        "energy": Loader(d.energy, entry("energy")),
        "wine_quality_red": Loader(d.wine_quality_red, entry("wine_quality_red")),
        "boston": Loader(d.boston, entry("boston")),
        "tegner_sequential": Simulator(
            lambda steps, rows, seed: d.tegner_sequential(steps, rows, seed)[0],
            "Tegner et al. (2018) Sec. 4.1: y of a 3-D GP at --steps T times x --rows N inputs, for "
            "models/sequential_latent_gp.gpm (default T 20, N 200, --seed 2018); simulated, offline",
            steps=20, rows=200, seed=2018, values=lambda steps, rows: (steps * rows) ** 2),
    }


def model_data(dataset, form: str = "xy", *, rows: int | None = None, offset: int = 0, columns=None,
               standardize: bool = False, latent_dims: int | None = None, with_target: bool = False,
               time: bool = False, inputs=None) -> dict[str, Any]:
    """The data of a model, from a :class:`~gpdsl.datasets.Dataset`.

    Parameters
    ----------
    dataset : Dataset
        A loaded dataset (or a name of :func:`loaders`).
    form : {"xy", "inputs", "labels", "series", "gplvm", "times", "timeseries"}
        Which variables (see the module's description).
    rows : int, optional
        Keep this many rows (all from ``offset`` by default).
    offset : int
        Skip this many rows first.
    columns : sequence of str, optional
        Input columns to keep, by name, in this order (all by default).
    standardize : bool
        Centre and scale the inputs and real-valued outputs (see the module's description).
    latent_dims : int, optional
        ``Q`` of the ``gplvm`` form (required there).
    with_target : bool
        ``gplvm``: put the target in the first column of ``Y``.
    time : bool
        ``gplvm``: add ``t``, each row's position in the dataset (from 1).
    inputs : sequence of str, optional
        ``gplvm``: columns (of ``columns``) stored as observed inputs ``X`` instead of outputs.

    Returns
    -------
    dict
        Variables by name, NumPy arrays and ints (write them with :func:`write_data_json`).

    Raises
    ------
    DatasetError
        An unknown form, column or dataset, rows outside the dataset, or a ``gplvm`` without ``latent_dims``.
    """
    from gpdsl.suggest import unknown_name_hint

    if isinstance(dataset, str):
        dataset = load(dataset)
    if form not in FORMS:
        raise DatasetError(f"unknown form '{form}'", hint=unknown_name_hint(form, FORMS, "forms"))
    positions = _rows(dataset.n, rows, offset)
    X = dataset.X
    names = list(columns or dataset.feature_names)
    missing = [c for c in [*names, *(inputs or [])] if c not in dataset.feature_names]
    if missing:
        raise DatasetError(f"{dataset.name} has no column '{missing[0]}'",
                           hint=unknown_name_hint(missing[0], dataset.feature_names, f"columns of {dataset.name}"))
    if inputs and any(c not in names for c in inputs):
        raise DatasetError("the observed inputs (--inputs) must be among the chosen --columns")
    if form == "timeseries" and len(names) != 1:
        raise DatasetError(f"the timeseries form takes its times t from one input column; {dataset.name} has "
                           f"{len(names)}: {', '.join(names)}", hint="choose the time column with --columns NAME")
    X = X[:, [dataset.feature_names.index(c) for c in names]]
    if form == "timeseries":
        X = X[:, 0]
    y = dataset.y
    recorded = {}
    if standardize:
        X, recorded = _standardized(dataset, X, "t" if form == "timeseries" else "X")
        if form in ("xy", "timeseries") and _real_outcome(dataset):
            y, y_scaling = _standardized(dataset, y, "y")
            recorded.update(y_scaling)
    X, y = X[positions], y[positions]
    n = len(positions)
    if form == "xy":
        beside = {name: dataset.extras[name][positions] for name in dataset.outcome_extras}
        return {"N": n, "D": X.shape[1], "X": X, "y": y, **beside, **recorded}
    if form == "inputs":
        return {"X": X, **recorded}
    if form == "labels":
        return {"labels": y}
    if form == "series":
        return {"y": y}
    if form == "times":
        return {"t": positions + 1.0}
    if form == "timeseries":
        return {"N": n, "t": X, "y": y, **recorded}
    if latent_dims is None or isinstance(latent_dims, bool) or int(latent_dims) < 1:
        raise DatasetError("the gplvm form needs the number of latent dimensions (--latent-dims Q, Q >= 1)")
    observed = [names.index(c) for c in inputs or []]
    outputs = dataset.X[:, [dataset.feature_names.index(names[i]) for i in range(len(names)) if i not in observed]]
    Y = np.column_stack([dataset.y, outputs]) if with_target else outputs
    Y = Y[positions]
    centre = np.nanmean(Y, axis=0)
    scale = _spread(dataset, Y) if standardize else np.ones(Y.shape[1])
    data = {"N": n, "D": Y.shape[1], "Q": int(latent_dims), "Y": (Y - centre) / scale,
            **scaling_entries("Y", centre, scale)}
    if observed:
        data["X"] = X[:, observed]
        data.update({key: value[observed] for key, value in recorded.items()})
    return {**data, "t": positions + 1.0} if time else data


def _real_outcome(dataset) -> bool:
    """Whether ``standardize`` scales the outcome: real-valued, neither classes, counts nor censored times."""
    return (dataset.class_names is None and np.issubdtype(dataset.y.dtype, np.floating)
            and not dataset.outcome_extras)


def _standardized(dataset, values: np.ndarray, name: str) -> tuple[np.ndarray, dict]:
    """Values centred and scaled by their mean and sd over every row, and the entries that record it."""
    centre = np.nanmean(values, axis=0)
    scale = _spread(dataset, values)
    return (values - centre) / scale, scaling_entries(name, centre, scale)


def _spread(dataset, values: np.ndarray) -> np.ndarray:
    spread = np.nanstd(values, axis=0)
    if np.any(spread == 0):
        raise DatasetError(f"a column of {dataset.name} is constant; it cannot be standardised")
    return spread


def load(name: str):
    """The dataset ``name`` of :func:`loaders`, loaded (a simulated one: :func:`simulated_data`)."""
    entry = _entry(name)
    if isinstance(entry, Simulator):
        raise DatasetError(f"{name} is simulated: it has no table to load",
                           hint=f"simulated_data('{name}', steps=..., rows=..., seed=...) returns its data")
    return entry.load()


def simulated_data(name: str, *, steps: int | None = None, rows: int | None = None,
                   seed: int | None = None) -> dict[str, Any]:
    """The data of a simulated dataset of :func:`loaders`, as its model reads them.

    Parameters
    ----------
    name : str
        A :class:`Simulator` of :func:`loaders` (e.g. ``"tegner_sequential"``).
    steps : int, optional
        Time steps ``T`` (the dataset's default if not given).
    rows : int, optional
        Rows (inputs) per step ``N`` (the dataset's default if not given).
    seed : int, optional
        Seed of the draw (the dataset's default if not given): the same seed gives the same data.

    Returns
    -------
    dict
        Variables by name, NumPy arrays and ints (write them with :func:`write_data_json`).

    Raises
    ------
    DatasetError
        An unknown or tabular dataset, or steps, rows or seed that are not integers (steps and rows >= 1,
        seed >= 0).

    Examples
    --------
    >>> from gpdsl.datasets.model_data import simulated_data
    >>> data = simulated_data("tegner_sequential", steps=2, rows=5, seed=1)
    >>> data["T"], data["N"], data["X"].shape
    (2, 5, (2, 5, 2))
    """
    entry = _entry(name)
    if not isinstance(entry, Simulator):
        raise DatasetError(f"{name} is not simulated: it has no steps or seed",
                           hint="model_data(name, form, rows=..., ...) writes a table's rows")
    values = {"steps": entry.steps if steps is None else steps, "rows": entry.rows if rows is None else rows,
              "seed": entry.seed if seed is None else seed}
    for what, value in values.items():
        least = 0 if what == "seed" else 1
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
            raise DatasetError(f"{name}: {what} must be an integer >= {least}; got {value!r}")
    _check_memory(name, entry, int(values["steps"]), int(values["rows"]))
    return entry.simulate(int(values["steps"]), int(values["rows"]), int(values["seed"]))


def _check_memory(name: str, entry: Simulator, steps: int, rows: int) -> None:
    """Refuse sizes whose draw would not fit in the memory available (its largest array, named by its sizes)."""
    from gpdsl.data.memory import available_memory, shown_bytes

    available = available_memory()
    needed = 8 * entry.values(steps, rows) if entry.values is not None else 0
    if available is not None and needed > available:
        raise DatasetError(f"{name}: --steps {steps} x --rows {rows} points would take {shown_bytes(needed)} to draw "
                           f"(one joint GP over all of them); {shown_bytes(available)} of memory is available",
                           hint="lower --steps or --rows")


def _entry(name: str) -> Loader | Simulator:
    from gpdsl.suggest import unknown_name_hint

    known = loaders()
    if name not in known:
        raise DatasetError(f"unknown dataset '{name}'", hint=unknown_name_hint(name, known, "datasets"))
    return known[name]


def write_data_json(data: dict, path: str | os.PathLike) -> None:
    """Write model data as CmdStan-style JSON (NaN as ``"NaN"``, infinities as ``"Inf"``, ``"-Inf"``), atomically."""
    from gpdsl.storage.atomic import atomic_write_text

    atomic_write_text(path, json.dumps({name: _json_value(value) for name, value in data.items()}) + "\n", "data")


def _json_value(value):
    if isinstance(value, np.ndarray):
        return _json_value(value.tolist())
    if isinstance(value, (list, tuple)):
        return [_json_value(item) for item in value]
    if isinstance(value, np.generic):
        return _json_value(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Inf" if value > 0 else "-Inf")
    return value


def _rows(total: int, rows: int | None, offset: int) -> np.ndarray:
    if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset < total:
        raise DatasetError(f"the offset must be an integer in [0, {total}); got {offset!r}")
    available = total - offset
    count = available if rows is None else rows
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= available:
        raise DatasetError(f"rows must be an integer in [1, {available}] ({total} rows, offset {offset}); got {rows!r}")
    return np.arange(offset, offset + count)
