"""Every difference between ArviZ 0.x and ArviZ 1.x, and nothing else.

ArviZ 0.x keeps results in ``arviz.InferenceData``; ArviZ 1.x (arviz-base, arviz-stats,
arviz-plots) keeps them in ``xarray.DataTree``. The rest of :mod:`gpdsl.results` only sees
plain ``xarray.Dataset`` groups and calls the functions here for the container, NetCDF storage
and the sampling diagnostics. Plots are drawn with matplotlib from the datasets, so they need
nothing from this module.
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

ARVIZ_MAJOR = int(importlib.metadata.version("arviz").split(".")[0])
NETCDF_ENGINE = "netcdf4"


class _ImportedOnFirstUse:
    """ArviZ 1.x, imported when a diagnostic first needs it: its import also loads JAX where JAX is installed
    (arviz_base's NumPyro converter), which ``import gpdsl; gpdsl.compare`` must not pay for."""

    def __getattr__(self, name: str) -> Any:
        import arviz

        return getattr(arviz, name)


if ARVIZ_MAJOR == 0:
    with warnings.catch_warnings():
        # ArviZ 0.x announces its 1.x refactor on its first import of each day: a notice to ArviZ's own users,
        # printed in the middle of gpdsl's output (gpdsl runs on both: this module).
        warnings.filterwarnings("ignore", message=r"\s*ArviZ is undergoing a major refactor", category=FutureWarning)
        import arviz as az
    Container = az.InferenceData
else:
    az = _ImportedOnFirstUse()
    Container = xr.DataTree


def make_container(groups: Mapping[str, xr.Dataset], attrs: Mapping[str, Any]) -> Any:
    """The results object of the installed ArviZ.

    Parameters
    ----------
    groups : mapping of str to xarray.Dataset
        Group name (``posterior``, ``sample_stats``, ...) to its dataset.
    attrs : mapping
        Attributes of the root.

    Returns
    -------
    arviz.InferenceData or xarray.DataTree
        ``InferenceData`` under ArviZ 0.x, ``DataTree`` under ArviZ 1.x.
    """
    if ARVIZ_MAJOR == 0:
        return az.InferenceData(attrs=dict(attrs), **dict(groups))
    tree = xr.DataTree.from_dict({f"/{name}": ds for name, ds in groups.items()})
    tree.attrs = dict(attrs)
    return tree


def is_container(obj: Any) -> bool:
    """Whether ``obj`` is a results object of the installed ArviZ."""
    return isinstance(obj, Container)


def groups(obj: Any) -> dict[str, xr.Dataset]:
    """The groups of a results object as plain datasets, in stored order, whichever ArviZ is installed.

    Parameters
    ----------
    obj : arviz.InferenceData or xarray.DataTree
        Results of :func:`gpdsl.run` (or read by :func:`gpdsl.read_results`).

    Returns
    -------
    dict of str to xarray.Dataset
        ``posterior``, ``sample_stats``, ``constant_data``, ... by name.
    """
    if ARVIZ_MAJOR == 0:
        return {name: obj[name] for name in obj.groups()}
    return {name: node.to_dataset(inherit=False) for name, node in obj.children.items()}


def root_attrs(obj: Any) -> dict[str, Any]:
    """The attributes of the root of a results object.

    Parameters
    ----------
    obj : arviz.InferenceData or xarray.DataTree
        Results of :func:`gpdsl.run` (or read by :func:`gpdsl.read_results`).

    Returns
    -------
    dict
        ``method``, ``settings``, ``seed``, ``timings``, ``report``, ... (JSON ones as text; see
        :func:`gpdsl.results.method_output.results_json` for them parsed).
    """
    return dict(getattr(obj, "attrs", None) or {})


def to_netcdf(obj: Any, path: str | os.PathLike) -> None:
    """Write a results object to ``path`` as NetCDF4 with one group per ArviZ group."""
    obj.to_netcdf(os.fspath(path), engine=NETCDF_ENGINE)


def from_netcdf(path: str | os.PathLike) -> Any:
    """Read a NetCDF results file fully into memory and close it."""
    if ARVIZ_MAJOR == 0:
        with az.rc_context({"data.load": "eager"}):
            return az.from_netcdf(os.fspath(path), engine=NETCDF_ENGINE)
    with xr.open_datatree(os.fspath(path), engine=NETCDF_ENGINE) as tree:
        return tree.load().copy()


def _not_a_one_chain_notice(record: logging.LogRecord) -> bool:
    """ArviZ 0.x logs "Shape validation failed" for the diagnostics of one chain, which gpdsl shows as undefined
    ("-") instead: the notice is dropped, any other record kept."""
    return not record.getMessage().startswith("Shape validation failed")


if ARVIZ_MAJOR == 0 and isinstance(getattr(az, "_log", None), logging.Logger):
    az._log.addFilter(_not_a_one_chain_notice)


def _quiet(diagnostic):
    """A diagnostic computed without NumPy's warnings of 0 / 0: chains that do not move (every draw equal) have no
    R-hat or ESS, which is NaN, shown as undefined (``-``), not a warning from inside ArviZ."""
    from functools import wraps

    @wraps(diagnostic)
    def quiet(*args, **kwargs):
        with np.errstate(divide="ignore", invalid="ignore"):
            return diagnostic(*args, **kwargs)

    return quiet


def _as_dataset(result: Any) -> xr.Dataset:
    if isinstance(result, xr.Dataset):
        return result
    return result.to_dataset()


@_quiet
def ess(posterior: xr.Dataset, var_names: Sequence[str], method: str = "bulk") -> xr.Dataset:
    """Effective sample size per element, by the installed ArviZ.

    Parameters
    ----------
    posterior : xarray.Dataset
        Draws with ``chain`` and ``draw`` dimensions (e.g. ``groups(results)["posterior"]``).
    var_names : sequence of str
        The variables.
    method : {"bulk", "tail"}
        Which ESS.

    Returns
    -------
    xarray.Dataset
        One ESS per element of each variable.
    """
    return _as_dataset(az.ess(posterior, var_names=list(var_names), method=method))


@_quiet
def rhat(posterior: xr.Dataset, var_names: Sequence[str]) -> xr.Dataset:
    """Rank-normalised split R-hat per element, by the installed ArviZ.

    Parameters
    ----------
    posterior : xarray.Dataset
        Draws with ``chain`` and ``draw`` dimensions (e.g. ``groups(results)["posterior"]``).
    var_names : sequence of str
        The variables.

    Returns
    -------
    xarray.Dataset
        One R-hat per element of each variable.
    """
    return _as_dataset(az.rhat(posterior, var_names=list(var_names)))


@_quiet
def mcse(posterior: xr.Dataset, var_names: Sequence[str], method: str = "mean") -> xr.Dataset:
    """Monte Carlo standard error of the mean (``method="mean"``) or sd (``"sd"``)."""
    return _as_dataset(az.mcse(posterior, var_names=list(var_names), method=method))


@_quiet
def bfmi(sample_stats: xr.Dataset) -> np.ndarray:
    """E-BFMI of each chain, from the ``energy`` variable of ``sample_stats``."""
    if ARVIZ_MAJOR == 0:
        return np.asarray(az.bfmi(sample_stats["energy"].transpose("chain", "draw").values))
    result = az.bfmi(sample_stats, var_names="energy")
    return np.asarray(_as_dataset(result)["energy"].values)


@_quiet
def summary(obj: Any, var_names: Sequence[str] | None = None) -> pd.DataFrame:
    """ArviZ's own diagnostics table (ess_bulk, ess_tail, r_hat, mcse_mean, mcse_sd), unrounded."""
    names = None if var_names is None else list(var_names)
    table = az.summary(obj, var_names=names, kind="diagnostics", round_to="none")
    return table[["ess_bulk", "ess_tail", "r_hat", "mcse_mean", "mcse_sd"]]


def loo(obj: Any, var_name: str | None = None) -> dict[str, float]:
    """PSIS-LOO of the ``log_likelihood`` group: ``elpd_loo``, its ``se``, ``p_loo`` and ``warning`` (1 if any
    Pareto k is too high).

    Where a point's largest importance ratios are all equal (a short run whose draws repeat), ArviZ 1.x cannot fit
    their Pareto tail and raises: the estimates are then NaN, with the warning (ArviZ 0.x gives its estimate and
    the warning).
    """
    try:
        result = az.loo(obj, var_name=var_name)
    except ValueError as error:
        if "tail values are the same" not in str(error):
            raise
        return {"elpd_loo": np.nan, "se": np.nan, "p_loo": np.nan, "warning": 1.0}
    if ARVIZ_MAJOR == 0:
        values = (result["elpd_loo"], result["se"], result["p_loo"], result["warning"])
    else:
        values = (result.elpd, result.se, result.p, result.warning)
    return dict(zip(("elpd_loo", "se", "p_loo", "warning"), map(float, values)))
