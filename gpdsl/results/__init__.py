"""gpdsl.results: inference output as ArviZ-conventional xarray data, stored as NetCDF.

Every engine hands its draws to :func:`build_results`; the object it returns is what the
installed ArviZ works with (``InferenceData`` for ArviZ 0.x, ``xarray.DataTree`` for 1.x).

Reading results whichever ArviZ is installed: :func:`groups` (the groups as plain datasets),
:func:`root_attrs` and :func:`results_json` (the root attributes, JSON ones parsed), :func:`ess` and
:func:`rhat` (the diagnostics per element); :func:`save_png` writes a matplotlib figure without a display.
"""

from gpdsl.results.arviz_compat import ess, groups, rhat, root_attrs
from gpdsl.results.build import build_results
from gpdsl.results.io import read_netcdf, write_netcdf
from gpdsl.results.method_output import results_json
from gpdsl.results.plots import PLOT_KINDS, plot, save_png
from gpdsl.results.summary import format_summary, sampler_warnings, summarize

__all__ = [
    "PLOT_KINDS",
    "build_results",
    "ess",
    "format_summary",
    "groups",
    "plot",
    "read_netcdf",
    "results_json",
    "rhat",
    "root_attrs",
    "sampler_warnings",
    "save_png",
    "summarize",
    "write_netcdf",
]
