"""gpdsl: a modelling language for Gaussian-process hierarchies."""

import os as _os

# One BLAS thread: multithreaded OpenBLAS makes the many small Cholesky factorisations of GP
# engines two orders of magnitude slower on small machines. Set the variable yourself to override.
for _variable in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"):
    _os.environ.setdefault(_variable, "1")

# XLA's CPU runtime: single-threaded Eigen, because its multithreaded pool can wedge (all workers
# parked, the caller waiting forever) on vmapped Cholesky factorisations inside compiled loops; and
# one host device per core, over which the engines' driver splits its chains. Only effective when
# gpdsl is imported before JAX; flags already in XLA_FLAGS win.
_flags = _os.environ.get("XLA_FLAGS", "")
if "xla_cpu_multi_thread_eigen" not in _flags:
    _flags += " --xla_cpu_multi_thread_eigen=false"
if "xla_force_host_platform_device_count" not in _flags:
    _flags += f" --xla_force_host_platform_device_count={_os.cpu_count() or 1}"
_os.environ["XLA_FLAGS"] = _flags.strip()

__version__ = "0.1.0"
