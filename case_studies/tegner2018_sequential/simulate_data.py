"""The 3-D GP regression data of Tegner et al. (2018, Sec. 4.1), as the spec sheet reads it.

T steps equally spaced on [0, 1]; at each step N fresh inputs uniform on the unit square; one joint draw
of f over all T * N (t, x) points from the GP with the separable squared-exponential kernel
``sigma_f^2 exp(-|x - x'|^2 / (2 l_x^2) - (t - t')^2 / (2 l_t^2))`` (per-dimension l_x); then
``y_t = f_t + mu_f + noise``, noise s.d. ``sigma_y``. The length-scales are drawn from U(0, sqrt(10)), once,
with the seed; draws below 0.1 are redrawn (they make white noise; the spec's decision 6).
"""

from __future__ import annotations

import numpy as np

SIGMA_F, MU_F, SIGMA_Y = 1.0, 0.5, 0.3
KAPPA_MAX = (np.sqrt(10), np.sqrt(10), np.sqrt(10), 2.0)
ALPHA_MAX = (1.0, 1.0)


def lengthscales(rng) -> np.ndarray:
    """``(l_x1, l_x2, l_t)`` from U(0, sqrt(10)), each redrawn while below 0.1."""
    values = []
    for _ in range(3):
        value = 0.0
        while value < 0.1:
            value = rng.uniform(0, np.sqrt(10))
        values.append(value)
    return np.asarray(values)


def simulate(steps: int = 20, n: int = 200, seed: int = 2018) -> tuple[dict, dict]:
    """Data for ``models/sequential_latent_gp.gpm`` and the truth.

    Returns
    -------
    data : dict
        ``T``, ``N``, ``t`` (T,), ``X`` (T, N, 2), ``y`` (T, N).
    truth : dict
        ``f`` (T, N) without ``mu_f``, ``lengthscales`` (l_x1, l_x2, l_t), ``sigma_f``, ``mu_f``, ``sigma_y``,
        ``seed``.
    """
    rng = np.random.default_rng(seed)
    ell = lengthscales(rng)
    t = np.linspace(0, 1, steps)
    X = rng.uniform(0, 1, size=(steps, n, 2))
    points_x = X.reshape(-1, 2)
    points_t = np.repeat(t, n)
    distance = ((points_x[:, None, :] - points_x[None]) ** 2 / ell[:2] ** 2).sum(-1)
    distance += (points_t[:, None] - points_t[None]) ** 2 / ell[2] ** 2
    K = SIGMA_F ** 2 * np.exp(-0.5 * distance) + 1e-6 * np.eye(steps * n)
    f = (np.linalg.cholesky(K) @ rng.normal(size=steps * n)).reshape(steps, n)
    y = f + MU_F + SIGMA_Y * rng.normal(size=(steps, n))
    data = {"T": steps, "N": n, "t": t, "X": X, "y": y}
    truth = {"f": f, "lengthscales": ell, "sigma_f": SIGMA_F, "mu_f": MU_F, "sigma_y": SIGMA_Y, "seed": seed}
    return data, truth
