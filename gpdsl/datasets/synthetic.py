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
