"""
Sparse GP regression on 10,000 points
=====================================

An exact GP would factorise a 10,000 x 10,000 matrix at every step of its optimiser; ``sgpr`` (Titsias 2009)
maximises a lower bound on the marginal likelihood that costs ``O(N M^2)`` with ``M`` inducing inputs, optimised
together with the hyperparameters by L-BFGS from k-means centres of the inputs. The data are simulated from a
known function with a known noise level, so the fit can be checked against both. The model file is the one
``ml`` fits exactly, ``models/gp_regression.gpm``.
"""

from pathlib import Path

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
# 10,000 noisy values of ``sin(3 x) + 0.5 cos(7 x)`` at inputs uniform on ``[-2, 2]``, noise sd 0.3.
rng = np.random.default_rng(0)
N, NOISE_SD = 10_000, 0.3


def truth(inputs):
    return np.sin(3 * inputs) + 0.5 * np.cos(7 * inputs)


x = rng.uniform(-2, 2, N)
y = truth(x) + NOISE_SD * rng.normal(size=N)
data = {"N": N, "D": 1, "X": x[:, None], "y": y}

# %%
# The fit with 30 inducing inputs, and the projected-process predictive at 200 new inputs.
grid = np.linspace(-2.2, 2.2, 200)
fit = gpdsl.fit(MODEL, data, "sgpr", num_inducing=30, seed=1, new_inputs=grid[:, None])
gpdsl.summarize(fit, var_names=["variance", "lengthscale", "noise"])[["mean"]]

# %%
# The noise sd it found against the true 0.3, and how far the predictive mean is from the true function.
noise = float(fit.posterior["noise"].values.reshape(-1)[0])
mean = fit.predictions["y_mean"].values.reshape(-1)
inside = np.abs(grid) <= 2
print(f"noise sd: fitted {noise:.4f}, true {NOISE_SD}")
print(f"largest |predictive mean - truth| on [-2, 2]: {np.max(np.abs(mean - truth(grid))[inside]):.3f}")

# %%
# The predictive mean and 95% band of a new observation, over a thousand of the points and the inducing inputs
# where the optimiser left them.
sd = np.sqrt(fit.predictions["y_variance"].values.reshape(-1))
inducing = fit.posterior["inducing_inputs"].values.reshape(-1)
fig, ax = plt.subplots(figsize=(8, 4))
ax.plot(x[:1000], y[:1000], ".", color="0.6", ms=2, label="1,000 of the 10,000 points")
ax.fill_between(grid, mean - 1.96 * sd, mean + 1.96 * sd, color="C0", alpha=0.25, label="95% predictive band")
ax.plot(grid, mean, color="C0", label="predictive mean")
ax.plot(grid, truth(grid), "k--", label="true function")
ax.plot(inducing, np.full_like(inducing, -2.6), "|", color="C3", ms=12, label="inducing inputs")
ax.set_xlabel("x")
ax.set_ylabel("y")
ax.legend(loc="upper left", ncol=2, fontsize=8)
fig.tight_layout()
