"""Simulated benchmark data from the papers' generators (no download)."""

from __future__ import annotations

import numpy as np


def sinusoids(N: int = 30, frequencies=(1, 1, 1, 1, 1, 1), noise_sd: float = 0.05, seed: int = 0,
              amplitude_seed: int = 0):
    """Gadd, Wade & Shah's (2021) sinusoidal data (their eq. 11), for the supervised GPLVM.

    ``x`` on ``linspace(0, 4 pi, N)``; outputs ``zeta_d cos(F_d x)`` (d = 1..3) and ``zeta_d sin(F_d x)``
    (d = 4..6) plus Gaussian noise; the amplitudes ``zeta_d ~ U(0, 1)`` are drawn once with ``amplitude_seed``.

    Parameters
    ----------
    N : int
        Number of points.
    frequencies : sequence of 6 floats
        ``F_1, ..., F_6`` (the paper's case 1 is all ones).
    noise_sd : float
        Standard deviation of the noise.
    seed : int
        Seed of the noise.
    amplitude_seed : int
        Seed of the amplitudes (shared by every ``N`` and case).

    Returns
    -------
    x : numpy.ndarray, shape (N,)
        The inputs.
    Y : numpy.ndarray, shape (N, 6)
        The noisy outputs.
    f : callable
        The noise-free function, ``f(x) -> (n, 6)``.

    Examples
    --------
    >>> from gpdsl.datasets import sinusoids
    >>> x, Y, f = sinusoids(30)
    >>> Y.shape
    (30, 6)
    """
    zeta = np.random.default_rng(amplitude_seed).uniform(size=6)
    F = np.asarray(frequencies, dtype=float)

    def f(x):
        x = np.asarray(x, dtype=float)[:, None]
        return np.concatenate([zeta[:3] * np.cos(F[:3] * x), zeta[3:] * np.sin(F[3:] * x)], axis=1)

    x = np.linspace(0.0, 4 * np.pi, N)
    Y = f(x) + noise_sd * np.random.default_rng(seed).normal(size=(N, 6))
    return x, Y, f


TEGNER_SIGMA_F, TEGNER_MU_F, TEGNER_SIGMA_Y = 1.0, 0.5, 0.3
"""The true ``sigma_f``, ``mu_f`` and ``sigma_y`` of :func:`tegner_sequential` (Tegner et al. 2018, Sec. 4.1)."""


def tegner_sequential(steps: int = 20, n: int = 200, seed: int = 2018) -> tuple[dict, dict]:
    """Tegner, Bloem-Reddy & Roberts's (2018, Sec. 4.1) 3-D GP regression data, for sequential sampling.

    ``steps`` times equally spaced on [0, 1]; at each, ``n`` fresh inputs uniform on the unit square; one joint
    draw of ``f`` over all ``steps * n`` points ``(t, x)`` from the GP with the separable squared-exponential
    kernel ``sigma_f^2 exp(-|x - x'|^2 / (2 l_x^2) - (t - t')^2 / (2 l_t^2))`` (one ``l_x`` per dimension);
    then ``y_t = f_t + mu_f + noise`` with noise sd ``sigma_y`` (:data:`TEGNER_SIGMA_F`, :data:`TEGNER_MU_F`,
    :data:`TEGNER_SIGMA_Y`). The length-scales ``(l_x1, l_x2, l_t)`` are drawn from U(0, sqrt 10) with the seed,
    a draw below 0.1 redrawn (it would make white noise). The data of ``models/sequential_latent_gp.gpm``;
    ``gpdsl data tegner_sequential --steps T --rows N --seed S -o FILE.json`` writes them.

    Parameters
    ----------
    steps : int
        Number of time steps ``T``.
    n : int
        Inputs per step ``N``.
    seed : int
        Seed of the length-scales, inputs, ``f`` and noise (the same seed gives the same data).

    Returns
    -------
    data : dict
        ``T``, ``N``, ``t`` (T,), ``X`` (T, N, 2), ``y`` (T, N).
    truth : dict
        ``f`` (T, N) without ``mu_f``, ``lengthscales`` ``(l_x1, l_x2, l_t)``, ``sigma_f``, ``mu_f``,
        ``sigma_y``, ``seed``.

    Examples
    --------
    >>> from gpdsl.datasets import tegner_sequential
    >>> data, truth = tegner_sequential(steps=3, n=10, seed=1)
    >>> data["X"].shape, data["y"].shape
    ((3, 10, 2), (3, 10))
    """
    rng = np.random.default_rng(seed)
    ell = []
    for _ in range(3):
        value = 0.0
        while value < 0.1:
            value = rng.uniform(0, np.sqrt(10))
        ell.append(value)
    ell = np.asarray(ell)
    t = np.linspace(0, 1, steps)
    X = rng.uniform(0, 1, size=(steps, n, 2))
    points_x = X.reshape(-1, 2)
    points_t = np.repeat(t, n)
    distance = ((points_x[:, None, :] - points_x[None]) ** 2 / ell[:2] ** 2).sum(-1)
    distance += (points_t[:, None] - points_t[None]) ** 2 / ell[2] ** 2
    K = TEGNER_SIGMA_F ** 2 * np.exp(-0.5 * distance) + 1e-6 * np.eye(steps * n)
    f = (np.linalg.cholesky(K) @ rng.normal(size=steps * n)).reshape(steps, n)
    y = f + TEGNER_MU_F + TEGNER_SIGMA_Y * rng.normal(size=(steps, n))
    data = {"T": steps, "N": n, "t": t, "X": X, "y": y}
    truth = {"f": f, "lengthscales": ell, "sigma_f": TEGNER_SIGMA_F, "mu_f": TEGNER_MU_F,
             "sigma_y": TEGNER_SIGMA_Y, "seed": seed}
    return data, truth
