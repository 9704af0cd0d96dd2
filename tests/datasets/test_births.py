"""The US births per day, 1969-1988 (births_usa_1969): registry entry, loader, and the data ``gpdsl data`` writes."""

from __future__ import annotations

import csv
import datetime
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import gpdsl.datasets as datasets
from gpdsl.cli.main import main
from gpdsl.datasets import registry
from gpdsl.errors import DatasetError

MIRROR = Path(__file__).resolve().parents[3] / "shared" / "data"
MIRROR_FILE = MIRROR / "births_usa_1969" / "births_usa_1969.csv"
ORIGIN = ("gabriuma/basis_functions_approach_to_GP/4199949163e71a6f3b8f51ea5f7e9fee6a2d9fc9/"
          "Paper/Manuscript_Stats&Comp/1st_journal_review/Birthday_diagnosis/births_usa_1969.csv")
SHA256 = "4212048d6377597e9e6f7f3b962a4c3652a7dfc3b56824970704856a578d8baa"


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GPDSL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("GPDSL_DATA_MIRROR", raising=False)


@pytest.fixture
def mirror(monkeypatch):
    if not MIRROR_FILE.is_file():
        pytest.skip(f"the data mirror's {MIRROR_FILE} (../shared/data beside the checkout) is absent")
    monkeypatch.setenv("GPDSL_DATA_MIRROR", str(MIRROR))
    return MIRROR


def csv_rows() -> list[dict[str, int]]:
    with MIRROR_FILE.open(newline="") as stream:
        return [{key: int(value) for key, value in row.items()} for row in csv.DictReader(stream)]


def broken_mirror(tmp_path: Path, edit) -> Path:
    """A mirror holding the births file with ``edit`` applied to its lines."""
    folder = tmp_path / "mirror" / "births_usa_1969"
    folder.mkdir(parents=True)
    lines = MIRROR_FILE.read_text().splitlines(keepends=True)
    (folder / MIRROR_FILE.name).write_text("".join(edit(lines)))
    return folder.parent


def test_registry_pins_the_public_origin_and_its_checksum():
    entry = registry.get_entry("births_usa_1969")
    assert entry.folder == "births_usa_1969" and len(entry.files) == 1
    remote = entry.file("births_usa_1969.csv")
    assert remote.url == f"https://raw.githubusercontent.com/{ORIGIN}"
    assert (remote.sha256, remote.size) == (SHA256, 216446)
    assert "births_usa_1969" in datasets.list_datasets()


def test_the_mirror_copy_matches_the_registered_checksum(mirror):
    assert MIRROR_FILE.stat().st_size == 216446
    assert datasets.sha256_of(MIRROR_FILE) == SHA256
    assert datasets.fetch("births_usa_1969") == {"births_usa_1969.csv": MIRROR_FILE}


def test_a_copy_with_another_checksum_is_refused_naming_the_file(mirror, tmp_path):
    def one_more_birth(lines):
        return [lines[0], lines[1].replace(",8486,", ",8487,"), *lines[2:]]

    broken = broken_mirror(tmp_path, one_more_birth)
    with pytest.raises(DatasetError) as caught:
        datasets.births_usa_1969(mirror=broken)
    message = str(caught.value)
    assert "births_usa_1969.csv" in message and "sha256 mismatch" in message
    assert SHA256 in message and datasets.sha256_of(broken / "births_usa_1969" / "births_usa_1969.csv") in message


def test_rows_dates_and_counts_are_those_of_the_file(mirror):
    data = datasets.births_usa_1969()
    rows = csv_rows()
    assert data.X.shape == (7305, 7) and data.y.shape == (7305,) and len(rows) == 7305
    column = {name: data.X[:, k] for k, name in enumerate(data.feature_names)}
    assert data.extras["date"][0] == np.datetime64("1969-01-01") and data.y[0] == 8486
    assert data.extras["date"][-1] == np.datetime64("1988-12-31") and data.y[-1] == 9133
    assert data.y.sum() == 70485508
    np.testing.assert_allclose(data.y.mean(), 70485508 / 7305, rtol=1e-15)
    for name in ("year", "month", "day", "day_of_year", "day_of_week", "id"):
        np.testing.assert_array_equal(column[name], [row[name] for row in rows])
    np.testing.assert_array_equal(data.y, [row["births"] for row in rows])
    np.testing.assert_array_equal(column["id"], np.arange(1, 7306))
    np.testing.assert_allclose(column["years_since_1969"], np.arange(7305) / 365.25, rtol=1e-15)


def test_day_of_week_cycles_monday_to_sunday_with_the_calendar(mirror):
    data = datasets.births_usa_1969()
    weekday = data.X[:, data.feature_names.index("day_of_week")]
    calendar = [datetime.date(1969, 1, 1) + datetime.timedelta(days=k) for k in range(7305)]
    np.testing.assert_array_equal(weekday, [day.isoweekday() for day in calendar])
    assert weekday[0] == 3 and set(np.diff(weekday) % 7) == {1}
    assert data.extras["date"].tolist() == calendar


def test_relative_births_are_a_hundred_times_births_over_their_mean(mirror):
    counts, relative = datasets.births_usa_1969(), datasets.births_usa_1969(relative=True)
    np.testing.assert_allclose(relative.y, counts.y / (70485508 / 7305) * 100, rtol=1e-13)
    np.testing.assert_allclose(relative.y.mean(), 100.0, rtol=1e-13)
    assert relative.target_name == "births_relative100" and relative.name == "births_usa_1969:relative"


def test_a_file_whose_days_are_not_consecutive_is_refused(mirror, tmp_path, monkeypatch):
    entry = registry.get_entry("births_usa_1969")
    unverified = replace(entry, files=(replace(entry.files[0], sha256=None),))
    monkeypatch.setitem(registry.REGISTRY, "births_usa_1969", unverified)
    skipped = broken_mirror(tmp_path, lambda lines: [*lines[:11], *lines[12:]])
    with pytest.raises(DatasetError, match="row 11 has id 12, not 11: the rows should be the consecutive days"):
        datasets.births_usa_1969(mirror=skipped)
    misdated = broken_mirror(tmp_path / "misdated", lambda lines: [lines[0], lines[1].replace("1969,1,1,", "1969,1,2,"),
                                                                   *lines[2:]])
    with pytest.raises(DatasetError, match=r"row 1 \(id 1\) is dated 1969-01-02, not 1969-01-01"):
        datasets.births_usa_1969(mirror=misdated)
    wrong_weekday = broken_mirror(tmp_path / "weekday", lambda lines: [lines[0], lines[1].replace(",1,3,1,1", ",1,4,1,1"),
                                                                       *lines[2:]])
    with pytest.raises(DatasetError, match=r"row 1 \(1969-01-01\) has day_of_week 4, not 3"):
        datasets.births_usa_1969(mirror=wrong_weekday)


def write(tmp_path, *arguments) -> dict:
    out = tmp_path / "births.json"
    assert main(["data", "births_usa_1969", *arguments, "-o", str(out), "--overwrite"]) == 0
    return json.loads(out.read_text())


def test_gpdsl_data_writes_the_forms_of_a_time_series(mirror, tmp_path, capsys):
    from gpdsl.api import check_file
    from gpdsl.data.io import load_data

    assert main(["data", "--list"]) == 0
    listing = capsys.readouterr().out
    assert "births_usa_1969 " in listing and "births_usa_1969_relative " in listing
    births = np.array([row["births"] for row in csv_rows()], dtype=float)

    write(tmp_path, "--as", "timeseries", "--columns", "id", "--rows", "365", "--offset", "365")
    model, _ = check_file("models/gp_changepoint.gpm")
    values, _ = load_data(tmp_path / "births.json", model)
    assert values["N"] == 365
    np.testing.assert_array_equal(values["t"], np.arange(366, 731))
    np.testing.assert_array_equal(values["y"], births[365:730])

    series = write(tmp_path, "--as", "series")
    assert list(series) == ["y"] and np.array_equal(series["y"], births)
    times = write(tmp_path, "--as", "times", "--rows", "3", "--offset", "7302")
    assert times == {"t": [7303.0, 7304.0, 7305.0]}
    xy = write(tmp_path, "--columns", "id", "day_of_week", "--rows", "8")
    assert (xy["N"], xy["D"]) == (8, 2) and np.asarray(xy["X"]).shape == (8, 2)
    assert [row[1] for row in xy["X"]] == [3, 4, 5, 6, 7, 1, 2, 3]


def test_gpdsl_data_standardizes_times_and_births_over_all_days(mirror, tmp_path):
    births = np.array([row["births"] for row in csv_rows()], dtype=float)
    years = np.arange(7305) / 365.25
    data = write(tmp_path, "--as", "timeseries", "--columns", "years_since_1969", "--standardize",
                 "--rows", "100", "--offset", "7000")
    np.testing.assert_allclose(data["t"], ((years - years.mean()) / years.std())[7000:7100], rtol=1e-12)
    np.testing.assert_allclose(data["y"], ((births - births.mean()) / births.std())[7000:7100], rtol=1e-12)
    np.testing.assert_allclose([data["y__centre"], data["y__scale"]], [births.mean(), births.std()], rtol=1e-12)
    np.testing.assert_allclose([data["t__centre"], data["t__scale"]], [years.mean(), years.std()], rtol=1e-12)
    relative = tmp_path / "relative.json"
    assert main(["data", "births_usa_1969_relative", "--as", "series", "-o", str(relative)]) == 0
    np.testing.assert_allclose(json.loads(relative.read_text())["y"], births / births.mean() * 100, rtol=1e-13)


def test_the_timeseries_form_needs_one_time_column(mirror):
    with pytest.raises(DatasetError, match="takes its times t from one input column; births_usa_1969 has 7") as caught:
        datasets.model_data(datasets.births_usa_1969(), "timeseries")
    assert "--columns" in caught.value.hint
