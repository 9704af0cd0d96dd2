"""Whether PyStan can build models under the running Python, and if not, why.

httpstan compiles each Stan program into a CPython extension module with the pybind11 headers it ships.
CPython 3.13 removed ``_PyThreadState_UncheckedGet``, which pybind11 before 2.12 calls, so under 3.13 such a
model compiles but cannot be imported ("undefined symbol: _PyThreadState_UncheckedGet"), and PyStan reports
only an unreadable reply. httpstan 4.17.0, the newest release with a cp313 wheel, ships pybind11 2.9.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import sys
from pathlib import Path

PYBIND11_NEEDED = {(3, 13): (2, 12)}
"""Python (major, minor) to the oldest pybind11 whose extensions load there; later Pythons need at least the same."""


def bundled_pybind11(httpstan_dir: Path) -> tuple[int, int] | None:
    """The (major, minor) version of the pybind11 headers under ``httpstan_dir``, or ``None`` if there are none."""
    header = httpstan_dir / "include" / "pybind11" / "detail" / "common.h"
    if not header.is_file():
        return None
    text = header.read_text(errors="replace")
    found = [re.search(rf"#define PYBIND11_VERSION_{part}\s+(\d+)", text) for part in ("MAJOR", "MINOR")]
    if not all(found):
        return None
    return int(found[0].group(1)), int(found[1].group(1))


def pybind11_reason(python: tuple[int, int], pybind11: tuple[int, int], httpstan: str) -> str | None:
    """Why httpstan ``httpstan`` with pybind11 ``pybind11`` cannot build models under ``python``, or ``None``."""
    needed = max((need for version, need in PYBIND11_NEEDED.items() if python >= version), default=None)
    if needed is None or pybind11 >= needed:
        return None
    return (
        f"PyStan cannot run Stan on Python {python[0]}.{python[1]}: httpstan {httpstan} compiles each model with "
        f"its bundled pybind11 {pybind11[0]}.{pybind11[1]}, whose extensions call _PyThreadState_UncheckedGet, "
        f"which Python {python[0]}.{python[1]} no longer has (pybind11 {needed[0]}.{needed[1]} or newer is needed); "
        "use Python 3.11 or 3.12 for PyStan, or CmdStan (install cmdstanpy and CmdStan)"
    )


def pystan_unavailable() -> str | None:
    """Why PyStan cannot build models under the running Python, or ``None`` when nothing known prevents it."""
    spec = importlib.util.find_spec("httpstan")
    if spec is None or not spec.submodule_search_locations:
        return None
    pybind11 = bundled_pybind11(Path(next(iter(spec.submodule_search_locations))))
    if pybind11 is None:
        return None
    return pybind11_reason(sys.version_info[:2], pybind11, importlib.metadata.version("httpstan"))
