"""Test-wide settings: one BLAS thread before numpy, scipy or JAX load (see gpdsl/__init__.py)."""

import os

for variable in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ.setdefault(variable, "1")
