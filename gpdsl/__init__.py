"""gpdsl: a modelling language for Gaussian-process hierarchies.

The Python API, without deep imports (each name is loaded on first use, so ``import gpdsl`` stays cheap
and imports neither JAX nor Stan):

- :func:`gpdsl.check` -- parse and check a model file or model text: ``model, warnings = gpdsl.check(path)``
- :func:`gpdsl.load_data` -- data (a ``.json``, ``.csv`` or ``.nc`` file, or a dict) validated against a model
- :func:`gpdsl.sample`, :func:`gpdsl.fit` -- run a sampler or an optimiser, settings as keywords
- :func:`gpdsl.run` -- the same with a settings object (``gpdsl.api.run``, which the CLI calls)
- :func:`gpdsl.compare` -- fits side by side (``gpdsl compare``): a :class:`~gpdsl.results.compare.Comparison`
- :func:`gpdsl.summarize`, :func:`gpdsl.read_results` -- a results file's summary table, and reading one
- :mod:`gpdsl.settings` -- every method's settings class, for :func:`gpdsl.run` (``gpdsl.settings.VEMSettings``)
- :mod:`gpdsl.datasets` -- benchmark datasets (``gpdsl.datasets.model_data`` for the models' format)
- :mod:`gpdsl.results` -- reading, writing and summarising results (``gpdsl.results.groups``, ``results_json``)
"""

import os as _os
import sys as _sys

# One BLAS thread: multithreaded OpenBLAS makes the many small Cholesky factorisations of GP
# engines two orders of magnitude slower on small machines. Set the variable yourself to override.
_BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS")
_user_threads = any(_variable in _os.environ for _variable in _BLAS_THREADS)
for _variable in _BLAS_THREADS:
    _os.environ.setdefault(_variable, "1")
# A BLAS loaded before gpdsl (NumPy's or SciPy's, which JAX's CPU LAPACK calls; `import arviz` or `import
# scipy.stats` first loads it) read the variables at its load: limit it now too (pm 2.7 times faster in 2-D HSGP).
if not _user_threads and ("numpy" in _sys.modules or "scipy" in _sys.modules):
    from threadpoolctl import threadpool_limits as _threadpool_limits

    _threadpool_limits(1, user_api="blas")

# XLA's CPU runtime: single-threaded Eigen, because its multithreaded pool can wedge (all workers
# parked, the caller waiting forever) on vmapped Cholesky factorisations inside compiled loops; and
# one host device per core, over which the engines' driver splits its chains on a CPU. Only effective when
# gpdsl is imported before JAX; flags already in XLA_FLAGS win. Both are flags of XLA's CPU client alone: a run
# on a GPU (--device, gpdsl.numerics.devices) splits its chains over the GPUs and is untouched by them.
_flags = _os.environ.get("XLA_FLAGS", "")
if "xla_cpu_multi_thread_eigen" not in _flags:
    _flags += " --xla_cpu_multi_thread_eigen=false"
if "xla_force_host_platform_device_count" not in _flags:
    _flags += f" --xla_force_host_platform_device_count={_os.cpu_count() or 1}"
_os.environ["XLA_FLAGS"] = _flags.strip()

__version__ = "0.1.0"

_API = {
    "check": ("gpdsl.api", "check"),
    "load_model": ("gpdsl.api", "load_model"),
    "load_data": ("gpdsl.data.io", "load_data"),
    "run": ("gpdsl.api", "run"),
    "sample": ("gpdsl.api", "sample"),
    "fit": ("gpdsl.api", "fit"),
    "compare": ("gpdsl.results.compare", "compare"),
    "summarize": ("gpdsl.results.summary", "summarize"),
    "read_results": ("gpdsl.results.io", "read_netcdf"),
}
_MODULES = ("datasets", "results", "settings", "api")

__all__ = ["__version__", *_API, *_MODULES]


def __getattr__(name):
    import importlib

    if name in _API:
        module, attribute = _API[name]
        value = getattr(importlib.import_module(module), attribute)
    elif name in _MODULES:
        value = importlib.import_module(f"gpdsl.{name}")
    else:
        raise AttributeError(f"module 'gpdsl' has no attribute '{name}'")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
