"""The memory a run may use, and data files refused before they are read when reading them would not fit.

A text data file becomes Python objects before arrays (a number of two characters, ``0,``, becomes an object
of about 32 bytes), so reading it takes many times its size; a NetCDF file declares its arrays' shapes, which may
be far larger than the file (unwritten or compressed values).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from gpdsl.errors import DataError

EXPANSION = {"json": 24, "csv": 32}
"""Bytes of memory that reading one byte of a text data file may take, at most."""


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation (``MemAvailable``), or None where unknown."""
    try:
        with open("/proc/meminfo") as stream:
            for line in stream:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def shown_bytes(count: int) -> str:
    """``count`` bytes in TiB, GiB or MiB (three significant digits), or in bytes below one MiB."""
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if count >= scale:
            return f"{count / scale:.3g} {unit}"
    return f"{count} bytes"


def check_text_file(path: Path, kind: str) -> None:
    """Refuse a JSON or CSV data file that reading would take more memory than is available.

    Raises
    ------
    DataError
        Naming the file, its size and the memory reading it would take.
    """
    available = available_memory()
    size = path.stat().st_size
    needed = size * EXPANSION[kind]
    if available is not None and needed > available:
        raise DataError(f"{kind.upper()} data file '{path}' is {shown_bytes(size)}: reading it would take about "
                        f"{shown_bytes(needed)}; {shown_bytes(available)} of memory is available",
                        hint="store large arrays in NetCDF (.nc), which is read without text parsing")


def check_arrays(path: Path, arrays) -> None:
    """Refuse a NetCDF data file whose declared arrays would not fit in the memory available.

    Parameters
    ----------
    path : Path
    arrays : mapping of str to xarray.DataArray
        The file's variables, not yet read.

    Raises
    ------
    DataError
        Naming the largest variable, its shape and the memory all of them would take.
    """
    available = available_memory()
    sizes = {name: math.prod(array.shape) * array.dtype.itemsize for name, array in arrays.items()}
    if available is None or not sizes or sum(sizes.values()) <= available:
        return
    largest = max(sizes, key=sizes.get)
    shape = " x ".join(str(n) for n in arrays[largest].shape)
    raise DataError(f"NetCDF data file '{path}': its variables would take {shown_bytes(sum(sizes.values()))} (the "
                    f"largest, '{largest}', is {shape} {arrays[largest].dtype}); {shown_bytes(available)} of memory "
                    "is available")
