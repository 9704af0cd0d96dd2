"""
Poisson counts by pseudo-marginal MCMC
======================================

Counts whose log rate is a smooth function of one input, ``models/gp_poisson.gpm``, sampled by ``pm``: Metropolis-
Hastings on the hyperparameters, with the marginal likelihood of each proposal estimated without bias by importance
sampling from the Laplace approximation of the latent GP (Filippone & Girolami 2014). The data are simulated from a
known rate, so the posterior predictive rate can be compared with the truth.
"""

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import gpdsl

# The shipped model files, in the repository (the script runs from the root or from ``docs/examples``).
MODELS = next(folder / "models" for folder in [Path.cwd(), *Path.cwd().parents] if (folder / "models").is_dir())
MODEL = MODELS / "gp_poisson.gpm"

# %%
# The model file: a GP on the log rate, with priors on its scale and length-scale.
print(MODEL.read_text())

# %%
# Fifty counts at inputs in ``[-2, 2]``, with rate ``exp(1 + sin(2 x))``.
rng = np.random.default_rng(2)
x = np.sort(rng.uniform(-2, 2, 50))


def true_rate(inputs):
    return np.exp(1.0 + np.sin(2.0 * inputs))


y = rng.poisson(true_rate(x))
data = {"N": len(y), "D": 1, "X": x[:, None], "y": y}

# %%
# Two short chains (small settings, for the gallery: seconds of sampling after JAX compiles), with predictions
# of the latent log rate at 60 new inputs from every draw.
grid = np.linspace(-2.2, 2.2, 60)
fit = gpdsl.sample(MODEL, data, "pm", approximation="laplace", chains=2, warmup=200, draws=300,
                   seed=1, new_inputs=grid[:, None])
gpdsl.summarize(fit)

# %%
# The posterior of the rate ``exp(f)`` at the new inputs: its median and 90% band, against the true rate.
rate = np.exp(fit.predictions["f_new"].values.reshape(-1, len(grid)))
low, median, high = np.quantile(rate, [0.05, 0.5, 0.95], axis=0)
fig, ax = plt.subplots(figsize=(7, 4))
ax.fill_between(grid, low, high, color="C1", alpha=0.3, label="90% posterior band of the rate")
ax.plot(grid, median, color="C1", label="posterior median")
ax.plot(grid, true_rate(grid), "k--", label="true rate")
ax.plot(x, y, "k.", label="counts")
ax.set_xlabel("x")
ax.set_ylabel("count")
ax.legend(loc="upper left")
fig.tight_layout()
