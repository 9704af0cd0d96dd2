"""The uncollapsed (minibatch) GPLVM bound: minibatch estimates average to the whole-data bound, and at the optimal
q(u) it is the collapsed bound."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gpdsl.inference.variational.collapsed_bound import collapsed_bound
from gpdsl.inference.variational.latent_q import kl_standard_normal
from gpdsl.inference.variational.uncollapsed_bound import (InducingQ, optimal_inducing_q, uncollapsed_bound)
from gpdsl.kernels import RBF
from gpdsl.kernels.psi import psi_statistics

N, D, Q, M = 40, 3, 2, 6


@pytest.fixture(scope="module")
def gplvm():
    rng = np.random.default_rng(0)
    mean = rng.normal(size=(N, Q))
    variance = rng.uniform(0.05, 0.5, size=(N, Q))
    Y = np.stack([np.sin(mean[:, 0]), np.cos(mean[:, 1]), mean[:, 0] * mean[:, 1]], 1) + 0.1 * rng.normal(size=(N, D))
    Z = rng.normal(size=(M, Q))
    kernel = RBF(variance=1.2, lengthscale=jnp.array([1.0, 1.5]))
    Kmm = np.asarray(kernel(Z)) + 1e-8 * np.eye(M)
    chol = np.tril(rng.normal(size=(M, M))) * 0.3 + np.eye(M)
    q = InducingQ(jnp.asarray(rng.normal(size=(M, D))), jnp.asarray(chol))
    return kernel, Z, mean, variance, Y, Kmm, q


def bound_of_rows(gplvm, rows, noise_variance=0.1):
    kernel, Z, mean, variance, Y, Kmm, q = gplvm
    stats = psi_statistics(kernel, Z, mean[rows], variance[rows])
    data = uncollapsed_bound(Y[rows], stats.psi0, stats.psi1, stats.psi2, Kmm, noise_variance, q,
                             scale=N / len(rows))
    return data - N / len(rows) * kl_standard_normal(mean[rows], variance[rows])


def test_the_whole_data_as_one_batch_is_the_uncollapsed_bound_and_batches_average_to_it(gplvm):
    whole = float(bound_of_rows(gplvm, np.arange(N)))
    kernel, Z, mean, variance, Y, Kmm, q = gplvm
    stats = psi_statistics(kernel, Z, mean, variance)
    direct = float(uncollapsed_bound(Y, stats.psi0, stats.psi1, stats.psi2, Kmm, 0.1, q)
                   - kl_standard_normal(mean, variance))
    assert abs(whole - direct) < 1e-10
    batches = np.random.default_rng(1).permutation(N).reshape(5, 8)
    estimates = [float(bound_of_rows(gplvm, rows)) for rows in batches]
    assert abs(np.mean(estimates) - whole) < 1e-9 * abs(whole)
    assert np.std(estimates) > 1.0  # they are estimates, not copies


def test_at_the_optimal_q_u_it_is_the_collapsed_bound_and_a_maximum(gplvm):
    kernel, Z, mean, variance, Y, Kmm, _ = gplvm
    stats = psi_statistics(kernel, Z, mean, variance)
    q = optimal_inducing_q(Y, stats.psi1, stats.psi2, Kmm, 0.1)
    uncollapsed = float(uncollapsed_bound(Y, stats.psi0, stats.psi1, stats.psi2, Kmm, 0.1, q))
    collapsed = float(collapsed_bound(Y, stats.psi0, stats.psi1, stats.psi2, Kmm, 0.1))
    assert abs(uncollapsed - collapsed) < 1e-8 * abs(collapsed)
    gradient = jax.grad(lambda q: uncollapsed_bound(Y, stats.psi0, stats.psi1, stats.psi2, Kmm, 0.1, q))(q)
    assert max(float(jnp.abs(g).max()) for g in gradient) < 1e-5
    rng = np.random.default_rng(2)
    for _ in range(3):
        moved = InducingQ(q.mean + 0.01 * rng.normal(size=q.mean.shape), q.chol + 0.01 * np.tril(rng.normal(size=(M, M))))
        assert float(uncollapsed_bound(Y, stats.psi0, stats.psi1, stats.psi2, Kmm, 0.1, moved)) < uncollapsed
