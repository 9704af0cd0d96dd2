"""The doubly-stochastic deep-GP bound (issue 19, item 3): with one layer it is the SVGP bound, which at the optimal
q(u) is Titsias's collapsed bound; its minibatch estimate is unbiased over batches; with two layers its Monte
Carlo estimate is unbiased against Gauss-Hermite quadrature over the hidden layer; predictions moment-match."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import multivariate_normal

from gpdsl.inference.variational.deep_gp import (Layer, LayerPrior, elbo_estimate, layer_marginals, predict)
from gpdsl.kernels import RBF

N, M = 8, 4


def data(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, 1))
    return X, np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=N)


def one_layer(seed=1):
    rng = np.random.default_rng(seed)
    q_sqrt = np.tril(rng.normal(size=(1, M, M))) * 0.3 + np.eye(M) * 0.5
    layer = Layer(jnp.asarray(rng.normal(size=(M, 1))), jnp.asarray(rng.normal(size=(M, 1))), jnp.asarray(q_sqrt))
    return layer, LayerPrior(RBF(1.2, 0.8), None)


def test_one_layer_bound_is_the_svgp_bound():
    X, y = data()
    layer, prior = one_layer()
    ours = float(elbo_estimate([layer], [prior], 0.1, X, y, jax.random.PRNGKey(0)))
    K = np.asarray(prior.kernel(layer.Z)) + 1e-6 * np.eye(M)
    Kfu, Kff = np.asarray(prior.kernel(X, layer.Z)), np.asarray(prior.kernel(X))
    P = Kfu @ np.linalg.inv(K)
    S = np.tril(np.asarray(layer.q_sqrt[0])) @ np.tril(np.asarray(layer.q_sqrt[0])).T
    m = np.asarray(layer.q_mean[:, 0])
    mean, var = P @ m, np.diag(Kff - P @ (K - S) @ P.T)
    expected = np.sum(-0.5 * np.log(2 * np.pi * 0.1) - ((y - mean) ** 2 + var) / 0.2)
    kl = 0.5 * (np.trace(np.linalg.solve(K, S)) + m @ np.linalg.solve(K, m) - M + np.linalg.slogdet(K)[1]
                - np.linalg.slogdet(S)[1])
    assert ours == pytest.approx(expected - kl, rel=1e-9)


def test_one_layer_bound_at_the_optimal_q_is_the_collapsed_bound():
    X, y = data()
    layer, prior = one_layer()
    K = np.asarray(prior.kernel(layer.Z)) + 1e-6 * np.eye(M)
    Kfu = np.asarray(prior.kernel(X, layer.Z))
    Sigma = np.linalg.inv(K + Kfu.T @ Kfu / 0.1)
    S = K @ Sigma @ K
    optimal = Layer(layer.Z, jnp.asarray((K @ Sigma @ Kfu.T @ y / 0.1)[:, None]),
                    jnp.asarray(np.linalg.cholesky(S)[None]))
    ours = float(elbo_estimate([optimal], [prior], 0.1, X, y, jax.random.PRNGKey(0)))
    Qff = Kfu @ np.linalg.solve(K, Kfu.T)
    collapsed = (multivariate_normal(np.zeros(N), Qff + 0.1 * np.eye(N)).logpdf(y)
                 - (N * 1.2 - np.trace(Qff)) / 0.2)
    assert ours == pytest.approx(collapsed, rel=1e-7)


def test_minibatch_estimates_average_to_the_full_bound():
    X, y = data()
    layer, prior = one_layer()
    full = float(elbo_estimate([layer], [prior], 0.1, X, y, jax.random.PRNGKey(0)))
    batches = [np.array(b) for b in itertools.combinations(range(N), 3)]
    estimates = [float(elbo_estimate([layer], [prior], 0.1, X, y, jax.random.PRNGKey(0), jnp.asarray(b), N))
                 for b in batches]
    assert np.mean(estimates) == pytest.approx(full, rel=1e-10)


def two_layers(seed=2):
    rng = np.random.default_rng(seed)
    hidden = Layer(jnp.asarray(rng.normal(size=(M, 1))), jnp.asarray(rng.normal(size=(M, 1)) * 0.5),
                   jnp.asarray(np.eye(M)[None] * 0.4))
    output, _ = one_layer(seed + 1)
    return [hidden, output], [LayerPrior(RBF(0.7, 1.0), jnp.eye(1)), LayerPrior(RBF(1.2, 0.8), None)]


def test_two_layer_estimate_is_unbiased_against_quadrature():
    X, y = data()
    layers, priors = two_layers()
    keys = jax.random.split(jax.random.PRNGKey(5), 4000)
    estimates = np.asarray(jax.vmap(lambda k: elbo_estimate(layers, priors, 0.1, X, y, k))(keys))
    mean1, var1 = map(np.asarray, layer_marginals(layers[0], priors[0], jnp.asarray(X)))
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    weights = weights / weights.sum()
    data_term = 0.0
    for i in range(N):
        h = mean1[i, 0] + np.sqrt(var1[i, 0]) * nodes
        mean2, var2 = map(np.asarray, layer_marginals(layers[1], priors[1], jnp.asarray(h[:, None])))
        g = -0.5 * np.log(2 * np.pi * 0.1) - ((y[i] - mean2[:, 0]) ** 2 + var2[:, 0]) / 0.2
        data_term += weights @ g
    from gpdsl.inference.variational.deep_gp import kl_layer
    exact = data_term - sum(float(kl_layer(l, p)) for l, p in zip(layers, priors))
    error = estimates.std() / np.sqrt(len(estimates))
    assert abs(estimates.mean() - exact) < 4 * error, (estimates.mean(), exact, error)


def test_predictions_moment_match_the_samples():
    """The predictive mean and variance are those of y* drawn through the layers, within Monte Carlo error."""
    layers, priors = two_layers()
    X_new = np.linspace(-2, 2, 5)[:, None]
    S = 4000
    mean, variance = predict(layers, priors, 0.1, X_new, jax.random.PRNGKey(7), num_samples=S)
    from gpdsl.inference.variational.deep_gp import propagate
    means, variances = jax.vmap(lambda k: propagate(layers, priors, jnp.asarray(X_new), k))(
        jax.random.split(jax.random.PRNGKey(8), S))
    noise = np.random.default_rng(9).normal(size=means.shape[:2])
    draws = np.asarray(means[..., 0]) + np.sqrt(np.asarray(variances[..., 0]) + 0.1) * noise
    centred = draws - draws.mean(0)
    mean_error = draws.std(0) / np.sqrt(S)
    variance_error = np.sqrt((np.mean(centred ** 4, 0) - draws.var(0) ** 2) / S)
    # both sides are Monte Carlo estimates of the same moments: combine their errors
    assert np.all(np.abs(np.asarray(mean) - draws.mean(0)) < 5 * np.sqrt(2) * mean_error)
    assert np.all(np.abs(np.asarray(variance) - draws.var(0)) < 5 * np.sqrt(2) * variance_error)
