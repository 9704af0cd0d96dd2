"""Free simulation (iterated multi-step-ahead prediction) of a GP-NARX model.

A GP regression of ``y[t+1]`` on the lag vector ``x_t = (y[t], y[t-1], ..., y[t-L+1])`` (newest first,
:func:`lag_matrix`) is run forward from one window by feeding its predictions back as inputs
(de Souza 2020, Sec. 3.4.2; Girard et al. 2003):

* ``feedback="mean"`` (the naive GP-NARX): the exact GP predictive at the window of predicted means;
* ``feedback="gaussian"``: the window is a diagonal Gaussian ``q(x*)`` of predicted means and
  variances, and the prediction is eqs. (40)-(41) of Damianou et al. (2016) with the training inputs as
  inducing inputs and ``q(X) = N(X, diag(training_variance))``; the Psi statistics come from any
  :class:`~gpdsl.kernels.psi.PsiMethod`. Monte Carlo draws the test statistics afresh at every step
  and the training statistics once per run, or at every step with ``resample_training`` (as de
  Souza's GPflow graph does; with 4096 draws of 48 training points that costs seconds per step).

After each step the window shifts: the new prediction enters at the front and the oldest lag leaves
(means and variances alike). The loop is a ``jax.lax.scan`` over chunks of :data:`CHUNK` steps, compiled once per
shape and rule; a prediction that is not finite stops it at the end of its chunk, naming its step.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.errors import DataError, MethodError, NumericalError
from gpdsl.inference.predict.gp_regression import exact_moments, exact_posterior
from gpdsl.inference.predict.uncertain_inputs import (DEFAULT_JITTER, predictive_moments,
                                                      raise_not_positive_definite, training_posterior)
from gpdsl.kernels.psi import PsiMethod

FEEDBACKS = ("mean", "gaussian")
CHUNK = 1000
"""Steps per compiled scan: the simulation stops at the first chunk whose predictions are not finite."""


class FreeSimulation(NamedTuple):
    """Predictions of a free simulation, one per step.

    Attributes
    ----------
    mean : numpy.ndarray, shape (steps,)
    variance : numpy.ndarray, shape (steps,)
        Of ``y`` (noise included) unless asked otherwise.
    """

    mean: np.ndarray
    variance: np.ndarray


def lag_matrix(series, lag: int) -> tuple[np.ndarray, np.ndarray]:
    """The NARX embedding of a series: lag vectors (newest first) and the next value.

    Parameters
    ----------
    series : array_like, shape (n,)
    lag : int
        Window length ``L``.

    Returns
    -------
    X : numpy.ndarray, shape (n - L, L)
        Row ``i`` is ``(y[t], y[t-1], ..., y[t-L+1])`` with ``t = i + L - 1``.
    y : numpy.ndarray, shape (n - L,)
        ``y[t + 1]``.

    Raises
    ------
    DataError
        The series is not a finite vector longer than ``lag``, or ``lag`` is not a positive integer.
    """
    series = np.asarray(series, dtype=float)
    if isinstance(lag, bool) or not isinstance(lag, (int, np.integer)) or lag < 1:
        raise DataError(f"the lag must be a positive integer; got {lag!r}")
    if series.ndim != 1 or not np.all(np.isfinite(series)):
        raise DataError(f"the series must be a finite vector; got shape {series.shape}"
                        + ("" if series.ndim != 1 else " with non-finite values"))
    if series.size <= lag:
        raise DataError(f"a series of {series.size} values has no lag vector of length {lag} with a next value")
    n = series.size - lag
    X = np.stack([series[lag - 1 - j: lag - 1 - j + n] for j in range(lag)], axis=1)
    return X, series[lag:].copy()


def simulate(kernel, noise_variance, X, y, window, steps: int, *, feedback: str = "gaussian",
             psi: PsiMethod = PsiMethod("unscented"), window_variance=None, training_variance=None, seed: int = 0,
             resample_training: bool = False, include_noise: bool = True,
             jitter: float = DEFAULT_JITTER) -> FreeSimulation:
    """Free simulation of a GP regression on lag vectors (see the module docstring).

    Parameters
    ----------
    kernel : Kernel
        The GP's kernel over lag vectors.
    noise_variance : float
        Its noise variance ``s^2``.
    X : array_like, shape (n, L)
        Training lag vectors (newest lag first).
    y : array_like, shape (n,)
        Training targets.
    window : array_like, shape (L,)
        The lag vector the simulation starts from.
    steps : int
        Number of predictions.
    feedback : {"mean", "gaussian"}
        Feed back the predictive means only, or means and variances.
    psi : PsiMethod
        Psi-statistic rule for ``"gaussian"``.
    window_variance : float or array_like, shape (L,), optional
        Variances of the starting window (``"gaussian"``); the noise variance by default.
    training_variance : float or array_like, shape (n, L), optional
        Variances of ``q(X)`` around the training inputs (``"gaussian"``); the noise variance by default
        (de Souza's thesis; his code keeps 1e-6).
    seed : int
        Seed of the Monte Carlo draws.
    resample_training : bool
        Monte Carlo: redraw the training statistics at every step (else once per run).
    include_noise : bool
        Predict (and feed back) ``y`` (True) or ``f``.
    jitter : float
        Added to ``Kuu`` (``"gaussian"``).

    Returns
    -------
    FreeSimulation

    Raises
    ------
    MethodError
        Unknown ``feedback``, or ``steps`` not a positive integer.
    DataError
        Shapes that do not fit together, non-finite or negative values.
    NumericalError
        A factorisation failed (the predictions are not finite).
    """
    if feedback not in FEEDBACKS:
        raise MethodError(f"unknown feedback {feedback!r}; use one of {', '.join(FEEDBACKS)}")
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
        raise MethodError(f"the number of steps must be a positive integer; got {steps!r}")
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float).reshape(-1)
    window = np.asarray(window, dtype=float).reshape(-1)
    if X.ndim != 2 or X.shape[0] != y.size or window.size != X.shape[1]:
        raise DataError(f"training lag vectors (n, L), targets (n,) and a window (L,) are needed; got X {X.shape}, "
                        f"y {y.shape}, window {window.shape}")
    noise = float(noise_variance)
    window_variance = _variances("window_variance", noise if window_variance is None else window_variance,
                                 window.shape)
    training_variance = _variances("training_variance", noise if training_variance is None else training_variance,
                                   X.shape)
    if not (np.all(np.isfinite(X)) and np.all(np.isfinite(y)) and np.all(np.isfinite(window))):
        raise DataError("the training data and the window must be finite")
    key = jax.random.PRNGKey(seed)
    first_key = None
    if feedback == "gaussian":
        key, first_key = jax.random.split(key)
    keys = jax.random.split(key, steps)
    carry, means, variances = (jnp.asarray(window), jnp.asarray(window_variance)), [], []
    for start in range(0, steps, CHUNK):
        carry, chunk_means, chunk_variances = _simulate(
            kernel, jnp.asarray(noise), X, y, carry, training_variance, first_key, keys[start:start + CHUNK],
            feedback, psi, bool(resample_training), include_noise, jitter)
        means.append(np.asarray(chunk_means))
        variances.append(np.asarray(chunk_variances))
        finite = np.isfinite(means[-1]) & np.isfinite(variances[-1])
        if not finite.all():
            _raise_not_finite(start + int(np.argmin(finite)) + 1, steps, feedback, noise, jitter)
    return FreeSimulation(np.concatenate(means), np.concatenate(variances))


def _raise_not_finite(step: int, steps: int, feedback: str, noise: float, jitter: float) -> None:
    """The error of a prediction that is not finite, at its step (the simulation stops there)."""
    where = f"the free simulation is not finite from step {step} of {steps}"
    if feedback == "mean":
        raise NumericalError(f"{where}: K + s^2 I (s^2 = {noise:.3g}) is not numerically positive definite")
    try:
        raise_not_positive_definite(jitter, noise)
    except NumericalError as error:
        raise NumericalError(f"{where}: {error.message.removeprefix('the prediction is not finite: ')}",
                             hint=error.hint) from None


def free_simulation(fit, window, steps: int, **options) -> FreeSimulation:
    """:func:`simulate` with the kernel, noise variance and training data of a fitted GP regression.

    Parameters
    ----------
    fit : GPRegressionFit
        A fit on lag vectors (:func:`lag_matrix`), e.g. by the ``ml`` method.
    window, steps, **options
        As in :func:`simulate`.
    """
    return simulate(fit.kernel(), fit.noise_variance(), fit.inputs(), fit.problem.y, window, steps, **options)


@partial(jax.jit, static_argnames=("feedback", "psi", "resample_training", "include_noise", "jitter"))
def _simulate(kernel, noise, X, y, carry, training_variance, first_key, step_keys, feedback, psi,
              resample_training, include_noise, jitter):
    """One chunk of the simulation: a scan over ``step_keys`` from the window ``carry``."""
    if feedback == "mean":
        exact = exact_posterior(kernel, X, y, noise)

        def predict(window_mean, window_var, step_key):
            mean, variance = exact_moments(exact, kernel, X, window_mean[None], include_noise)
            return mean[0], variance[0]
    else:
        random = psi.kind == "monte_carlo"

        def posterior(train_key):
            return training_posterior(kernel, noise, X, X, training_variance, y[:, None], psi,
                                      train_key if random else None, jitter)

        fixed = posterior(first_key)

        def predict(window_mean, window_var, step_key):
            train_key, test_key = jax.random.split(step_key) if random else (None, None)
            current = posterior(train_key) if random and resample_training else fixed
            mean, covariance = predictive_moments(current, kernel, X, window_mean[None], window_var[None], psi,
                                                  test_key, include_noise)
            return mean[0, 0], covariance[0, 0, 0]

    def step(carry, step_key):
        window_mean, window_var = carry
        mean, variance = predict(window_mean, window_var, step_key)
        shifted = (jnp.concatenate([mean[None], window_mean[:-1]]),
                   jnp.concatenate([jnp.maximum(variance, 0.0)[None], window_var[:-1]]))
        return shifted, (mean, variance)

    carry, (means, variances) = jax.lax.scan(step, carry, step_keys)
    return carry, means, variances


def _variances(name: str, value, shape) -> np.ndarray:
    value = np.asarray(value, dtype=float)
    try:
        value = np.broadcast_to(value, shape).astype(float)
    except ValueError:
        raise DataError(f"{name} must be a scalar or have shape {shape}; got {value.shape}") from None
    if not np.all(np.isfinite(value)) or (value < 0).any():
        raise DataError(f"{name} must be finite and non-negative")
    return value
