"""Simulated GP probit classification data as in Sec. 4.2 of Filippone & Girolami (2014).

Inputs are uniform in the unit hypercube ``[0, 1]^d``; the hyperparameters are drawn from the
paper's priors (``sigma ~ Gamma(1.2, rate 0.2)``, ``tau_i ~ Gamma(1, rate 1 / sqrt(d))``, as in
``models/gp_classification.gpm``), the latent values from ``f ~ N(0, sigma * rbf(tau))`` and the
labels from ``y_i ~ Bernoulli(Phi(f_i))``. "Data were selected to have an equal number of input
vectors in each class": a pool of ``pool_factor * n`` points is simulated and ``n / 2`` points of
each class are kept (a new pool is drawn, with the next key, when one class has too few points).

The draw goes through gpdsl's own forward simulation of the model file, so the data follow the
model exactly as the engines and Stan see it.

Usage::

    from case_studies.filippone2014.simulate_data import simulate_classification
    data, truth = simulate_classification(n=50, d=2, seed=1)
"""

from __future__ import annotations

from pathlib import Path

import gpdsl  # noqa: F401  (sets the BLAS thread variables before jax/numpy load BLAS)

import jax


import numpy as np  # noqa: E402

from gpdsl.api import load_model  # noqa: E402
from gpdsl.backends.jax.lowering import lower  # noqa: E402
from gpdsl.backends.jax.simulate import simulate  # noqa: E402

MODEL_PATH = Path(__file__).resolve().parents[2] / "models" / "gp_classification.gpm"


def simulate_classification(n: int, d: int = 2, seed: int = 0, pool_factor: int = 4,
                            max_attempts: int = 100, model_path: str | Path = MODEL_PATH) -> tuple[dict, dict]:
    """Balanced simulated data from the GP probit classification model.

    Parameters
    ----------
    n : int
        Number of data points kept (even; ``n / 2`` per class).
    d : int
        Number of covariates.
    seed : int
        Random seed; the same seed gives the same data.
    pool_factor : int
        Points simulated per point kept.
    max_attempts : int
        Pools drawn before giving up.
    model_path : str or Path
        The model file (its data block must be ``N``, ``D``, ``X``, ``y``).

    Returns
    -------
    data : dict
        ``{"N": n, "D": d, "X": (n, d) array, "y": (n,) int array}``, ready for the engines and Stan.
    truth : dict
        The drawn hyperparameters (``sigma``, ``tau``), the kept latent values ``f``, and
        ``attempts``, the number of pools drawn.

    Raises
    ------
    ValueError
        If ``n`` is odd or no pool had ``n / 2`` points of each class within ``max_attempts``.
    """
    if n % 2:
        raise ValueError(f"balanced classes need an even number of points, got n={n}")
    model = load_model(Path(model_path))
    rng = np.random.default_rng(seed)
    key = jax.random.PRNGKey(seed)
    pool = pool_factor * n
    for attempt in range(1, max_attempts + 1):
        X = rng.uniform(size=(pool, d))
        placeholder = {"N": pool, "D": d, "X": X, "y": np.zeros(pool, dtype=int)}
        key, sub = jax.random.split(key)
        drawn, observed = simulate(lower(model, placeholder, "centred", marginalise=False), sub)
        y = np.asarray(observed["y"]).astype(int)
        ones, zeros = np.flatnonzero(y == 1), np.flatnonzero(y == 0)
        if min(len(ones), len(zeros)) < n // 2:
            continue
        keep = np.sort(np.concatenate([rng.choice(ones, n // 2, replace=False),
                                       rng.choice(zeros, n // 2, replace=False)]))
        data = {"N": n, "D": d, "X": X[keep], "y": y[keep]}
        truth = {"sigma": float(drawn["sigma"]), "tau": np.asarray(drawn["tau"], dtype=float),
                 "f": np.asarray(drawn["f"])[keep], "attempts": attempt}
        return data, truth
    raise ValueError(f"no pool of {pool} points had {n // 2} points of each class in {max_attempts} attempts")


if __name__ == "__main__":
    for size in (50, 200):
        data, truth = simulate_classification(size, seed=1)
        print(f"n={size}: sigma={truth['sigma']:.3f} tau={np.round(truth['tau'], 3)} "
              f"class sizes={np.bincount(data['y'])} pools drawn={truth['attempts']}")
