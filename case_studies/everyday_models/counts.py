"""Counts with excess zeros: Poisson against zero-inflated Poisson on pscl's ``bioChemists``.

Articles of PhD students in biochemistry (Long 1990; the textbook case of zero inflation, 275 of 915 zeros)
on a latent GP of the five covariates (standardised) with an intercept (a constant kernel). Each model runs on NUTS and on
gpdsl's Gibbs sampler (ESS for f); ``gpdsl.compare`` puts the fits side by side with their elpd_loo, and the
figure sets the observed share of zeros against each model's posterior predictive share.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gpdsl.datasets import bio_chemists, model_data

HERE = Path(__file__).resolve().parent
MODELS = {"poisson": HERE / "counts_poisson.gpm", "zero_inflated": HERE / "counts_zero_inflated.gpm"}
ENGINES = {"nuts": {}, "gibbs": {"repeat_f": 5, "repeat_theta": 5}}
ITERATIONS = {"gibbs": (2000, 40000)}
"""gibbs's hyperparameters mix slowly against the 150 latent values: 10,000 draws left R-hat at 1.02."""
TITLE = "Counts with excess zeros (pscl::bioChemists)"


def data(quick: bool, seed: int) -> dict:
    """150 students (40 quick) drawn without replacement (seeded) from the 915, inputs standardised over all 915."""
    table = bio_chemists()
    rows = 40 if quick else 150
    chosen = np.sort(np.random.default_rng(seed).choice(table.n, size=rows, replace=False))
    full = model_data(table, "xy", standardize=True)
    return {"N": rows, "D": full["D"], "X": full["X"][chosen], "y": full["y"][chosen]}


def zero_share(results) -> tuple[float, np.ndarray]:
    """The observed share of zeros and its posterior predictive draws (one per draw of every chain)."""
    observed = np.asarray(results.observed_data["y"])
    replicated = np.asarray(results.posterior_predictive["y"])
    return float(np.mean(observed == 0)), np.mean(replicated == 0, axis=-1).reshape(-1)


def plot(ax, fits: dict) -> None:
    """Histogram of the predictive share of zeros per model (NUTS and Gibbs), the observed share as a line."""
    observed = None
    for (label, results), color in zip(fits.items(), ("C0", "C1", "C2", "C3")):
        observed, shares = zero_share(results)
        ax.hist(shares, bins=30, density=True, histtype="step", color=color, label=label)
    ax.axvline(observed, color="black", lw=1.5, label=f"observed {observed:.3f}")
    ax.set_xlabel("share of zero counts (posterior predictive)")
    ax.set_ylabel("density")
    ax.set_title(TITLE, fontsize=10)
    ax.legend(fontsize=7)
