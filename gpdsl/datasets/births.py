"""US births per day, 1969-1988: the birthday data of BDA3 Ch. 21 and of the HSGP paper's case study."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from gpdsl.datasets.dataset import Dataset
from gpdsl.datasets.storage import fetch_file
from gpdsl.errors import DatasetError

BIRTHS_FILE = "births_usa_1969.csv"
BIRTHS_COLUMNS = ("year", "month", "day", "births", "day_of_year", "day_of_week", "id", "day_of_year2")
BIRTHS_INPUTS = ("id", "years_since_1969", "year", "month", "day", "day_of_year", "day_of_week")
FIRST_DAY = np.datetime64("1969-01-01")
DAYS_PER_YEAR = 365.25


def births_usa_1969(
    *,
    relative: bool = False,
    mirror: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> Dataset:
    """Births per day in the USA, 1 January 1969 to 31 December 1988 (7305 days).

    The National Vital Statistics System natality data analysed in Gelman, Carlin, Stern, Dunson, Vehtari &
    Rubin (2013), *Bayesian Data Analysis*, 3rd ed., Ch. 21, and in the birthday case study of
    Riutort-Mayol, Bürkner, Andersen, Solin & Vehtari (2023), "Practical Hilbert space approximate Bayesian
    Gaussian processes for probabilistic programming", *Statistics and Computing* 33:17. The file
    ``births_usa_1969.csv`` is read from the repository of that paper, ``gabriuma/basis_functions_approach_to_GP``
    at commit ``4199949163e71a6f3b8f51ea5f7e9fee6a2d9fc9``, and checked against its registered sha256.

    Parameters
    ----------
    relative : bool, optional
        ``y`` as births relative to the mean over all 7305 days, times 100 (100 is an average day), as the
        HSGP paper's case study models them; by default the number of births.
    mirror, cache_dir : path-like, optional
        Override ``GPDSL_DATA_MIRROR`` and the cache directory (mirror folder ``births_usa_1969``).

    Returns
    -------
    Dataset
        ``X`` (7305, 7) columns ``id`` (day index, 1 on 1969-01-01), ``years_since_1969`` (``(id - 1) / 365.25``),
        ``year``, ``month``, ``day`` (of the month), ``day_of_year`` (on a 366-day calendar: 1 March is day
        61 in every year, as in the file) and ``day_of_week`` (1 Monday to 7 Sunday); ``y`` births (float64);
        ``extras["date"]`` the date (``datetime64[D]``).

    Raises
    ------
    DatasetError
        If the file lacks a column, or its days are not the consecutive dates from 1969-01-01 numbered by
        ``id`` with their weekdays.
    """
    path = fetch_file("births_usa_1969", BIRTHS_FILE, mirror=mirror, cache_dir=cache_dir)
    table = pd.read_csv(path)
    missing = [column for column in BIRTHS_COLUMNS if column not in table.columns]
    if missing:
        raise DatasetError(f"{BIRTHS_FILE} lacks the columns {missing}; found {list(table.columns)}")
    date = _checked_dates(table)
    births = table["births"].to_numpy(dtype=np.int64)
    y = births / births.mean() * 100.0 if relative else births.astype(np.float64)
    inputs = table.assign(years_since_1969=(table["id"] - 1) / DAYS_PER_YEAR)
    return Dataset(
        name="births_usa_1969:relative" if relative else "births_usa_1969",
        X=inputs.loc[:, list(BIRTHS_INPUTS)].to_numpy(dtype=np.float64),
        y=y,
        feature_names=BIRTHS_INPUTS,
        target_name="births_relative100" if relative else "births",
        extras={"date": date},
    )


def _checked_dates(table: pd.DataFrame) -> np.ndarray:
    """The rows' dates, after checking that ``id`` numbers consecutive days from 1969-01-01 with their weekdays."""
    try:
        date = pd.to_datetime(table[["year", "month", "day"]]).to_numpy().astype("datetime64[D]")
    except (ValueError, OverflowError) as error:
        raise DatasetError(f"{BIRTHS_FILE}: year, month and day do not form dates ({error})") from None
    ids = table["id"].to_numpy()
    wrong = np.flatnonzero(ids != np.arange(1, len(ids) + 1))
    if wrong.size:
        row = int(wrong[0])
        raise DatasetError(f"{BIRTHS_FILE}: row {row + 1} has id {ids[row]}, not {row + 1}: the rows should be "
                           f"the consecutive days from {FIRST_DAY}")
    expected = FIRST_DAY + (ids - 1).astype("timedelta64[D]")
    wrong = np.flatnonzero(date != expected)
    if wrong.size:
        row = int(wrong[0])
        raise DatasetError(f"{BIRTHS_FILE}: row {row + 1} (id {ids[row]}) is dated {date[row]}, not {expected[row]}: "
                           f"the rows should be the consecutive days from {FIRST_DAY}")
    weekday = (date.astype("datetime64[D]").view("int64") + 3) % 7 + 1
    wrong = np.flatnonzero(weekday != table["day_of_week"].to_numpy())
    if wrong.size:
        row = int(wrong[0])
        raise DatasetError(f"{BIRTHS_FILE}: row {row + 1} ({date[row]}) has day_of_week "
                           f"{table['day_of_week'].iloc[row]}, not {weekday[row]} (1 Monday to 7 Sunday)")
    return date
