"""UCI regression sets in the layout of Hernandez-Lobato & Adams (2015) and Gal & Ghahramani (2016).

Each comes with the 20 standard 90/10 train/test splits of those papers; see :func:`uci_split`.
"""

from __future__ import annotations

import os

import numpy as np

from gpdsl.datasets.dataset import Dataset
from gpdsl.datasets.storage import fetch_file
from gpdsl.errors import DatasetError

_COLUMNS = {
    "concrete": (
        ("cement", "blast_furnace_slag", "fly_ash", "water", "superplasticizer",
         "coarse_aggregate", "fine_aggregate", "age"),
        "compressive_strength",
    ),
    "energy": (
        ("relative_compactness", "surface_area", "wall_area", "roof_area", "overall_height",
         "orientation", "glazing_area", "glazing_area_distribution"),
        "heating_load",
    ),
    "wine_quality_red": (
        ("fixed_acidity", "volatile_acidity", "citric_acid", "residual_sugar", "chlorides",
         "free_sulfur_dioxide", "total_sulfur_dioxide", "density", "pH", "sulphates", "alcohol"),
        "quality",
    ),
    "boston": (
        ("CRIM", "ZN", "INDUS", "CHAS", "NOX", "RM", "AGE", "DIS", "RAD", "TAX", "PTRATIO", "B", "LSTAT"),
        "MEDV",
    ),
}
SPLIT_COUNT = 20


def _check_name(name: str) -> None:
    if name not in _COLUMNS:
        raise DatasetError(f"unknown UCI regression set {name!r}", hint=f"use one of {sorted(_COLUMNS)}")


def _load_indices(name: str, file_name: str, mirror, cache_dir) -> np.ndarray:
    path = fetch_file(name, file_name, mirror=mirror, cache_dir=cache_dir)
    return np.atleast_1d(np.loadtxt(path, dtype=np.int64))


def uci_regression(
    name: str,
    *,
    mirror: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> Dataset:
    """Load a UCI regression set by name.

    Parameters
    ----------
    name : {"concrete", "energy", "wine_quality_red", "boston"}
        The dataset.
    mirror, cache_dir : path-like, optional
        Override ``GPDSL_DATA_MIRROR`` and the cache directory.

    Returns
    -------
    Dataset
        ``X`` and ``y`` as chosen by the set's ``index_features.txt`` and ``index_target.txt``.
    """
    _check_name(name)
    table = np.loadtxt(fetch_file(name, "data.txt", mirror=mirror, cache_dir=cache_dir), ndmin=2)
    features = _load_indices(name, "index_features.txt", mirror, cache_dir)
    target = int(_load_indices(name, "index_target.txt", mirror, cache_dir)[0])
    feature_names, target_name = _COLUMNS[name]
    return Dataset(
        name=name,
        X=table[:, features],
        y=table[:, target],
        feature_names=feature_names,
        target_name=target_name,
    )


def uci_split(
    name: str,
    index: int,
    *,
    mirror: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Row indices of standard split ``index`` (0-19) of a UCI regression set.

    Returns
    -------
    train, test : ndarray of int
        0-based rows; use with :meth:`Dataset.subset`.
    """
    _check_name(name)
    if not 0 <= index < SPLIT_COUNT:
        raise DatasetError(f"split index must be 0-{SPLIT_COUNT - 1}, got {index}")
    train = _load_indices(name, f"index_train_{index}.txt", mirror, cache_dir)
    test = _load_indices(name, f"index_test_{index}.txt", mirror, cache_dir)
    return train, test


def concrete(*, mirror=None, cache_dir=None) -> Dataset:
    """Concrete compressive strength (Yeh 1998): 1030 rows, 8 inputs. See :func:`uci_regression`."""
    return uci_regression("concrete", mirror=mirror, cache_dir=cache_dir)


def energy(*, mirror=None, cache_dir=None) -> Dataset:
    """Energy efficiency, heating load only (Tsanas & Xifara 2012): 768 rows, 8 inputs."""
    return uci_regression("energy", mirror=mirror, cache_dir=cache_dir)


def wine_quality_red(*, mirror=None, cache_dir=None) -> Dataset:
    """Red wine quality (Cortez et al. 2009): 1599 rows, 11 inputs."""
    return uci_regression("wine_quality_red", mirror=mirror, cache_dir=cache_dir)


def boston(*, mirror=None, cache_dir=None) -> Dataset:
    """Boston housing (Harrison & Rubinfeld 1978): 506 rows, 13 inputs, target MEDV.

    Kept for comparison with published results; note that its ``B`` column encodes a racial
    proportion, for which the dataset has been withdrawn from several libraries.
    """
    return uci_regression("boston", mirror=mirror, cache_dir=cache_dir)
