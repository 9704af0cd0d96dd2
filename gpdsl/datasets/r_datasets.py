"""Datasets from R: ``airquality`` and ``AirPassengers`` (package ``datasets``), ``Pima.tr`` (``MASS``).

They come from the ``pydataset`` package when it is installed (its copy is verified against a
pinned sha256), otherwise from an unverified download of the Rdatasets CSV.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from gpdsl.datasets.dataset import Dataset
from gpdsl.datasets.storage import fetch_file
from gpdsl.errors import DatasetError

AIRQUALITY_INPUTS = ("Solar.R", "Wind", "Temp", "Month", "Day")
PIMA_TR_INPUTS = ("npreg", "glu", "bp", "skin", "bmi", "ped", "age")


def read_r_table(name: str, file_name: str, mirror, cache_dir) -> pd.DataFrame:
    """The Rdatasets CSV ``file_name`` of the registry entry ``name``, its first column as the index."""
    path = fetch_file(name, file_name, mirror=mirror, cache_dir=cache_dir)
    return pd.read_csv(path, index_col=0)


def airquality(
    *,
    complete_cases: bool = False,
    mirror: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> Dataset:
    """Daily air quality in New York, May to September 1973 (153 days).

    Parameters
    ----------
    complete_cases : bool, optional
        Keep only the 111 days without a missing value.
    mirror, cache_dir : path-like, optional
        Override ``GPDSL_DATA_MIRROR`` and the cache directory (mirror folder ``rdatasets``).

    Returns
    -------
    Dataset
        ``X`` columns ``Solar.R``, ``Wind``, ``Temp``, ``Month``, ``Day``; ``y`` ozone (ppb).
        Missing values are NaN (37 in ``y``, 7 in ``Solar.R``) unless ``complete_cases``.
    """
    table = read_r_table("airquality", "airquality.csv", mirror, cache_dir)
    missing = [column for column in ("Ozone",) + AIRQUALITY_INPUTS if column not in table.columns]
    if missing:
        raise DatasetError(f"airquality.csv lacks the columns {missing}; found {list(table.columns)}")
    if complete_cases:
        table = table.dropna()
    return Dataset(
        name="airquality:complete" if complete_cases else "airquality",
        X=table.loc[:, list(AIRQUALITY_INPUTS)].to_numpy(dtype=np.float64),
        y=table["Ozone"].to_numpy(dtype=np.float64),
        feature_names=AIRQUALITY_INPUTS,
        target_name="Ozone",
    )


def air_passengers(
    *, mirror: str | os.PathLike | None = None, cache_dir: str | os.PathLike | None = None
) -> Dataset:
    """Monthly international airline passengers, 1949-1960 (Box & Jenkins), 144 months.

    Returns
    -------
    Dataset
        ``X`` (144, 1) time in decimal years (1949.0 is January 1949); ``y`` passengers in thousands.
    """
    table = read_r_table("air_passengers", "AirPassengers.csv", mirror, cache_dir)
    if table.shape[1] != 2 or "time" not in table.columns:
        raise DatasetError(f"AirPassengers.csv should have columns time and a value; found {list(table.columns)}")
    value = next(column for column in table.columns if column != "time")
    return Dataset(
        name="air_passengers",
        X=table[["time"]].to_numpy(dtype=np.float64),
        y=table[value].to_numpy(dtype=np.float64),
        feature_names=("time",),
        target_name="passengers",
    )


def pima_tr(*, mirror: str | os.PathLike | None = None, cache_dir: str | os.PathLike | None = None) -> Dataset:
    """MASS's ``Pima.tr``: the 200-row training half of the Pima Indians diabetes data, no missing values.

    The ``pydataset`` package (a dependency of gpdsl) ships a copy, so no network or mirror is needed.

    Returns
    -------
    Dataset
        ``X`` (200, 7) columns ``npreg``, ``glu``, ``bp``, ``skin``, ``bmi``, ``ped``, ``age``; ``y`` 1 for
        diabetic (``type == "Yes"``, 68 rows), 0 otherwise.
    """
    table = read_r_table("pima_tr", "Pima.tr.csv", mirror, cache_dir)
    expected = [*PIMA_TR_INPUTS, "type"]
    if list(table.columns) != expected:
        raise DatasetError(f"Pima.tr.csv should have columns {expected}; found {list(table.columns)}")
    return Dataset(
        name="pima_tr",
        X=table.loc[:, list(PIMA_TR_INPUTS)].to_numpy(dtype=np.float64),
        y=(table["type"] == "Yes").to_numpy(dtype=np.int64),
        feature_names=PIMA_TR_INPUTS,
        target_name="diabetes",
        class_names=("No", "Yes"),
    )
