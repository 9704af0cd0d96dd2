"""Test-wide settings: one BLAS thread before numpy, scipy or JAX load (see gpdsl/__init__.py); JAX's compiled programs
released after each test file; the tests listed in ``slow_by_duration.txt`` marked slow."""

import gc
import os
import sys
from pathlib import Path

import pytest

for variable in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ.setdefault(variable, "1")


@pytest.fixture(autouse=True, scope="module")
def release_compiled_programs():
    """Drop JAX's in-memory caches of compiled programs when a test file ends.

    Every loaded XLA CPU program holds memory maps (up to several hundred for a large one), and JAX keeps the programs
    of its caches alive; a worker process that runs hundreds of test files would otherwise pass the kernel's limit of
    65,530 maps, where loading the next program fails inside LLVM and the process dies of a segmentation fault.
    """
    yield
    if "jax" in sys.modules:
        sys.modules["jax"].clear_caches()
        gc.collect()


SLOW_BY_DURATION = Path(__file__).with_name("slow_by_duration.txt")


def slow_by_duration() -> set[str]:
    """The node ids of ``slow_by_duration.txt``: default-tier tests that take 4 s or more (the file says how measured)."""
    lines = SLOW_BY_DURATION.read_text().splitlines()
    return {line.strip() for line in lines if line.strip() and not line.startswith("#")}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Mark the tests of ``slow_by_duration.txt`` slow before ``-m`` selects (so ``-m "not slow"`` leaves them out)."""
    slow = slow_by_duration()
    for item in items:
        if item.nodeid in slow:
            item.add_marker(pytest.mark.slow)
