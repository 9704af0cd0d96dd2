"""The wheel check (issue 39, ``make wheel-check``): ``.ci/wheel-check`` builds the sdist and the wheel from the
committed tree, checks them with twine and against the tree's files (``.ci/wheel_contents.py``), installs the
wheel into a clean venv at the locked versions and runs ``gpdsl check``, ``gpdsl compile`` and a short pm run
from it. The comparison is tested here on small archives; the whole check installs gpdsl's dependencies into
two fresh venvs (PyPI or pip's cache): minutes, slow.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SPEC = importlib.util.spec_from_file_location("wheel_contents", ROOT / ".ci" / "wheel_contents.py")
wheel_contents = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(wheel_contents)

TREE = {
    "gpdsl/__init__.py": "",
    "gpdsl/datasets/__init__.py": "",
    "gpdsl/datasets/sources.csv": "name\n",
    "grammar/__init__.py": "",
    "grammar/gpdsl.lark": "start: NAME\n",
    "stan_templates/__init__.py": "",
    "stan_templates/kernels.stan": "// kernels\n",
    "pyproject.toml": "",
    "README.md": "",
}
WHEEL_NAMES = {
    "gpdsl/__init__.py", "gpdsl/datasets/__init__.py", "gpdsl/datasets/sources.csv", "gpdsl/grammar/__init__.py",
    "gpdsl/grammar/gpdsl.lark", "gpdsl/stan_templates/__init__.py", "gpdsl/stan_templates/kernels.stan",
}


def _archives(tmp_path: Path, wheel_names: set[str]) -> tuple[Path, Path, Path]:
    src = tmp_path / "src"
    for name, text in TREE.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text(text)
    wheel = tmp_path / "gpdsl-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name in sorted(wheel_names):
            archive.writestr(name, "")
        archive.writestr("gpdsl-0.1.0.dist-info/METADATA", "")
    sdist = tmp_path / "gpdsl-0.1.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as archive:
        for name in TREE:
            archive.add(src / name, arcname=f"gpdsl-0.1.0/{name}")
    return src, wheel, sdist


def test_a_complete_wheel_matches_its_tree(tmp_path):
    assert wheel_contents.differences(*_archives(tmp_path, WHEEL_NAMES)) == []


def test_a_wheel_without_a_template_or_with_a_stray_module_is_named(tmp_path):
    names = (WHEEL_NAMES - {"gpdsl/stan_templates/kernels.stan"}) | {"gpdsl/stray.py"}
    assert wheel_contents.differences(*_archives(tmp_path, names)) == [
        "wheel lacks gpdsl/stan_templates/kernels.stan",
        "wheel has gpdsl/stray.py, which is not in the tree",
    ]


@pytest.mark.slow
def test_the_wheel_check_passes():
    result = subprocess.run(
        [str(ROOT / ".ci" / "wheel-check"), sys.executable], capture_output=True, text=True, timeout=3600
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "wheel check passed" in result.stdout
