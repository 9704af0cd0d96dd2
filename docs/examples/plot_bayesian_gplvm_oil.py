"""
The Bayesian GPLVM's latent space of the oil-flow data
======================================================

Twelve gamma-densitometry readings of oil, water and gas flowing in a pipeline (Bishop & James 1993), in three flow
configurations the model is not told. ``models/bayesian_gplvm.gpm`` explains the readings as a GP of a few latent
inputs with a standard normal prior, fitted by variational EM (``vem``: Titsias & Lawrence 2010, Damianou,
Titsias & Lawrence 2016): a Gaussian ``q(X)`` per point and inducing inputs, the hyperparameters at the maximum of
the collapsed bound. The ARD weights ``w`` switch off the latent dimensions the data do not need; the two
most relevant show the three configurations apart. The data come from ``gpdsl.datasets.oil_flow`` (downloaded
once with a sha256 check, or read from ``GPDSL_DATA_MIRROR``).
"""

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import gpdsl

# The shipped model files, in the repository (the script runs from the root or from ``docs/examples``).
MODELS = next(folder / "models" for folder in [Path.cwd(), *Path.cwd().parents] if (folder / "models").is_dir())
MODEL = MODELS / "bayesian_gplvm.gpm"

# %%
# The model file: ``X ~ normal(0, 1)``, an RBF GP with one inverse squared length-scale per latent dimension
# (``w``), Gaussian noise; no priors on the hyperparameters, which variational EM point-estimates.
print(MODEL.read_text())

# %%
# The data: 334 of the 1000 training rows (every third, so all configurations appear), centred, with
# ``Q = 5`` latent dimensions (the paper's setting is all 1000 rows and ``Q = 10``; ``gpdsl data oil_flow --as
# gplvm`` writes them).
oil = gpdsl.datasets.oil_flow()
subset = oil.subset(np.arange(0, oil.n, 3))
data = gpdsl.datasets.model_data(subset, "gplvm", latent_dims=5)
labels = subset.y
print(f"Y: {data['Y'].shape}, configurations: {np.bincount(labels).tolist()}")

# %%
# The fit: 20 inducing inputs, analytic Psi statistics, PCA start, L-BFGS.
fit = gpdsl.fit(MODEL, data, "vem", num_inducing=20, psi="analytic", max_iterations=1000, seed=0)
optimiser = gpdsl.results.results_json(fit, "report")["optimizer"]
print(f"L-BFGS: {optimiser['iterations']} iterations; {optimiser['message']}")
gpdsl.summarize(fit, var_names=["s2", "w", "noise"])[["mean"]]

# %%
# The latent means of the two dimensions of largest ARD weight, coloured by configuration, with the ARD
# weights beside them.
w = fit.posterior["w"].values.reshape(-1)
first, second = np.argsort(w)[::-1][:2]
X = fit.posterior["X"].values.reshape(data["N"], -1)
fig, (ax, bars) = plt.subplots(1, 2, figsize=(10, 4), gridspec_kw={"width_ratios": [2, 1]})
for label, marker in zip(range(3), "o^s"):
    chosen = labels == label
    ax.scatter(X[chosen, first], X[chosen, second], s=12, marker=marker, label=f"configuration {label}")
ax.set_xlabel(f"latent dimension {first + 1}")
ax.set_ylabel(f"latent dimension {second + 1}")
ax.legend()
bars.bar(np.arange(1, w.size + 1), w / w.max(), color="C0")
bars.set_xlabel("latent dimension")
bars.set_ylabel("ARD weight w (relative to the largest)")
fig.tight_layout()
