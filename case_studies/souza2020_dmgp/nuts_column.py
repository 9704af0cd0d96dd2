"""The NUTS column of the DMGP case study: Stan's NUTS on the deep Mahalanobis GP with priors
(``models/deep_mahalanobis_gp.gpm``), on a subsample of the synthetic training set small enough for it, beside
``dmgp`` on the same subsample.

NUTS samples the projection fields ``W`` at the training points and the hyperparameters (``f`` integrated out).
For each kept draw the test predictive is the GP regression predictive of the output layer at the projected test
points, with the fields at the test points drawn from their GP conditional given the draw's ``W``; the mixture over
draws is moment-matched to one Gaussian per point, as the variational methods' predictives are.
"""

from __future__ import annotations

import numpy as np


def rbf(A, B, variance, lengthscale):
    """``variance * exp(-|a - b|^2 / (2 l^2))`` with ARD ``lengthscale``."""
    A, B = A / lengthscale, B / lengthscale
    squared = np.sum(A ** 2, 1)[:, None] + np.sum(B ** 2, 1)[None, :] - 2 * A @ B.T
    return variance * np.exp(-0.5 * np.maximum(squared, 0.0))


def draw_predictive(draw: dict, X, y, X_new, rng, jitter=1e-8):
    """Mean and variance of ``y*`` at ``X_new`` for one posterior draw (fields at ``X_new`` sampled once)."""
    W, s2, ell, sf2, noise = (np.asarray(draw[k]) for k in ("W", "s2", "ell", "sf2", "noise"))
    Q = W.shape[0]
    Z = np.einsum("qnd,nd->nq", W, X)
    Z_new = np.zeros((len(X_new), Q))
    for q in range(Q):
        K = rbf(X, X, s2[q], ell[q]) + jitter * np.eye(len(X))
        K_cross = rbf(X_new, X, s2[q], ell[q])
        projection = np.linalg.solve(K, K_cross.T).T
        variance = np.maximum(s2[q] - np.sum(projection * K_cross, 1), 0.0)
        W_new = projection @ W[q] + np.sqrt(variance)[:, None] * rng.normal(size=(len(X_new), X.shape[1]))
        Z_new[:, q] = np.sum(W_new * X_new, 1)
    K = rbf(Z, Z, sf2, 1.0) + (noise + jitter) * np.eye(len(X))
    K_cross = rbf(Z_new, Z, sf2, 1.0)
    mean = K_cross @ np.linalg.solve(K, y)
    variance = sf2 - np.sum(K_cross * np.linalg.solve(K, K_cross.T).T, 1) + noise
    return mean, np.maximum(variance, 1e-12)


def nuts_predictive(fit, X, y, X_new, num_draws: int = 200, seed: int = 0):
    """The moment-matched predictive of ``y*`` over ``num_draws`` evenly thinned NUTS draws."""
    posterior = fit.posterior
    chains, draws = posterior.sizes["chain"], posterior.sizes["draw"]
    flat = [(c, d) for c in range(chains) for d in range(draws)]
    keep = [flat[i] for i in np.linspace(0, len(flat) - 1, num_draws).astype(int)]
    rng = np.random.default_rng(seed)
    means, variances = [], []
    for c, d in keep:
        draw = {k: posterior[k].values[c, d] for k in ("W", "s2", "ell", "sf2", "noise")}
        mean, variance = draw_predictive(draw, X, y, X_new, rng)
        means.append(mean)
        variances.append(variance)
    means, variances = np.array(means), np.array(variances)
    mean = means.mean(0)
    return mean, np.mean(variances + means ** 2, 0) - mean ** 2
