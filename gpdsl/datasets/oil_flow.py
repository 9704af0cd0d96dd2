"""The three-phase oil flow data (Bishop & James 1993), as used in GP-LVM and GTM examples."""

from __future__ import annotations

import os

import numpy as np

from gpdsl.datasets.dataset import Dataset
from gpdsl.datasets.storage import fetch_split

_SPLIT_FILES = {
    split: tuple(f"{stem}{suffix}.txt" for suffix in ("", "Lbls", "Frctns"))
    for split, stem in {"train": "DataTrn", "test": "DataTst", "validation": "DataVdn"}.items()
}


def oil_flow(
    split: str = "train",
    *,
    mirror: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> Dataset:
    """Load one split of the oil flow data: 1000 rows of 12 gamma-densitometry readings.

    Parameters
    ----------
    split : {"train", "test", "validation"}
        Which of the three 1000-row files to load.
    mirror, cache_dir : path-like, optional
        Override ``GPDSL_DATA_MIRROR`` and the cache directory (see :func:`gpdsl.datasets.fetch`).

    Returns
    -------
    Dataset
        ``X`` (1000, 12); ``y`` integer flow configuration 0, 1 or 2 (the column of the one-hot
        label; the files do not name the configurations); ``extras["onehot"]`` (1000, 3) the
        labels as stored; ``extras["fractions"]`` (1000, 2) the phase fractions.
        The training split has 343/316/341 rows per class.
    """
    paths = fetch_split("oil_flow", split, _SPLIT_FILES, mirror=mirror, cache_dir=cache_dir)
    X, onehot, fractions = (np.loadtxt(path, ndmin=2) for path in paths)
    return Dataset(
        name=f"oil_flow:{split}",
        X=X,
        y=np.argmax(onehot, axis=1).astype(np.int64),
        feature_names=tuple(f"x{i}" for i in range(1, X.shape[1] + 1)),
        target_name="flow_configuration",
        class_names=("configuration 0", "configuration 1", "configuration 2"),
        extras={"onehot": onehot.astype(np.int64), "fractions": fractions},
    )
