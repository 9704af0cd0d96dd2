"""Test-wide settings: one BLAS thread before numpy, scipy or JAX load (see gpdsl/__init__.py); JAX's compiled programs
released after each test file."""

import gc
import os
import sys

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
