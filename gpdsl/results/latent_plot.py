"""Latent-space picture of a GPLVM fit (Damianou et al. 2016, Fig. 6), written to PNG.

The variational means on two latent dimensions, coloured by a label vector, over a greyscale
background of the GP's predictive variance (darker = more certain).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from gpdsl.errors import DataError
from gpdsl.results.plots import save_png

MARKERS = "os^vD<>pPX*h"


def plot_latent(points, path: str | os.PathLike, *, labels=None, background=None, dims=(1, 2),
                title: str | None = None) -> Path:
    """Draw latent points over a predictive-variance background and save a PNG.

    Parameters
    ----------
    points : array_like, shape (N, 2)
        Latent means on the two shown dimensions.
    path : str or path-like
        The PNG file to write.
    labels : array_like, shape (N,), optional
        Class of each point (colour and marker); one-hot rows ``(N, K)`` are accepted too.
    background : tuple (grid_x, grid_y, variance), optional
        Predictive variance on a grid (``variance[i, j]`` at ``(grid_x[j], grid_y[i])``).
    dims : tuple of int
        The latent dimensions shown (axis labels, counted from 1 as in the model).
    title : str, optional
        Figure title.

    Returns
    -------
    pathlib.Path
    """
    points = np.asarray(points, dtype=float)
    labels = class_labels(labels, points.shape[0])
    figure = Figure(figsize=(7, 6), layout="constrained")
    ax = figure.subplots()
    if background is not None:
        grid_x, grid_y, variance = background
        image = ax.imshow(variance, origin="lower", cmap="gray", aspect="auto",
                          extent=(grid_x[0], grid_x[-1], grid_y[0], grid_y[-1]))
        figure.colorbar(image, ax=ax, label="predictive variance")
    if labels is None:
        ax.scatter(points[:, 0], points[:, 1], s=12, color="C0", edgecolors="k", linewidths=0.3)
    else:
        for i, value in enumerate(np.unique(labels)):
            chosen = labels == value
            ax.scatter(points[chosen, 0], points[chosen, 1], s=14, marker=MARKERS[i % len(MARKERS)],
                       color=f"C{i % 10}", edgecolors="k", linewidths=0.3, label=str(value))
        ax.legend(title="label", fontsize="small", loc="best")
    ax.set_xlabel(f"latent dimension {dims[0]}")
    ax.set_ylabel(f"latent dimension {dims[1]}")
    if title:
        ax.set_title(title, fontsize="medium")
    return save_png(figure, path)


def class_labels(labels, n: int):
    """``labels`` as one class per latent point (a one-hot matrix as its column indices; whole floats as ints), or
    None when there are none.

    Raises
    ------
    DataError
        Not one entry per point.
    """
    if labels is None:
        return None
    labels = np.asarray(labels)
    if labels.ndim == 2:
        labels = np.argmax(labels, axis=1)
    if labels.shape != (n,):
        raise DataError(f"labels must have one entry per latent point ({n}); got shape {labels.shape}")
    if labels.dtype.kind == "f" and np.all(labels == np.round(labels)):
        labels = labels.astype(int)
    return labels
