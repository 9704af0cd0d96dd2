"""Correlated outputs: coregionalised against independent GPs, on New York's ozone and temperature.

R's ``airquality``: daily ozone (37 of 153 days missing) and temperature, May to September 1973, every
other day (every fourth quick), both standardised, as two outputs of one GP over the day. The missing ozone
days are NaN outcomes: marginalised exactly, and imputed by the posterior predictive. NUTS and gibbs (the
hyperparameters on the exact marginal). The figure shows each model's imputations of the missing ozone.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gpdsl.datasets import airquality

HERE = Path(__file__).resolve().parent
MODELS = {"independent": HERE / "multi_output_independent.gpm", "coregion": HERE / "multi_output_coregion.gpm"}
ENGINES = {"nuts": {}, "gibbs": {"repeat_f": 5, "repeat_theta": 5}}
TITLE = "Ozone and temperature as two outputs (datasets::airquality)"


def data(quick: bool, seed: int) -> dict:
    """Ozone (output 1, NaN where missing) and temperature (output 2) at the kept days, output-major."""
    table = airquality()
    days = np.arange(0, table.n, 4 if quick else 2)
    ozone, temperature = table.y[days], table.X[days, table.feature_names.index("Temp")]
    standard = [(v - np.nanmean(v)) / np.nanstd(v) for v in (ozone, temperature)]
    x = (days + 1.0 - np.mean(days + 1.0)) / np.std(days + 1.0)
    return {"N": 2 * days.size, "P": 2, "x": np.r_[x, x], "output": np.repeat([1, 2], days.size),
            "y": np.concatenate(standard), "no_mixing": np.zeros((2, 1))}


def plot(ax, fits: dict) -> None:
    """Observed ozone (standardised) over the day, and each fit's imputations (mean +- 2 sd) where missing."""
    first = next(iter(fits.values()))
    y = np.asarray(first.observed_data["y"])
    x = np.asarray(first.constant_data["x"])
    ozone = np.asarray(first.constant_data["output"]) == 1
    ax.plot(x[ozone], y[ozone], "k.", ms=4, label="observed ozone")
    missing = ozone & np.isnan(y)
    for i, (label, results) in enumerate(fits.items()):
        draws = np.asarray(results.posterior_predictive["y"]).reshape(-1, y.size)[:, missing]
        shift = (i - len(fits) / 2) * 0.01
        ax.errorbar(x[missing] + shift, draws.mean(0), 2 * draws.std(0), fmt="o", ms=3, lw=1, label=label)
    ax.set_xlabel("day (standardised)")
    ax.set_ylabel("ozone (standardised)")
    ax.set_title(TITLE, fontsize=10)
    ax.legend(fontsize=7)
