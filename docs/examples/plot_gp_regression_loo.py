"""
GP regression by NUTS, and its leave-one-out predictive density
===============================================================

The ozone data of the type-II maximum-likelihood example (R's ``airquality``), ``models/gp_regression.gpm`` again,
now with the hyperparameters sampled by NUTS (Stan, through PyStan in a subprocess), the latent function integrated
out. For GP regression gpdsl's ``log_likelihood`` group holds the exact leave-one-out densities ``log p(y_i | y_-i,
theta)`` of each draw, so ``az.loo`` estimates the expected log predictive density ``elpd_loo`` by Pareto-smoothed
importance sampling over the hyperparameters only (Vehtari, Gelman & Gabry 2017), and its Pareto ``k`` diagnostics
say where that estimate can be trusted. ``gpdsl.compare`` reports the same ``elpd_loo``, and sets the ``ml`` point
estimates against the posterior.
"""

from pathlib import Path

import arviz as az
import matplotlib.pyplot as plt
import numpy as np

import gpdsl

# The shipped model files, in the repository (the script runs from the root or from ``docs/examples``).
MODELS = next(folder / "models" for folder in [Path.cwd(), *Path.cwd().parents] if (folder / "models").is_dir())
MODEL = MODELS / "gp_regression.gpm"

# %%
# The model file: a Matérn-5/2 GP with a Gaussian likelihood, its priors written for standardised data.
print(MODEL.read_text())

# %%
# The data: the 111 complete days, temperature against ozone, both standardised (what ``gpdsl data
# airquality_complete --columns Temp --standardize`` writes).
data = gpdsl.datasets.model_data(gpdsl.datasets.airquality(complete_cases=True), "xy", columns=["Temp"],
                                 standardize=True)

# %%
# NUTS with 2 chains of 300 + 300 iterations (its first run compiles the Stan program, about a minute; later
# runs find it in PyStan's cache), and the type-II ML fit beside it.
nuts = gpdsl.sample(MODEL, data, "nuts", chains=2, warmup=300, draws=300, seed=1)
ml = gpdsl.fit(MODEL, data, "ml", seed=1)
gpdsl.summarize(nuts)

# %%
# PSIS-LOO of the NUTS fit: ``elpd_loo`` with its standard error, the effective number of parameters ``p_loo``,
# and the Pareto ``k`` of every day.
loo = az.loo(nuts, pointwise=True)
print(loo)

# %%
# ``gpdsl compare``'s tables: NUTS as the reference (its ``elpd_loo`` is the one above; a point estimate has no
# draws to estimate it from), then each ``ml`` estimate's distance from the posterior mean in posterior sds.
table = gpdsl.compare({"nuts": nuts, "ml": ml}, reference="nuts")
table.fits[["method", "kind", "min_ess_bulk", "max_r_hat", "divergences", "elpd_loo", "elpd_loo_se", "p_loo"]]

# %%
table.differences[["difference", "in_reference_sd"]]

# %%
# Left, each day's leave-one-out log predictive density against its temperature: the hot, high-ozone days are
# the ones the GP predicts worst from the others, one of them (168 ppb, the largest value) far worse than any.
# Right, the Pareto ``k`` of each day: below ArviZ's threshold (0.7 at most; 0.64 for 600 draws) the
# importance-sampling estimate is reliable. That one day is above it: leaving it out moves the posterior of the
# noise far, which a Gaussian likelihood cannot absorb (ArviZ's warning above); ``az.reloo`` with a refit, or a
# heavier-tailed likelihood, would be the next step.
temperature = data["X"][:, 0] * data["X__scale"][0] + data["X__centre"][0]
pointwise = np.asarray(loo.loo_i).reshape(-1)
k = np.asarray(loo.pareto_k).reshape(-1)
fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
points = left.scatter(temperature, pointwise, c=data["y"], cmap="viridis", s=14)
fig.colorbar(points, ax=left, label="ozone (standardised)")
left.set_xlabel("temperature (°F)")
left.set_ylabel("log p(y_i | y_-i)")
right.plot(np.arange(1, k.size + 1), k, "k.", ms=4)
right.axhline(0.7, color="C3", ls="--", lw=1, label="k = 0.7")
right.set_xlabel("day (complete cases, in order)")
right.set_ylabel("Pareto k")
right.legend()
fig.tight_layout()
