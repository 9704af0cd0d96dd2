"""Loaders for benchmark datasets used with Gaussian-process models.

Files are looked up in a mirror (``GPDSL_DATA_MIRROR`` or ``mirror=``), then in the user cache
(``GPDSL_CACHE_DIR``, ``$XDG_CACHE_HOME/gpdsl`` or ``~/.cache/gpdsl``), then downloaded from a
public URL into the cache; every file with a registered sha256 is verified. See ``docs/datasets.md``.
Simulated data from the papers' generators need no file: :func:`sinusoids` (Gadd, Wade & Shah 2021),
:func:`tegner_sequential` (Tegner, Bloem-Reddy & Roberts 2018).
"""

from gpdsl.datasets.births import births_usa_1969
from gpdsl.datasets.dataset import Dataset
from gpdsl.datasets.oil_flow import oil_flow
from gpdsl.datasets.model_data import loaders, model_data, write_data_json
from gpdsl.datasets.r_counts import bio_chemists
from gpdsl.datasets.r_datasets import air_passengers, airquality, pima_tr
from gpdsl.datasets.r_survival import lung, veteran
from gpdsl.datasets.synthetic import sinusoids, tegner_sequential
from gpdsl.datasets.registry import (
    REGISTRY,
    DatasetEntry,
    RemoteFile,
    get_entry,
    list_datasets,
)
from gpdsl.datasets.storage import (
    default_cache_dir,
    download_file,
    fetch,
    fetch_file,
    sha256_of,
)
from gpdsl.datasets.uci_classification import (
    abalone,
    abalone_male_female,
    breast_cancer_wisconsin,
    glass,
    glass_window,
    ionosphere,
    new_thyroid,
    pima,
)
from gpdsl.datasets.uci_regression import (
    boston,
    concrete,
    energy,
    uci_regression,
    uci_split,
    wine_quality_red,
)
from gpdsl.datasets.usps import usps, usps_pair

__all__ = [
    "Dataset", "DatasetEntry", "RemoteFile", "REGISTRY",
    "list_datasets", "get_entry", "fetch", "fetch_file", "download_file", "default_cache_dir", "sha256_of",
    "oil_flow", "usps", "usps_pair",
    "concrete", "energy", "wine_quality_red", "boston", "uci_regression", "uci_split",
    "pima", "breast_cancer_wisconsin", "ionosphere", "glass", "glass_window", "new_thyroid",
    "abalone", "abalone_male_female",
    "airquality", "air_passengers", "births_usa_1969", "pima_tr", "veteran", "lung", "bio_chemists",
    "loaders", "model_data", "write_data_json",
    "sinusoids", "tegner_sequential",
]
