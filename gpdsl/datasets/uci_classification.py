"""UCI classification sets used in GP classification papers (pima, breast cancer, ionosphere, ...)."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from gpdsl.datasets.dataset import Dataset
from gpdsl.datasets.storage import fetch_file

GLASS_TYPES = {
    1: "building_windows_float_processed",
    2: "building_windows_non_float_processed",
    3: "vehicle_windows_float_processed",
    4: "vehicle_windows_non_float_processed",
    5: "containers",
    6: "tableware",
    7: "headlamps",
}
WINDOW_GLASS_TYPES = (1, 2, 3, 4)
ABALONE_MEASURES = (
    "length", "diameter", "height", "whole_weight", "shucked_weight", "viscera_weight", "shell_weight",
)


def _read_csv(name: str, file_name: str, mirror, cache_dir, **options) -> pd.DataFrame:
    path = fetch_file(name, file_name, mirror=mirror, cache_dir=cache_dir)
    return pd.read_csv(path, header=None, **options)


def _codes(values: np.ndarray, classes) -> np.ndarray:
    lookup = {value: code for code, value in enumerate(classes)}
    return np.array([lookup[value] for value in values], dtype=np.int64)


def pima(*, mirror: str | os.PathLike | None = None, cache_dir: str | os.PathLike | None = None) -> Dataset:
    """Pima Indians diabetes (Smith et al. 1988): 768 rows, 8 inputs.

    Returns
    -------
    Dataset
        ``y`` is 1 for a positive diabetes test (268 rows), 0 otherwise (500). Zeros in some
        columns (e.g. ``insulin``) stand for missing values in the original data; they are kept.
    """
    table = _read_csv("pima", "pima-indians-diabetes.csv", mirror, cache_dir)
    return Dataset(
        name="pima",
        X=table.iloc[:, :8].to_numpy(dtype=np.float64),
        y=table.iloc[:, 8].to_numpy(dtype=np.int64),
        feature_names=("pregnancies", "glucose", "blood_pressure", "skin_thickness", "insulin",
                       "bmi", "diabetes_pedigree", "age"),
        target_name="diabetes",
        class_names=("negative", "positive"),
    )


def breast_cancer_wisconsin(
    *, mirror: str | os.PathLike | None = None, cache_dir: str | os.PathLike | None = None
) -> Dataset:
    """Breast cancer Wisconsin, original (Wolberg & Mangasarian 1990): the 683 complete rows.

    The 16 rows with a missing ``bare_nuclei`` (``?``) are dropped.

    Returns
    -------
    Dataset
        ``X`` (683, 9) integer scores 1-10; ``y`` 1 malignant (239), 0 benign (444);
        ``extras["sample_id"]`` the sample code numbers (not unique).
    """
    table = _read_csv("breast_cancer_wisconsin", "breast-cancer-wisconsin.data", mirror, cache_dir,
                      na_values="?").dropna()
    return Dataset(
        name="breast_cancer_wisconsin",
        X=table.iloc[:, 1:10].to_numpy(dtype=np.float64),
        y=(table.iloc[:, 10].to_numpy() == 4).astype(np.int64),
        feature_names=("clump_thickness", "cell_size_uniformity", "cell_shape_uniformity",
                       "marginal_adhesion", "single_epithelial_cell_size", "bare_nuclei",
                       "bland_chromatin", "normal_nucleoli", "mitoses"),
        target_name="malignant",
        class_names=("benign", "malignant"),
        extras={"sample_id": table.iloc[:, 0].to_numpy(dtype=np.int64)},
    )


def ionosphere(*, mirror: str | os.PathLike | None = None, cache_dir: str | os.PathLike | None = None) -> Dataset:
    """Ionosphere radar returns (Sigillito et al. 1989): 351 rows, 34 inputs.

    Returns
    -------
    Dataset
        ``y`` 1 for "good" returns (225), 0 for "bad" (126). Column ``x2`` is constant zero.
    """
    table = _read_csv("ionosphere", "ionosphere.csv", mirror, cache_dir)
    return Dataset(
        name="ionosphere",
        X=table.iloc[:, :34].to_numpy(dtype=np.float64),
        y=(table.iloc[:, 34].to_numpy() == "g").astype(np.int64),
        feature_names=tuple(f"x{i}" for i in range(1, 35)),
        target_name="good_return",
        class_names=("bad", "good"),
    )


def glass(*, mirror: str | os.PathLike | None = None, cache_dir: str | os.PathLike | None = None) -> Dataset:
    """Glass identification (German 1987): 214 rows, refractive index and 8 oxide contents.

    Returns
    -------
    Dataset
        ``y`` indexes the six glass types present (type 4 has no rows): class ``k`` is
        ``class_names[k]``; ``extras["type"]`` keeps the original type code 1-7
        (counts 1:70, 2:76, 3:17, 5:13, 6:9, 7:29). The ``Id`` column is dropped.
    """
    table = _read_csv("glass", "glass.data", mirror, cache_dir)
    types = table.iloc[:, 10].to_numpy(dtype=np.int64)
    present = tuple(code for code in GLASS_TYPES if code in set(types.tolist()))
    return Dataset(
        name="glass",
        X=table.iloc[:, 1:10].to_numpy(dtype=np.float64),
        y=_codes(types, present),
        feature_names=("RI", "Na", "Mg", "Al", "Si", "K", "Ca", "Ba", "Fe"),
        target_name="glass_type",
        class_names=tuple(GLASS_TYPES[code] for code in present),
        extras={"type": types},
    )


def glass_window(*, mirror: str | os.PathLike | None = None, cache_dir: str | os.PathLike | None = None) -> Dataset:
    """Glass as a binary task: window glass (types 1-4, 163 rows) against the rest (types 5-7, 51 rows).

    Returns
    -------
    Dataset
        As :func:`glass`, with ``y`` 1 for window glass and 0 otherwise.
    """
    data = glass(mirror=mirror, cache_dir=cache_dir)
    return Dataset(
        name="glass:window",
        X=data.X,
        y=np.isin(data.extras["type"], WINDOW_GLASS_TYPES).astype(np.int64),
        feature_names=data.feature_names,
        target_name="window_glass",
        class_names=("non_window", "window"),
        extras=dict(data.extras),
    )


def new_thyroid(*, mirror: str | os.PathLike | None = None, cache_dir: str | os.PathLike | None = None) -> Dataset:
    """UCI new-thyroid (Coomans et al. 1983): 215 rows, 5 laboratory tests, 3 classes.

    Returns
    -------
    Dataset
        ``y`` 0 normal (150), 1 hyperthyroid (35), 2 hypothyroid (30).
    """
    table = _read_csv("new_thyroid", "new-thyroid.csv", mirror, cache_dir)
    return Dataset(
        name="new_thyroid",
        X=table.iloc[:, :5].to_numpy(dtype=np.float64),
        y=table.iloc[:, 5].to_numpy(dtype=np.int64) - 1,
        feature_names=("t3_resin_uptake", "total_thyroxin", "total_triiodothyronine", "basal_tsh",
                       "max_tsh_difference"),
        target_name="thyroid_state",
        class_names=("normal", "hyper", "hypo"),
    )


def abalone(*, mirror: str | os.PathLike | None = None, cache_dir: str | os.PathLike | None = None) -> Dataset:
    """Abalone (Nash et al. 1994): 4177 rows, 7 physical measurements, rings as target.

    Returns
    -------
    Dataset
        ``X`` (4177, 7) the measurements; ``y`` the ring count (float; age is about rings + 1.5);
        ``extras["sex"]`` the sex as strings ``"M"``, ``"F"`` or ``"I"`` (infant).
    """
    table = _read_csv("abalone", "abalone.csv", mirror, cache_dir)
    return Dataset(
        name="abalone",
        X=table.iloc[:, 1:8].to_numpy(dtype=np.float64),
        y=table.iloc[:, 8].to_numpy(dtype=np.float64),
        feature_names=ABALONE_MEASURES,
        target_name="rings",
        extras={"sex": table.iloc[:, 0].to_numpy(dtype=str)},
    )


def abalone_male_female(
    *, mirror: str | os.PathLike | None = None, cache_dir: str | os.PathLike | None = None
) -> Dataset:
    """Abalone as a binary task: male against female, infants dropped.

    Returns
    -------
    Dataset
        ``X`` (2835, 8) the seven measurements and the ring count; ``y`` 1 male (1528), 0 female (1307).
    """
    data = abalone(mirror=mirror, cache_dir=cache_dir)
    sex = data.extras["sex"]
    keep = np.isin(sex, ("M", "F"))
    return Dataset(
        name="abalone:male-vs-female",
        X=np.column_stack([data.X[keep], data.y[keep]]),
        y=(sex[keep] == "M").astype(np.int64),
        feature_names=ABALONE_MEASURES + ("rings",),
        target_name="male",
        class_names=("F", "M"),
        extras={"sex": sex[keep]},
    )
