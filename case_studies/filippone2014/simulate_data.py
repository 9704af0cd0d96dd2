"""Simulated GP probit classification data as in Sec. 4.2 of Filippone & Girolami (2014).

Inputs are uniform in the unit hypercube ``[0, 1]^d``; the hyperparameters are drawn from the
paper's priors (``sigma ~ Gamma(1.2, rate 0.2)``, ``tau_i ~ Gamma(1, rate 1 / sqrt(d))``, as in
``models/gp_classification.gpm``), the latent values from ``f ~ N(0, sigma * rbf(tau))`` and the
labels from ``y_i ~ Bernoulli(Phi(f_i))``. "Data were selected to have an equal number of input
vectors in each class": a pool of ``pool_factor * n`` points is simulated and ``n / 2`` points of
each class are kept (a new pool is drawn, with the next key, when one class has too few points).

The draw is :func:`gpdsl.testing.simulated_data.simulate_classification`, gpdsl's own forward simulation
of the model file, so the data follow the model exactly as the engines and Stan see it (the tests use
the same generator).

Usage::

    from case_studies.filippone2014.simulate_data import simulate_classification
    data, truth = simulate_classification(n=50, d=2, seed=1)
"""

from __future__ import annotations

from pathlib import Path

import gpdsl  # noqa: F401  (sets the BLAS thread variables before jax/numpy load BLAS)

import numpy as np  # noqa: E402

from gpdsl.testing import simulated_data  # noqa: E402

MODEL_PATH = Path(__file__).resolve().parents[2] / "models" / "gp_classification.gpm"


def simulate_classification(n: int, d: int = 2, seed: int = 0, pool_factor: int = 4,
                            max_attempts: int = 100, model_path: str | Path = MODEL_PATH) -> tuple[dict, dict]:
    """Balanced simulated data from ``models/gp_classification.gpm`` (or ``model_path``): ``(data, truth)`` of
    :func:`gpdsl.testing.simulated_data.simulate_classification`, which documents the arguments."""
    return simulated_data.simulate_classification(Path(model_path), n, d, seed=seed, pool_factor=pool_factor,
                                                  max_attempts=max_attempts)


if __name__ == "__main__":
    for size in (50, 200):
        data, truth = simulate_classification(size, seed=1)
        print(f"n={size}: sigma={truth['sigma']:.3f} tau={np.round(truth['tau'], 3)} "
              f"class sizes={np.bincount(data['y'])} pools drawn={truth['attempts']}")
