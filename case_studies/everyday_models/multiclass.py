"""Multiclass classification: one shared length-scale against one per input, on UCI's glass identification.

Six glass types from the refractive index and eight oxide contents (German 1987). A GP per class and a
softmax per row (``categorical_logit``); NUTS, gibbs (ESS on the stacked latent) and pm with the multiclass
Laplace approximation (Williams & Barber 1998). The figure shows the posterior mean probability of each
row's own type, by type, for every fit.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gpdsl.datasets import glass, model_data

HERE = Path(__file__).resolve().parent
MODELS = {"isotropic": HERE / "multiclass_isotropic.gpm", "ard": HERE / "multiclass_ard.gpm"}
ENGINES = {"nuts": {}, "gibbs": {"repeat_f": 5, "repeat_theta": 5},
           "pm": {"approximation": "laplace", "sample_latent": True}}
TITLE = "Multiclass classification (UCI glass, six types)"
COLUMNS = ("RI", "Mg", "Al", "Ba")


def data(quick: bool, seed: int) -> dict:
    """A seeded stratified subset (10 rows per type, 5 quick; all of a type with fewer), four inputs
    standardised over all 214 rows, labels 1..6."""
    table = glass()
    rng = np.random.default_rng(seed)
    per_type = 5 if quick else 10
    rows = np.sort(np.concatenate([rng.choice(np.flatnonzero(table.y == k), min(per_type, np.sum(table.y == k)),
                                              replace=False) for k in range(len(table.class_names))]))
    full = model_data(table, "xy", columns=COLUMNS, standardize=True)
    return {"N": rows.size, "D": len(COLUMNS), "K": len(table.class_names), "X": full["X"][rows],
            "y": full["y"][rows] + 1}


def plot(ax, fits: dict) -> None:
    """Posterior predictive share of draws that give each row its own type, averaged by type, per fit."""
    width = 0.8 / len(fits)
    for i, (label, results) in enumerate(fits.items()):
        observed = np.asarray(results.observed_data["y"]).astype(int)
        replicated = np.asarray(results.posterior_predictive["y"]).reshape(-1, observed.size)
        hit = np.mean(replicated == observed, axis=0)
        types = np.unique(observed)
        ax.bar(types + (i - len(fits) / 2) * width, [hit[observed == k].mean() for k in types], width,
               label=label)
    ax.set_xlabel("glass type")
    ax.set_ylabel("predictive probability of the observed type")
    ax.set_title(TITLE, fontsize=10)
    ax.legend(fontsize=7)
