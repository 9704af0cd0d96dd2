"""gpdsl: a modelling language for Gaussian-process hierarchies."""

import os as _os

# One BLAS thread: multithreaded OpenBLAS makes the many small Cholesky factorisations of GP
# engines two orders of magnitude slower on small machines. Set the variable yourself to override.
for _variable in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"):
    _os.environ.setdefault(_variable, "1")

__version__ = "0.1.0"
