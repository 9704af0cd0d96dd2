"""
Sequential sampling of a latent GP over time: coverage of the truth
===================================================================

A latent GP over time and a two-dimensional input, observed with Gaussian noise at fresh inputs at each time
step, ``models/sequential_latent_gp.gpm``, sampled by ``sequential``: Algorithm 1 of Tegner, Bloem-Reddy & Roberts
(2018). Step 1 is one Gibbs chain on the first step's latent values and the hyperparameters; each later step carries
the states of the step before forward, drawing its latent values from their conditional GP prior given the
earlier ones and updating them and the hyperparameters by elliptical slice sampling, at a cost that does not grow
with the number of steps. The data are the paper's simulation (Sec. 4.1, ``gpdsl.datasets.tegner_sequential``),
so the posterior bands can be checked against the true latent function, as in the paper's Fig. 1.
"""

import json
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import gpdsl
from gpdsl.datasets import tegner_sequential

# The shipped model files, in the repository (the script runs from the root or from ``docs/examples``).
MODELS = next(folder / "models" for folder in [Path.cwd(), *Path.cwd().parents] if (folder / "models").is_dir())
MODEL = MODELS / "sequential_latent_gp.gpm"

# %%
# The model file: a separable kernel over (time, inputs), a mean ``alpha[1]`` and noise sd ``alpha[2]``, all with
# scaled-sigmoid-normal priors (Gaussian in the unconstrained space the samplers move in).
print(MODEL.read_text())

# %%
# The simulation: ``T = 4`` steps of ``N = 30`` inputs each (the paper: 20 steps of 200), the true length-scales
# drawn with the seed, ``f`` one joint draw from the GP, ``y = f + 0.5 + noise`` with noise sd 0.3.
data, truth = tegner_sequential(steps=4, n=30, seed=2018)
print("true length-scales (x1, x2, t):", np.round(truth["lengthscales"], 2))

# %%
# The sampler with small settings: ``M = 100`` states per step, the step-1 chain 100 iterations of burn-in and
# then every state kept (the paper: M = 1000, a burn-in of 1000 and every fifth of 5000), a window of one step.
fit = gpdsl.sample(MODEL, data, "sequential", states=100, burn_in=100, thin=1, window=1,
                   surrogate_variance=truth["sigma_y"] ** 2, seed=1)
print("seconds per step:", np.round(json.loads(fit.attrs["report"])["seconds_per_step"], 1))

# %%
# The coverage: at each step, the share of the true ``f_t + mu_f`` inside the +-2 sd band of the step's states,
# and the number of observations outside the +-2 sd predictive interval (noise included). The paper's Fig. 1, with
# its larger settings, has 85% covered at t = 1 and all at t = 20.
f = fit.posterior["f"].values[0]                         # (M, T, N)
alpha = fit.posterior["alpha"].values[0]                 # (M, T, 2): mean and noise sd
shifted = f + alpha[..., :1]
for t in range(data["T"]):
    mean, sd = shifted[:, t].mean(0), shifted[:, t].std(0)
    true = truth["f"][t] + truth["mu_f"]
    predictive_sd = np.sqrt(sd ** 2 + np.mean(alpha[:, t, 1] ** 2))
    covered = np.mean(np.abs(true - mean) <= 2 * sd)
    outside = np.sum(np.abs(data["y"][t] - mean) > 2 * predictive_sd)
    print(f"t = {t + 1}: {covered:.0%} of the true f covered, {outside} of {data['N']} observations outside")

# %%
# The bands at the first and the last step, the inputs sorted by the true value.
fig, axes = plt.subplots(1, 2, figsize=(10, 3.5), sharey=True)
for ax, t in zip(axes, (0, data["T"] - 1)):
    true = truth["f"][t] + truth["mu_f"]
    order = np.argsort(true)
    mean, sd = shifted[:, t].mean(0)[order], shifted[:, t].std(0)[order]
    index = np.arange(true.size)
    ax.fill_between(index, mean - 2 * sd, mean + 2 * sd, color="C0", alpha=0.3, label="+-2 sd of the states")
    ax.plot(index, mean, color="C0", lw=1, label="posterior mean")
    ax.plot(index, true[order], "k.", ms=4, label="true f + mu_f")
    ax.plot(index, data["y"][t][order], "x", color="C3", ms=3, label="observations")
    ax.set_title(f"step t = {t + 1}")
    ax.set_xlabel("input (sorted by the true value)")
axes[0].legend(fontsize=8)
fig.tight_layout()
