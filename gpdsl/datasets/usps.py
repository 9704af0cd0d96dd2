"""USPS handwritten digits, 16x16 grey levels (the ESL ``zip.train``/``zip.test`` version)."""

from __future__ import annotations

import gzip
import os

import numpy as np
import pandas as pd

from gpdsl.datasets.dataset import Dataset
from gpdsl.datasets.storage import fetch_split
from gpdsl.errors import DatasetError

_SPLIT_FILES = {"train": ("zip.train.gz",), "test": ("zip.test.gz",)}


def usps(
    split: str = "train",
    *,
    mirror: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> Dataset:
    """Load the USPS digits.

    Parameters
    ----------
    split : {"train", "test"}
        ``"train"`` has 7291 rows, ``"test"`` 2007.
    mirror, cache_dir : path-like, optional
        Override ``GPDSL_DATA_MIRROR`` and the cache directory.

    Returns
    -------
    Dataset
        ``X`` (n, 256) grey levels in [-1, 1], row-major 16x16 images (``X[i].reshape(16, 16)``);
        ``y`` the digit 0-9; ``class_names`` ``("0", ..., "9")``.
    """
    (path,) = fetch_split("usps", split, _SPLIT_FILES, mirror=mirror, cache_dir=cache_dir)
    with gzip.open(path, "rt") as stream:
        table = pd.read_csv(stream, sep=r"\s+", header=None).to_numpy(dtype=np.float64)
    return Dataset(
        name=f"usps:{split}",
        X=table[:, 1:],
        y=table[:, 0].astype(np.int64),
        feature_names=tuple(f"pixel_{row}_{col}" for row in range(16) for col in range(16)),
        target_name="digit",
        class_names=tuple(str(digit) for digit in range(10)),
    )


def usps_pair(
    positive: int = 3,
    negative: int = 5,
    split: str = "train",
    *,
    mirror: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> Dataset:
    """A binary USPS task: one digit against another (3 vs 5 by default).

    Built from the standard ESL split (3 vs 5: 658 + 556 training rows, 166 + 160 test rows);
    this is not the re-split ``usps_resampled.mat`` used in the GPML book.

    Parameters
    ----------
    positive, negative : int
        The digits labelled 1 and 0.
    split : {"train", "test"}
        Which file to draw from.
    mirror, cache_dir : path-like, optional
        Override ``GPDSL_DATA_MIRROR`` and the cache directory.

    Returns
    -------
    Dataset
        Rows of the two digits only; ``y`` is 1 for ``positive``, 0 for ``negative``;
        ``extras["digit"]`` keeps the original digit.
    """
    if positive == negative or not {positive, negative} <= set(range(10)):
        raise DatasetError(f"need two different digits 0-9, got {positive} and {negative}")
    digits = usps(split, mirror=mirror, cache_dir=cache_dir)
    keep = np.isin(digits.y, (positive, negative))
    return Dataset(
        name=f"usps:{positive}-vs-{negative}:{split}",
        X=digits.X[keep],
        y=(digits.y[keep] == positive).astype(np.int64),
        feature_names=digits.feature_names,
        target_name=f"is_{positive}",
        class_names=(str(negative), str(positive)),
        extras={"digit": digits.y[keep]},
    )
