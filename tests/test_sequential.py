"""The sequential sampler (Tegner et al. 2018, Alg. 1) against exact answers, its checkpoints and refusals."""

import arviz as az
import numpy as np
import pytest

from gpdsl import api
from gpdsl.errors import MethodError

FIXED = """
data { int T; int N; vector[T] t; array[T] matrix[N, 1] X; array[T] vector[N] y; }
model {
  f ~ gp((t, X), rbf(t, lengthscale = 0.8) * rbf(X, lengthscale = 0.5));
  for (i in 1:T) {
    y[i] ~ normal(f[i], 0.4);
  }
}
"""
NOISE = 0.4


def rbf(a, b, lengthscale):
    return np.exp(-0.5 * (a[:, None] - b[None]) ** 2 / lengthscale ** 2)


@pytest.fixture(scope="module")
def fixed_data():
    rng = np.random.default_rng(5)
    X = rng.uniform(0, 1, size=(2, 3, 1))
    return {"T": 2, "N": 3, "t": np.array([0.0, 0.5]), "X": X, "y": rng.normal(size=(2, 3))}


def scheme_marginal(data):
    """The exact law of f_2 under the scheme at fixed hyperparameters: f_1 ~ p(f_1 | y_1), then
    f_2 ~ p(f_2 | f_1, y_2), with f_1 integrated out (Gaussian)."""
    t, X, y = data["t"], data["X"][..., 0], data["y"]
    points_t = np.repeat(t, 3)
    points_x = X.reshape(-1)
    K = rbf(points_t, points_t, 0.8) * rbf(points_x, points_x, 0.5) + 1e-6 * np.eye(6)
    K11, K12, K22 = K[:3, :3], K[:3, 3:], K[3:, 3:]
    noise = NOISE ** 2 * np.eye(3)
    gain1 = K11 @ np.linalg.inv(K11 + noise)
    mean1, cov1 = gain1 @ y[0], K11 - gain1 @ K11
    G = K12.T @ np.linalg.inv(K11)
    Q = K22 - G @ K12
    C = np.linalg.inv(np.linalg.inv(Q) + np.eye(3) / NOISE ** 2)
    B = C @ np.linalg.inv(Q) @ G
    return B @ mean1 + C @ y[1] / NOISE ** 2, C + B @ cov1 @ B.T


def test_f2_matches_the_exact_conditional_at_fixed_hyperparameters(fixed_data):
    fit = api.sample(FIXED, fixed_data, "sequential", seed=4, states=3000, burn_in=200, thin=2, initial_repeat_f=2,
                     repeat_f=10, surrogate_variance=NOISE ** 2)
    f2 = fit.posterior["f"].values[:, :, 1, :]
    mean, cov = scheme_marginal(fixed_data)
    for j in range(3):
        values, squared = f2[..., j], (f2[..., j] - mean[j]) ** 2
        assert abs(values.mean() - mean[j]) < 4 * float(az.mcse(values)), (j, values.mean(), mean[j])
        assert abs(squared.mean() - cov[j, j]) < 4 * float(az.mcse(squared)), (j, squared.mean(), cov[j, j])
