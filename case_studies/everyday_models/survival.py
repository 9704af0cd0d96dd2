"""Survival with right censoring: Weibull against log-normal times, on the veterans' lung cancer trial.

137 patients (survival::veteran), 9 right-censored; an accelerated failure time model with a GP over the
Karnofsky score, age and months from diagnosis (standardised), each family with brms' censoring codes. NUTS,
gibbs and pm (Laplace: both censored likelihoods are log-concave in the location). The figure sets the
Kaplan-Meier curve of the data against each fit's posterior predictive survival curve.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gpdsl.datasets import model_data, veteran

HERE = Path(__file__).resolve().parent
MODELS = {"weibull": HERE / "survival_weibull.gpm", "lognormal": HERE / "survival_lognormal.gpm"}
ENGINES = {"nuts": {}, "gibbs": {"repeat_f": 5, "repeat_theta": 5},
           "pm": {"approximation": "laplace", "sample_latent": True}}
TITLE = "Survival with right censoring (survival::veteran)"
COLUMNS = ("karno", "age", "diagtime")


def data(quick: bool, seed: int) -> dict:
    """Every patient (a seeded 40 quick), three covariates standardised over all 137; days and censoring."""
    full = model_data(veteran(), "xy", columns=COLUMNS, standardize=True)
    rows = np.arange(full["N"]) if not quick else np.sort(np.random.default_rng(seed).choice(full["N"], 40,
                                                                                            replace=False))
    return {"N": rows.size, "D": len(COLUMNS), "X": full["X"][rows], "y": full["y"][rows],
            "cens": full["cens"][rows]}


def kaplan_meier(times: np.ndarray, censored: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The Kaplan-Meier estimate: the distinct death times and the survival just after each."""
    deaths = np.unique(times[censored == 0])
    at_risk = np.array([np.sum(times >= t) for t in deaths])
    died = np.array([np.sum((times == t) & (censored == 0)) for t in deaths])
    return deaths, np.cumprod(1.0 - died / at_risk)


def plot(ax, fits: dict) -> None:
    """Kaplan-Meier of the data, and per fit the survival curve of its replicated (uncensored) times."""
    first = next(iter(fits.values()))
    times = np.asarray(first.observed_data["y"])
    censored = np.asarray(first.constant_data["cens"]).astype(int)
    deaths, survival = kaplan_meier(times, censored)
    grid = np.linspace(0.0, np.max(times), 200)
    for label, results in fits.items():
        replicated = np.asarray(results.posterior_predictive["y"]).reshape(-1, times.size)
        ax.plot(grid, [np.mean(replicated > t) for t in grid], lw=1, label=label)
    ax.step(np.r_[0.0, deaths], np.r_[1.0, survival], where="post", color="black", lw=1.5, label="Kaplan-Meier")
    ax.set_xlabel("days")
    ax.set_ylabel("survival")
    ax.set_title(TITLE, fontsize=10)
    ax.legend(fontsize=7)
