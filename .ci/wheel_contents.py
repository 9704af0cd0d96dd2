"""The wheel check's comparison of a built wheel and sdist with the source tree they were built from.

The wheel must hold every module under ``gpdsl/``, the datasets' CSV files, and the top-level ``grammar/`` and
``stan_templates/`` folders as the packages ``gpdsl.grammar`` and ``gpdsl.stan_templates`` (pyproject.toml's
``package-dir``), and nothing else under ``gpdsl/``; the sdist must hold the grammar and the project files.

Usage: ``python .ci/wheel_contents.py SOURCE_TREE WHEEL SDIST`` (exit status 1 with what differs).
"""

from __future__ import annotations

import sys
import tarfile
import zipfile
from pathlib import Path

PACKAGE_DATA_FOLDERS = ("grammar", "stan_templates")
SDIST_FILES = ("grammar/gpdsl.lark", "pyproject.toml", "README.md")


def expected_wheel_files(src: Path) -> set[str]:
    """The paths under ``gpdsl/`` that a wheel built from ``src`` must hold."""
    expected = {p.relative_to(src).as_posix() for p in (src / "gpdsl").rglob("*.py")}
    expected |= {p.relative_to(src).as_posix() for p in (src / "gpdsl" / "datasets").glob("*.csv")}
    for folder in PACKAGE_DATA_FOLDERS:
        expected |= {f"gpdsl/{folder}/{p.name}" for p in (src / folder).iterdir() if p.is_file()}
    return expected


def differences(src: Path, wheel: Path, sdist: Path) -> list[str]:
    """What the wheel and the sdist lack or add against ``src``, one line each; empty when they match."""
    expected = expected_wheel_files(src)
    shipped = {n for n in zipfile.ZipFile(wheel).namelist() if n.startswith("gpdsl/") and not n.endswith("/")}
    found = [f"wheel lacks {name}" for name in sorted(expected - shipped)]
    found += [f"wheel has {name}, which is not in the tree" for name in sorted(shipped - expected)]
    with tarfile.open(sdist) as archive:
        in_sdist = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    found += [f"sdist lacks {name}" for name in SDIST_FILES if name not in in_sdist]
    return found


def main(argv: list[str]) -> int:
    src, wheel, sdist = (Path(arg) for arg in argv)
    found = differences(src, wheel, sdist)
    if found:
        print("\n".join(found), file=sys.stderr)
        return 1
    data = sorted(n for n in expected_wheel_files(src) if n.split("/")[1] in PACKAGE_DATA_FOLDERS)
    print(f"{len(expected_wheel_files(src))} files under gpdsl/, as in the tree; grammar and templates: {', '.join(data)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
