"""Data of the DMGP case study: the synthetic two-cluster set of de Souza (2020), Sec. 4.4.1 (spec sheet C, Sec. 3.1),
and five-fold splits of the UCI regression sets (Sec. 4.4.2)."""

from __future__ import annotations

import numpy as np

SEED = 19960111


def two_clusters(seed: int = SEED):
    """The 500 points and the thesis's 250/250 train/test split: ``(X_train, y_train, X_test, y_test)``.

    Two Gaussian clusters (means (-1, 1) and (2, 1), covariance 0.4 I, 250 points each); cluster 0's output is
    ``x0^2 + x0``, cluster 1's ``x1^2 + x1`` (the thesis's second formula has a typo the author's code settles).
    No observation noise.
    """
    rng = np.random.default_rng(seed)
    X1 = rng.multivariate_normal([-1.0, 1.0], 0.4 * np.eye(2), size=250)
    X2 = rng.multivariate_normal([2.0, 1.0], 0.4 * np.eye(2), size=250)
    X = np.concatenate([X1, X2])
    y = np.concatenate([X1[:, 0] ** 2 + X1[:, 0], X2[:, 1] ** 2 + X2[:, 1]])
    index = np.arange(500)
    np.random.RandomState(seed).shuffle(index)
    test, train = np.sort(index[:250]), np.sort(index[250:])
    return X[train], y[train], X[test], y[test]


def five_folds(n: int, seed: int = SEED):
    """``KFold(5, shuffle=True, random_state=seed)``'s test folds, as index arrays (spec sheet C, decision 7)."""
    index = np.arange(n)
    np.random.RandomState(seed).shuffle(index)
    sizes = np.full(5, n // 5)
    sizes[: n % 5] += 1
    return [np.sort(fold) for fold in np.split(index, np.cumsum(sizes)[:-1])]


def standardise(train, test):
    """Both scaled by the training mean and standard deviation (per column), and the two statistics."""
    mean, scale = train.mean(0), train.std(0)
    return (train - mean) / scale, (test - mean) / scale, mean, scale
