"""Initial inducing inputs of sparse GPs: k-means centres of the training inputs, or a random subset of them.

``"kmeans"`` runs Lloyd's algorithm from a k-means++ start (Arthur & Vassilvitskii 2007) until no
point changes cluster, at most ``max_iterations`` rounds; an emptied cluster takes the point farthest
from its centre. Beyond :data:`KMEANS_ROWS` training inputs it clusters a seeded random subset of that many
(a start for the optimiser, which moves the inducing inputs anyway: at 100,000 rows of 10 columns the whole
data took 11 s against 2 s for the subset). ``"random"`` takes ``M`` distinct training inputs (GPy's ``SparseGPRegression`` default).
Both are seeded, so a fit repeats.
"""

from __future__ import annotations

import numpy as np

from gpdsl.errors import MethodError

RULES = ("kmeans", "random")
KMEANS_ROWS = 20_000


def initial_inducing_inputs(X, num_inducing: int, rule: str = "kmeans", seed: int = 0,
                            max_iterations: int = 100) -> np.ndarray:
    """``num_inducing`` initial inducing inputs for training inputs ``X``.

    Parameters
    ----------
    X : array_like, shape (n, d)
    num_inducing : int
        ``M``, between 1 and ``n``.
    rule : {"kmeans", "random"}
    seed : int
    max_iterations : int
        Lloyd rounds of ``"kmeans"``.

    Returns
    -------
    numpy.ndarray, shape (M, d)

    Raises
    ------
    MethodError
        ``num_inducing`` outside ``1..n`` or an unknown rule.
    """
    X = np.asarray(X, dtype=float)
    X = X[:, None] if X.ndim == 1 else X
    n = X.shape[0]
    if not 1 <= num_inducing <= n:
        raise MethodError(f"num_inducing must be between 1 and N = {n}; got {num_inducing}")
    rng = np.random.default_rng(seed)
    if rule == "random":
        return X[np.sort(rng.permutation(n)[:num_inducing])].copy()
    if rule == "kmeans":
        rows = X if n <= KMEANS_ROWS else X[np.sort(rng.choice(n, KMEANS_ROWS, replace=False))]
        return kmeans(rows, num_inducing, rng, max_iterations)
    raise MethodError(f"unknown inducing-input initialisation '{rule}'; use one of {', '.join(RULES)}")


def kmeans(X: np.ndarray, k: int, rng: np.random.Generator, max_iterations: int = 100) -> np.ndarray:
    """Centres of ``k`` clusters of the rows of ``X`` (k-means++ start, then Lloyd's rounds)."""
    centres = _kmeans_plus_plus(X, k, rng)
    row_norms = np.sum(X ** 2, axis=1)
    labels = None
    for _ in range(max_iterations):
        shifted = np.sum(centres ** 2, axis=1)[None, :] - 2.0 * (X @ centres.T)  # |x - c|^2 less |x|^2
        new_labels = np.argmin(shifted, axis=1)
        if labels is not None and np.array_equal(new_labels, labels):
            break
        labels = new_labels
        counts = np.bincount(labels, minlength=k)
        sums = np.stack([np.bincount(labels, weights=column, minlength=k) for column in X.T], axis=1)
        filled = counts > 0
        centres[filled] = sums[filled] / counts[filled, None]
        nearest = np.maximum(row_norms + shifted[np.arange(X.shape[0]), labels], 0.0)
        for cluster in np.flatnonzero(~filled):
            farthest = int(np.argmax(nearest))
            centres[cluster], nearest[farthest] = X[farthest], 0.0
    return centres


def _kmeans_plus_plus(X: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    n = X.shape[0]
    chosen = [int(rng.integers(n))]
    nearest = _squared_distances(X, X[chosen])[:, 0]
    for _ in range(1, k):
        total = nearest.sum()
        index = int(rng.choice(n, p=nearest / total)) if total > 0 else int(rng.integers(n))
        chosen.append(index)
        nearest = np.minimum(nearest, _squared_distances(X, X[index:index + 1])[:, 0])
    return X[chosen].copy()


def _squared_distances(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    return np.maximum(np.sum(A ** 2, 1)[:, None] - 2 * A @ B.T + np.sum(B ** 2, 1)[None, :], 0.0)
