"""gpdsl.results: inference output as ArviZ-conventional xarray data, stored as NetCDF.

Every engine hands its draws to :func:`build_results`; the object it returns is what the
installed ArviZ works with (``InferenceData`` for ArviZ 0.x, ``xarray.DataTree`` for 1.x).
"""

from gpdsl.results.build import build_results
from gpdsl.results.io import read_netcdf, write_netcdf
from gpdsl.results.plots import PLOT_KINDS, plot
from gpdsl.results.summary import format_summary, sampler_warnings, summarize

__all__ = [
    "PLOT_KINDS",
    "build_results",
    "format_summary",
    "plot",
    "read_netcdf",
    "sampler_warnings",
    "summarize",
    "write_netcdf",
]
