"""Data generators of the damianou2016_dynamics case study (the sinusoids of Gadd, Wade & Shah are
:func:`gpdsl.datasets.sinusoids`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Sequences:
    """Simulated sequences with the frames held out for reconstruction.

    Attributes
    ----------
    t, sequence : numpy.ndarray, shape (N,)
        Time in [0, 1] within each sequence and its label (1-based).
    X : numpy.ndarray, shape (N, Q)
        The true latent trajectories.
    Y : numpy.ndarray, shape (N, D)
        Noisy outputs.
    gap : numpy.ndarray of int
        Frames held out entirely (a run of consecutive frames in each sequence).
    partial : numpy.ndarray of int
        Frames held out with their last ``D // 2`` columns hidden.
    """

    t: np.ndarray
    sequence: np.ndarray
    X: np.ndarray
    Y: np.ndarray
    gap: np.ndarray
    partial: np.ndarray

    @property
    def train(self) -> np.ndarray:
        return np.setdiff1d(np.arange(len(self.t)), np.concatenate([self.gap, self.partial]))


def _rbf(a, b, lengthscale):
    a, b = np.atleast_2d(a.T).T, np.atleast_2d(b.T).T
    return np.exp(-0.5 * ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1) / lengthscale ** 2)


def simulate_sequences(sequences: int, frames: int, D: int, Q: int = 2, *, gap: int = 4, partial: int = 4,
                       time_lengthscale: float = 0.15, map_lengthscale: float = 1.0, noise_sd: float = 0.05,
                       seed: int = 0) -> Sequences:
    """Latent trajectories drawn from a GP over time per sequence, outputs from one GP map of them plus noise.

    Each sequence has ``frames`` frames at times ``linspace(0, 1, frames)``; ``gap`` consecutive frames
    from its middle are held out entirely and ``partial`` other frames (chosen at random, never the first
    or last) lose their last ``D // 2`` columns.
    """
    rng = np.random.default_rng(seed)
    times = np.linspace(0.0, 1.0, frames)
    K_t = _rbf(times, times, time_lengthscale) + 1e-8 * np.eye(frames)
    L_t = np.linalg.cholesky(K_t)
    X = np.concatenate([L_t @ rng.normal(size=(frames, Q)) for _ in range(sequences)])
    N = sequences * frames
    K_x = _rbf(X, X, map_lengthscale) + 1e-8 * np.eye(N)
    F = np.linalg.cholesky(K_x) @ rng.normal(size=(N, D))
    Y = F + noise_sd * rng.normal(size=(N, D))
    gaps, partials = [], []
    for s in range(sequences):
        start = s * frames + frames // 2 - gap // 2
        gaps.extend(range(start, start + gap))
        free = [s * frames + i for i in range(1, frames - 1) if s * frames + i not in gaps]
        partials.extend(rng.choice(free, size=partial, replace=False))
    return Sequences(np.tile(times, sequences), np.repeat(np.arange(1, sequences + 1), frames), X, Y,
                     np.asarray(sorted(gaps), dtype=int), np.asarray(sorted(partials), dtype=int))


@dataclass
class MissingInputs:
    """The simulated regression of Sec. 6.2.1: inputs, outputs and the split.

    Attributes
    ----------
    Z : numpy.ndarray, shape (N, Q)
        Inputs, standardised with the training rows' mean and s.d.
    Y : numpy.ndarray, shape (N, D)
        Outputs, standardised with the training rows' statistics.
    observed, partial, test : numpy.ndarray of int
        Rows with every input (``Z^o``), rows that lose inputs (``Z^u``), test rows (``Z_*``).
    """

    Z: np.ndarray
    Y: np.ndarray
    observed: np.ndarray
    partial: np.ndarray
    test: np.ndarray

    def with_missing(self, fraction: float, seed: int) -> np.ndarray:
        """Training inputs (observed rows, then partial rows) with each entry of the partial rows missing with
        probability ``fraction``."""
        rng = np.random.default_rng(seed)
        partial = self.Z[self.partial].copy()
        partial[rng.uniform(size=partial.shape) < fraction] = np.nan
        return np.vstack([self.Z[self.observed], partial])

    @property
    def train_outputs(self) -> np.ndarray:
        return self.Y[np.concatenate([self.observed, self.partial])]


def simulate_missing_inputs(N: int = 200, Q: int = 15, D: int = 5, observed: int = 40, partial: int = 60,
                            test: int = 100, seed: int = 2) -> MissingInputs:
    """The generator of vargplvm's ``demRegressionVargplvm2``: inputs are GP draws over time, outputs GP draws
    over the inputs.

    ``t = linspace(0, 6 pi, N)``; ``Q`` inputs drawn from a GP over ``t`` with GPmat's RBF of inverse width
    0.2 (``exp(-0.2 r^2 / 2)``); ``D`` outputs drawn from a GP over the inputs with inverse width 0.5, plus
    noise of variance 0.001; rows split at random into ``observed``, ``partial`` and ``test``; inputs and
    outputs standardised with the training rows' statistics.
    """
    rng = np.random.default_rng(seed)
    t = np.linspace(0.0, 3 * 2 * np.pi, N)
    K_t = _rbf(t, t, 1 / np.sqrt(0.2)) + 1e-8 * np.eye(N)
    Z = np.linalg.cholesky(K_t) @ rng.normal(size=(N, Q))
    K_z = _rbf(Z, Z, 1 / np.sqrt(0.5)) + 1e-8 * np.eye(N)
    Y = np.linalg.cholesky(K_z) @ rng.normal(size=(N, D)) + np.sqrt(0.001) * rng.normal(size=(N, D))
    rows = rng.permutation(N)
    observed_rows, partial_rows = rows[:observed], rows[observed:observed + partial]
    test_rows = rows[observed + partial:observed + partial + test]
    train = np.concatenate([observed_rows, partial_rows])
    Z = (Z - Z[train].mean(axis=0)) / Z[train].std(axis=0)
    Y = (Y - Y[train].mean(axis=0)) / Y[train].std(axis=0)
    return MissingInputs(Z, Y, observed_rows, partial_rows, test_rows)


def mackey_glass(length: int = 1201, *, alpha: float = 0.2, beta: float = 0.1, delay: float = 17.0,
                 exponent: float = 10.0, x0: float = 1.2, step: float = 0.1) -> np.ndarray:
    """The Mackey-Glass series of MATLAB's ``mgdata.dat`` (Jang's generator): values at t = 0, 1, ..., length - 1.

    ``dx/dt = -beta x(t) + alpha x(t - delay) / (1 + x(t - delay)^exponent)``, integrated by fourth-order
    Runge-Kutta with step 0.1 from ``x(0) = x0`` and ``x(t) = 0`` for ``t < 0``; the delayed value is held
    over each step (the history is only known on the grid).
    """
    per_unit = int(round(1 / step))
    lag = int(round(delay / step))
    total = (length - 1) * per_unit + 1
    x = np.zeros(total)
    x[0] = x0

    def rate(value, delayed):
        return -beta * value + alpha * delayed / (1 + delayed ** exponent)

    for i in range(total - 1):
        delayed = x[i - lag] if i >= lag else 0.0
        k1 = step * rate(x[i], delayed)
        k2 = step * rate(x[i] + k1 / 2, delayed)
        k3 = step * rate(x[i] + k2 / 2, delayed)
        k4 = step * rate(x[i] + k3, delayed)
        x[i + 1] = x[i] + (k1 + 2 * k2 + 2 * k3 + k4) / 6
    return x[::per_unit]

