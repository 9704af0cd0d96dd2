"""
The supervised GPLVM's prediction bands
=======================================

Six noisy sinusoids of one observed input, ``models/supervised_gplvm.gpm`` (Gadd, Wade & Shah 2021): the observed
input ``x`` drives latent inputs ``Z ~ GP(x)``, and the outputs are a GP of ``Z``, so that outputs which are not
smooth functions of ``x`` alone can share a low-dimensional latent structure. ``vem`` fits ``q(Z)`` in the form that
follows its GP prior, with the hyperparameters; at new inputs, ``q(Z*)`` from that prior and the predictive of every
output (Damianou et al. 2016, Sec. 4.2 and eqs. 40-41) give bands that can be checked against the generating
functions. The data are the paper's sinusoid case 1 (``gpdsl.datasets.sinusoids``: ``zeta_d cos x`` and ``zeta_d sin
x``, noise sd 0.05), whose scale the model's priors were written for.
"""

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import gpdsl
from gpdsl.datasets import sinusoids

# The shipped model files, in the repository (the script runs from the root or from ``docs/examples``).
MODELS = next(folder / "models" for folder in [Path.cwd(), *Path.cwd().parents] if (folder / "models").is_dir())
MODEL = MODELS / "supervised_gplvm.gpm"

# %%
# The model file: ``s1`` and ``theta`` are inverse squared length-scales of the two GP layers; the paper's
# Gamma prior on the noise variance has its mode at the generating 0.05^2.
print(MODEL.read_text())

# %%
# Thirty points on ``[0, 4 pi]``, six outputs, centred; ``Q = 2`` latent dimensions.
x, Y, truth = sinusoids(N=30)
centre = Y.mean(0)
data = {"N": 30, "Q": 2, "D": 6, "X": x[:, None], "Y": Y - centre}

# %%
# The fit (inducing inputs at every point, L-BFGS for at most 500 iterations), predicting at 200 new inputs. The
# bound of a model whose latent inputs have a GP prior is badly conditioned, and L-BFGS uses its whole budget
# (``docs/inference.md``; the case study runs 1000 iterations from three starts); the bands below are close to
# the truth all the same.
grid = np.linspace(0, 4 * np.pi, 200)
fit = gpdsl.fit(MODEL, data, "vem", num_inducing=30, max_iterations=500, seed=0, new_inputs={"X": grid[:, None]})
optimiser = gpdsl.results.results_json(fit, "report")["optimizer"]
print(f"L-BFGS: {optimiser['iterations']} iterations; {optimiser['message']}")
gpdsl.summarize(fit, var_names=["s1", "theta", "theta_S", "noise"])[["mean"]]

# %%
# How far the predictive means are from the generating functions, and the share of them inside the 95% bands
# of a new observation.
mean = fit.predictions["Y_new"].values.reshape(grid.size, 6) + centre
sd = np.sqrt(fit.predictions["Y_new_variance"].values.reshape(grid.size, 6))
error = mean - truth(grid)
print(f"RMSE of the means: {np.sqrt(np.mean(error ** 2)):.3f}; "
      f"true values inside the 95% bands: {np.mean(np.abs(error) <= 1.96 * sd):.0%}")

# %%
# Each output: the data, the predictive mean and 95% band, and the generating function.
fig, axes = plt.subplots(2, 3, figsize=(11, 5.5), sharex=True)
for d, ax in enumerate(axes.flat):
    ax.fill_between(grid, mean[:, d] - 1.96 * sd[:, d], mean[:, d] + 1.96 * sd[:, d], color="C0", alpha=0.3,
                    label="95% predictive band")
    ax.plot(grid, mean[:, d], color="C0", label="predictive mean")
    ax.plot(grid, truth(grid)[:, d], "k--", lw=1, label="generating function")
    ax.plot(x, Y[:, d], "k.", ms=4, label="data")
    ax.set_title(f"output {d + 1}")
for ax in axes[1]:
    ax.set_xlabel("x")
axes[0, 0].legend(fontsize=7, loc="lower left")
fig.tight_layout()
