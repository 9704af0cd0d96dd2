"""Trace, pair and posterior plots written to PNG files.

Drawn with matplotlib's Agg backend straight from the posterior draws, so the pictures are the
same under every ArviZ version and no window or browser is opened.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from gpdsl.errors import GpdslError
from gpdsl.results import arviz_compat
from gpdsl.results.elements import Element, checked_var_names, elements

POSTERIOR_KINDS = ("trace", "pair", "posterior")
PLOT_KINDS = (*POSTERIOR_KINDS, "predictions")
MAX_TRACE_ROWS = 12
MAX_PAIR_ELEMENTS = 6
MAX_POSTERIOR_PANELS = 16
POSTERIOR_COLUMNS = 4
DPI = 100


def plot(
    results: Any, kind: str, path: str | os.PathLike, var_names: Sequence[str] | None = None
) -> Path:
    """Draw one kind of plot of the posterior and save it as a PNG.

    Vector and matrix parameters are drawn element by element; only the first elements are
    drawn when there are many (12 trace rows, 6 pair elements, 16 posterior panels), and the
    figure title says how many were left out.

    Parameters
    ----------
    results : arviz.InferenceData or xarray.DataTree
        Results with a ``posterior`` group.
    kind : {"trace", "pair", "posterior", "predictions"}
        ``trace``: per-chain density and draws against iteration; ``pair``: scatter of every
        pair of elements with histograms on the diagonal; ``posterior``: histogram with the
        mean and the 90% interval (q5 to q95); ``predictions``: the predictions group as bands, a
        standardised outcome in its original units (:mod:`gpdsl.results.prediction_plot`).
    path : str or path-like
        The PNG file to write.
    var_names : sequence of str, optional
        Variables to draw; all posterior (or predictions) variables by default.

    Returns
    -------
    pathlib.Path
        ``path``, now holding the PNG.

    Raises
    ------
    GpdslError
        For an unknown kind, a variable not in the posterior, or a file that cannot be written.
    """
    if kind not in PLOT_KINDS:
        raise GpdslError(
            f"unknown plot kind {kind!r}; valid kinds are {', '.join(PLOT_KINDS)}"
        )
    if kind == "predictions":
        from gpdsl.results.prediction_plot import draw_predictions

        return save_png(draw_predictions(results, var_names), path)
    groups = arviz_compat.groups(results)
    if "posterior" not in groups:
        raise GpdslError("results have no posterior group to plot")
    posterior = groups["posterior"]
    chosen = list(elements(posterior, checked_var_names(posterior, var_names)))
    if not chosen:
        raise GpdslError("nothing to plot: the chosen variables have no elements")
    for element in chosen:
        if not np.isfinite(element.draws(posterior)).any():
            raise GpdslError(f"nothing to plot of {element.label}: none of its draws is finite (all NaN or infinite)")
    draw = {"trace": _trace, "pair": _pair, "posterior": _posterior}[kind]
    return save_png(draw(posterior, chosen), path)


def save_png(figure: Figure, path: str | os.PathLike) -> Path:
    """Render a figure with the Agg backend (no display) and write it as a PNG.

    Parameters
    ----------
    figure : matplotlib.figure.Figure
        A figure made without pyplot (``Figure(...)``).
    path : str or path
        The file to write.

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    GpdslError
        The file cannot be written.
    """
    FigureCanvasAgg(figure)
    target = Path(path)
    try:
        figure.savefig(target, format="png", dpi=DPI)
    except OSError as error:
        raise GpdslError(f"cannot write plot to {target}: {error}") from error
    return target


def _trace(posterior, chosen: list[Element]) -> Figure:
    shown = chosen[:MAX_TRACE_ROWS]
    figure = Figure(figsize=(10, 2.2 * len(shown)), layout="constrained")
    axes = figure.subplots(len(shown), 2, squeeze=False)
    chains = posterior["chain"].values
    for row, element in zip(axes, shown):
        draws = element.draws(posterior)
        bins = np.histogram_bin_edges(_finite(draws), bins=30)
        for number, chain_draws in enumerate(draws, start=1):
            row[0].hist(_finite(chain_draws), bins=bins, histtype="step", density=True, label=f"chain {number}")
            row[1].plot(chain_draws, linewidth=0.6, alpha=0.8)
        row[0].set_title(element.label, fontsize="medium")
        row[0].set_yticks([])
        row[1].set_title(element.label, fontsize="medium")
        row[1].set_xlabel("draw")
    if len(chains) <= 8:
        axes[0, 0].legend(fontsize="small")
    _title_left_out(figure, "trace", len(chosen), len(shown))
    return figure


def _pair(posterior, chosen: list[Element]) -> Figure:
    shown = chosen[:MAX_PAIR_ELEMENTS]
    size = len(shown)
    figure = Figure(figsize=(2.4 * size + 1, 2.4 * size + 1), layout="constrained")
    axes = figure.subplots(size, size, squeeze=False)
    flat = [element.draws(posterior).ravel() for element in shown]
    for i in range(size):
        for j in range(size):
            ax = axes[i, j]
            if i == j:
                ax.hist(_finite(flat[i]), bins=30, color="C0", alpha=0.8)
                ax.set_yticks([])
            elif i > j:
                ax.scatter(flat[j], flat[i], s=2, alpha=0.3, color="C0", rasterized=True)
            else:
                ax.set_axis_off()
            if i == size - 1:
                ax.set_xlabel(shown[j].label)
            if j == 0 and i > 0:
                ax.set_ylabel(shown[i].label)
    _title_left_out(figure, "pair", len(chosen), size)
    return figure


def _posterior(posterior, chosen: list[Element]) -> Figure:
    shown = chosen[:MAX_POSTERIOR_PANELS]
    columns = min(POSTERIOR_COLUMNS, len(shown))
    rows = -(-len(shown) // columns)
    figure = Figure(figsize=(3.2 * columns, 2.6 * rows), layout="constrained")
    axes = figure.subplots(rows, columns, squeeze=False).ravel()
    for ax, element in zip(axes, shown):
        draws = _finite(element.draws(posterior))
        low, high = np.quantile(draws, [0.05, 0.95])
        mean = draws.mean()
        ax.hist(draws, bins=40, color="C0", alpha=0.7)
        ax.axvline(mean, color="k", linewidth=1)
        ax.plot([low, high], [0, 0], color="k", linewidth=4, solid_capstyle="butt", clip_on=False)
        ax.set_title(f"{element.label}\nmean {mean:.3g}, 90% [{low:.3g}, {high:.3g}]", fontsize="small")
        ax.set_yticks([])
    for ax in axes[len(shown):]:
        ax.set_axis_off()
    _title_left_out(figure, "posterior", len(chosen), len(shown))
    return figure


def _finite(draws) -> np.ndarray:
    """The finite draws, flattened (a histogram's range needs finite ends; NaN or infinite draws are left out)."""
    draws = np.asarray(draws, dtype=float).ravel()
    return draws[np.isfinite(draws)]


def _title_left_out(figure: Figure, kind: str, total: int, shown: int) -> None:
    if shown < total:
        figure.suptitle(f"{kind}: first {shown} of {total} elements (choose others with --vars; var_names= in "
                        "Python)")


def plot_estimate_spread(spread, path: str | os.PathLike) -> Path:
    """Fig. 4 of Gadd, Wade & Shah (2021): running summaries of replicate log estimates against the number of draws.

    ``spread`` is an :class:`~gpdsl.inference.mcmc.estimate_variance.EstimateSpread`: the mean with two standard
    deviations either side (black), the median with the 10th and 90th percentiles (red).
    """
    figure = Figure(figsize=(7, 4), layout="constrained")
    ax = figure.subplots()
    q = spread.draws
    ax.plot(q, spread.mean, "k-", lw=1, label="mean ± 2 sd")
    ax.plot(q, spread.mean - 2 * spread.sd, "k--", lw=0.8)
    ax.plot(q, spread.mean + 2 * spread.sd, "k--", lw=0.8)
    ax.plot(q, spread.median, "r-", lw=1, label="median, 10% and 90%")
    ax.plot(q, spread.p10, "r:", lw=0.8)
    ax.plot(q, spread.p90, "r:", lw=0.8)
    ax.set_xscale("log")
    shown = slice(min(9, q.size - 1), None)  # from q = 10: single draws of the prior component reach far below
    low = np.nanmin(np.minimum(spread.mean - 2 * spread.sd, spread.p10)[shown])
    high = np.nanmax(np.maximum(spread.mean + 2 * spread.sd, spread.p90)[shown])
    ax.set_ylim(low - 0.1 * (high - low), high + 0.1 * (high - low))
    ax.set_xlabel("importance draws q")
    ax.set_ylabel("log p̂(Y | X, ξ)")
    ax.set_title(f"variance of the log estimate at q = {q[-1]}: {spread.variance[-1]:.3f}", fontsize="medium")
    ax.legend(fontsize="small")
    return save_png(figure, path)


def plot_forest(comparison, path: str | os.PathLike) -> Path:
    """Forest plot of a :class:`~gpdsl.results.compare.Comparison`: per element, each fit's mean and 90% interval.

    Fits with draws show the mean as a dot and q5 to q95 as a line; point estimates are crosses. Flagged
    differences (``|z| > 4`` against the reference) are marked with their element label in red.

    Parameters
    ----------
    comparison : Comparison
        What :func:`gpdsl.compare` returned.
    path : str or path-like
        The PNG file to write.

    Returns
    -------
    pathlib.Path
    """
    table = comparison.parameters
    element_names = list(dict.fromkeys(table.index.get_level_values("element")))
    fit_names = list(comparison.fits.index)
    flagged = set(comparison.flagged().index.get_level_values("element"))
    figure = Figure(figsize=(7, 0.5 + 0.35 * len(element_names) * max(1, len(fit_names)) ** 0.5 + 1),
                    layout="constrained")
    ax = figure.subplots()
    spacing = 0.7 / max(1, len(fit_names))
    for j, fit in enumerate(fit_names):
        offsets = [i + (j - (len(fit_names) - 1) / 2) * spacing for i in range(len(element_names))]
        rows = [table.loc[(name, fit)] for name in element_names]
        for y, row in zip(offsets, rows):
            if np.isfinite(row["q5"]):
                ax.plot([row["q5"], row["q95"]], [y, y], color=f"C{j}", linewidth=1.5)
        means = [row["mean"] for row in rows]
        point = comparison.fits.loc[fit, "kind"] == "point estimate"
        ax.scatter(means, offsets, color=f"C{j}", marker="x" if point else "o", s=24, zorder=3, label=fit)
    ax.set_yticks(range(len(element_names)), element_names)
    for label in ax.get_yticklabels():
        if label.get_text() in flagged:
            label.set_color("red")
    ax.invert_yaxis()
    ax.set_xlabel("posterior mean and 90% interval (crosses: point estimates)")
    ax.legend(fontsize="small", loc="best")
    ax.set_title(f"reference: {comparison.reference}; red: |z| > 4", fontsize="medium")
    return save_png(figure, path)
