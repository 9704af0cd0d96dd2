"""
The deep Mahalanobis GP's relevances
====================================

``models/deep_mahalanobis_gp.gpm`` (de Souza 2020, Ch. 4) projects each input by a matrix of its own,
``z_i = W(x_i) x_i``, whose entries are GPs of the input, and puts an RBF GP on the projections. ``dmgp`` fits
the thesis's two-layer variational approximation by Adam, with the noise held for a first phase. The variance of
the fields of each projected dimension, relative to the largest, is that dimension's relevance. The data are the
thesis's synthetic set (Sec. 4.4): two clusters of inputs, the output a function of the first input in one cluster
and of the second in the other, with no noise, so that a single global length-scale per input cannot describe it.
"""

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import gpdsl

# The shipped model files, in the repository (the script runs from the root or from ``docs/examples``).
MODELS = next(folder / "models" for folder in [Path.cwd(), *Path.cwd().parents] if (folder / "models").is_dir())
MODEL = MODELS / "deep_mahalanobis_gp.gpm"

# %%
# The model file: ``Q`` projection fields per input dimension, each row ``q`` with its own kernel, and the output
# GP on the projected inputs.
print(MODEL.read_text())

# %%
# Two Gaussian clusters of 150 points each, centred at (-1, 1) and (2, 1) with covariance 0.4 I; the output is
# ``x1^2 + x1`` in the first cluster and ``x2^2 + x2`` in the second. Inputs and outputs are standardised, as the
# model's priors assume; a second draw of 150 points per cluster is the test set.
rng = np.random.default_rng(1996)


def clusters(size):
    first = rng.multivariate_normal([-1.0, 1.0], 0.4 * np.eye(2), size=size)
    second = rng.multivariate_normal([2.0, 1.0], 0.4 * np.eye(2), size=size)
    inputs = np.concatenate([first, second])
    return inputs, np.concatenate([first[:, 0] ** 2 + first[:, 0], second[:, 1] ** 2 + second[:, 1]])


X_raw, y_raw = clusters(150)
X_test_raw, y_test_raw = clusters(150)
x_centre, x_scale, y_centre, y_scale = X_raw.mean(0), X_raw.std(0), y_raw.mean(), y_raw.std()
X, X_test = (X_raw - x_centre) / x_scale, (X_test_raw - x_centre) / x_scale
y, y_test = (y_raw - y_centre) / y_scale, (y_test_raw - y_centre) / y_scale
data = {"N": len(y), "D": 2, "Q": 2, "X": X, "y": y}

# %%
# The fit: 30 inducing inputs of the output layer, 15 pseudo-inputs of the fields, Adam with 500 steps at the
# noise variance 0.01 and then 1500 with everything free (the thesis: 50, 25, 2000 and 5000), predicting the test
# points.
fit = gpdsl.fit(MODEL, data, "dmgp", num_inducing=30, num_inducing_fields=15, noise_fixed_steps=500, steps=1500,
                initial_values={"noise": 0.01}, seed=1, new_inputs=X_test)
gpdsl.summarize(fit, var_names=["sf2", "s2", "ell", "noise"])[["mean"]]

# %%
# The test error in standardised units, against the test outputs' sd of about 1.
mean = fit.predictions["y_mean"].values.reshape(-1)
variance = fit.predictions["y_variance"].values.reshape(-1)
rmse = np.sqrt(np.mean((mean - y_test) ** 2))
nlpd = 0.5 * np.mean(np.log(2 * np.pi * variance) + (y_test - mean) ** 2 / variance)
print(f"test RMSE {rmse:.3f}, NLPD {nlpd:.2f} (standardised units)")

# %%
# Left, the test outputs against the predictive means with their 95% intervals; right, the relevance of each
# projected dimension, ``s2[q] / max(s2)``.
s2 = fit.posterior["s2"].values.reshape(-1)
sd = np.sqrt(variance)
fig, (ax, bars) = plt.subplots(1, 2, figsize=(10, 4), gridspec_kw={"width_ratios": [2, 1]})
ax.errorbar(y_test, mean, yerr=1.96 * sd, fmt=".", ms=3, alpha=0.6, color="C0")
limits = [y_test.min() - 0.2, y_test.max() + 0.2]
ax.plot(limits, limits, "k--", lw=1)
ax.set_xlabel("test output (standardised)")
ax.set_ylabel("predictive mean and 95% interval")
bars.bar(np.arange(1, s2.size + 1), s2 / s2.max(), color="C0")
bars.set_xticks(np.arange(1, s2.size + 1))
bars.set_xlabel("projected dimension q")
bars.set_ylabel("relevance s2[q] / max s2")
fig.tight_layout()
