"""Simulated data sets drawn through gpdsl's own forward simulation of a model (:mod:`gpdsl.backends.jax.simulate`).

:func:`simulate_classification` is the balanced GP probit classification data of Filippone & Girolami (2014,
Sec. 4.2), which the tests, the ``filippone2014`` case study and its benchmark share.
"""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np

from gpdsl.ir.nodes import Model


def simulate_classification(model: Model | str | Path, n: int, d: int = 2, seed: int = 0, pool_factor: int = 4,
                            max_attempts: int = 100) -> tuple[dict, dict]:
    """Balanced simulated data from a GP probit classification model (Filippone & Girolami 2014, Sec. 4.2).

    Inputs are uniform in the unit hypercube ``[0, 1]^d``; the hyperparameters are drawn from the model's
    priors (for ``models/gp_classification.gpm`` the paper's: ``sigma ~ Gamma(1.2, rate 0.2)``,
    ``tau_i ~ Gamma(1, rate 1 / sqrt(d))``), the latent values ``f`` from the model's GP and the labels from its
    likelihood, all by the model's forward simulation, so the data follow the model exactly as the engines and
    Stan see it. "Data were selected to have an equal number of input vectors in each class": a pool of
    ``pool_factor * n`` points is simulated and ``n / 2`` points of each class are kept (a new pool is drawn,
    with the next key, when one class has too few points).

    Parameters
    ----------
    model : Model, str or path
        The checked model, or a model file or text; its data block must be ``N``, ``D``, ``X``, ``y`` (0/1
        labels), e.g. ``models/gp_classification.gpm``.
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

    Returns
    -------
    data : dict
        ``{"N": n, "D": d, "X": (n, d) array, "y": (n,) int array}``, ready for the engines and Stan.
    truth : dict
        The drawn hyperparameters (``sigma``, ``tau``), the kept latent values ``f``, and ``attempts``, the
        number of pools drawn.

    Raises
    ------
    ValueError
        If ``n`` is odd or no pool had ``n / 2`` points of each class within ``max_attempts``.

    Examples
    --------
    >>> from gpdsl.testing.simulated_data import simulate_classification
    >>> data, truth = simulate_classification("models/gp_classification.gpm", n=50, d=2, seed=1)  # doctest: +SKIP
    """
    from gpdsl.api import load_model
    from gpdsl.backends.jax.lowering import lower
    from gpdsl.backends.jax.simulate import simulate

    if n % 2:
        raise ValueError(f"balanced classes need an even number of points, got n={n}")
    if not isinstance(model, Model):
        model = load_model(model)
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
