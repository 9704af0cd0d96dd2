"""Psi statistics of the standard RBF of a random projection (the deep Mahalanobis GP's output layer)."""

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.inference.variational.collapsed_bound import collapsed_bound
from gpdsl.inference.variational.sgpr import sgpr_bound, sgpr_statistics
from gpdsl.kernels import RBF
from gpdsl.kernels.psi import projected_srbf_statistics


def problem(seed=0, N=5, Q=2, D=3, M=4):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D))
    W_mean = rng.normal(size=(N, Q, D)) / np.sqrt(D)
    W_variance = rng.uniform(0.05, 0.3, size=(N, Q))
    Z = rng.normal(size=(M, Q))
    return X, W_mean, W_variance, Z


def test_psi_statistics_equal_monte_carlo_within_standard_errors():
    X, W_mean, W_variance, Z = problem()
    scale = 1.7
    exact = projected_srbf_statistics(X, W_mean, W_variance, Z, scale)
    samples = 40_000
    noise = np.random.default_rng(1).normal(size=(samples,) + W_mean.shape)
    W = W_mean + np.sqrt(W_variance)[..., None] * noise                       # (S, N, Q, D)
    z = np.einsum("snqd,nd->snq", W, X)
    k = scale * np.exp(-0.5 * np.sum((z[:, :, None, :] - Z[None, None]) ** 2, -1))   # (S, N, M)
    psi1_draws = k
    psi2_draws = np.einsum("snj,snk->sjk", k, k)
    for draws, value in ((psi1_draws, exact.psi1), (psi2_draws, exact.psi2)):
        estimate = draws.mean(0)
        standard_error = draws.std(0, ddof=1) / np.sqrt(samples)
        assert np.max(np.abs(estimate - np.asarray(value)) / standard_error) < 4.5
    np.testing.assert_allclose(exact.psi0, scale ** 2)
    per_point = projected_srbf_statistics(X, W_mean, W_variance, Z, scale, per_point=True)
    np.testing.assert_allclose(per_point.psi2.sum(0), exact.psi2, rtol=1e-12)


def test_zero_projection_variance_is_sgpr_with_a_fixed_linear_projection():
    X, _, _, Z = problem(2, N=30)
    rng = np.random.default_rng(3)
    P = rng.normal(size=(2, 3))
    y = np.sin(X @ P[0]) + 0.1 * rng.normal(size=30)
    W_mean = np.broadcast_to(P, (30, 2, 3))
    scale, noise_variance = 1.4, 0.05
    stats = projected_srbf_statistics(X, W_mean, np.zeros((30, 2)), Z, scale)
    kernel = scale ** 2 * RBF(lengthscale=1.0)
    projected = X @ P.T
    reference = sgpr_statistics(kernel, projected, Z)
    np.testing.assert_allclose(stats.psi1, np.asarray(reference.psi1) / scale, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(stats.psi2, np.asarray(reference.psi2) / scale ** 2, rtol=1e-10, atol=1e-13)
    # inducing outputs on s = f / sigma_f (K_u = SRBF(Z)): the same bound as SGPR on the projected inputs
    K_u = np.asarray(RBF(lengthscale=1.0)(Z))
    dmgp = collapsed_bound(y[:, None], stats.psi0, stats.psi1, stats.psi2, K_u, noise_variance)
    assert abs(float(dmgp) - float(sgpr_bound(kernel, projected, y, Z, noise_variance, jitter=0.0))) < 1e-8


def test_gradients_are_finite_and_match_finite_differences():
    X, W_mean, W_variance, Z = problem(4)

    def total(mean):
        stats = projected_srbf_statistics(X, mean, W_variance, Z, 1.3)
        return jnp.sum(stats.psi1) + jnp.sum(stats.psi2)

    gradient = np.asarray(jax.grad(total)(jnp.asarray(W_mean)))
    direction = np.random.default_rng(5).normal(size=W_mean.shape)
    h = 1e-6
    numeric = (float(total(W_mean + h * direction)) - float(total(W_mean - h * direction))) / (2 * h)
    assert abs(numeric - np.sum(gradient * direction)) < 1e-6 * max(1.0, abs(numeric))
