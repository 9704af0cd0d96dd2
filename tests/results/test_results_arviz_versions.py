"""ArviZ 0.x and 1.x: one compatibility module, and results files readable across versions."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import gpdsl.results
from gpdsl.results import arviz_compat, read_netcdf, summarize

ROOT = Path(__file__).resolve().parents[2]
OTHER_PYTHON = {0: ROOT / ".venv312" / "bin" / "python", 1: ROOT / ".venv" / "bin" / "python"}[
    arviz_compat.ARVIZ_MAJOR
]

WRITE = """
import sys, numpy as np
from gpdsl.results import build_results, write_netcdf
rng = np.random.default_rng(0)
built = build_results(
    {"mu": rng.normal(size=(2, 50)), "K": rng.normal(size=(2, 50, 2, 2))},
    dims={"K": ["D", "D"]},
    sample_stats={"diverging": np.zeros((2, 50), bool)},
    attrs={"method": "nuts"},
)
write_netcdf(built, sys.argv[1])
"""

READ = """
import sys
from gpdsl.results import arviz_compat, read_netcdf, summarize
results = read_netcdf(sys.argv[1])
print(arviz_compat.root_attrs(results)["method"], ",".join(summarize(results).index))
"""

LABELS = ["mu", "K[1, 1]", "K[1, 2]", "K[2, 1]", "K[2, 2]"]


def test_only_the_compat_module_imports_arviz():
    package = Path(gpdsl.results.__file__).parent
    importers = [
        path.name
        for path in package.glob("*.py")
        if re.search(r"^\s*(import arviz|from arviz)", path.read_text(), re.MULTILINE)
    ]
    assert importers == ["arviz_compat.py"]


needs_other = pytest.mark.skipif(
    not OTHER_PYTHON.exists(), reason=f"no interpreter with the other ArviZ at {OTHER_PYTHON}"
)


def _run(python, script, path):
    done = subprocess.run(
        [str(python), "-c", script, str(path)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@needs_other
def test_file_from_the_other_arviz_reads_here(tmp_path):
    path = tmp_path / "other.nc"
    _run(OTHER_PYTHON, WRITE, path)
    results = read_netcdf(path)
    assert isinstance(results, arviz_compat.Container)
    assert list(summarize(results).index) == LABELS


@needs_other
def test_file_from_here_reads_in_the_other_arviz(tmp_path):
    path = tmp_path / "here.nc"
    _run(sys.executable, WRITE, path)
    assert _run(OTHER_PYTHON, READ, path).split(" ", 1) == ["nuts", ",".join(LABELS) + "\n"]
