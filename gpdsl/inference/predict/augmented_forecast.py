"""Iterative one-step-ahead forecasting with a sparse GP whose training set grows with its own predictions.

Damianou, Titsias & Lawrence (2016), Sec. 6.1 (vargplvm's ``vargplvmPredictUncertainK`` with ``k = 1``,
``augmentModel = true``): an autoregressive model on lag windows (newest first, as
:func:`~gpdsl.inference.predict.free_simulation.lag_matrix`) with inducing inputs ``Z``, fitted as a
Bayesian GPLVM whose training inputs are the known windows, forecasts a series step by step:

1. predict ``y`` at the current window ``q(x*) = N(means, diag(variances))`` by eqs. (40)-(41);
2. with ``augment``, add the pair (that window with its variances, the predicted mean) to the training
   set: its Psi statistics join the sums that define ``q(u)`` (eq. 39); nothing is re-optimised;
3. shift the window: the predicted mean enters at the front, with the predicted variance when
   ``propagate``, else with variance 0.

The three variants of Table 4: the variational GP-LVM (``augment`` and ``propagate``), Girard et al.'s
uncertain-input GP (``propagate`` only: predictions are discarded) and the naive autoregressive GP
(``augment`` only: predicted means join the training set as certain inputs). ``q(u)`` depends on the
data through ``Psi1^T Y`` and ``Psi2``, so a step costs ``O(M^3)`` whatever the size of the training set.
The loop is one ``jax.lax.scan``.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.errors import DataError
from gpdsl.inference.predict.free_simulation import FreeSimulation
from gpdsl.inference.predict.uncertain_inputs import (
    DEFAULT_JITTER,
    gaussian_input_moments,
    inducing_posterior,
    raise_not_positive_definite,
)
from gpdsl.kernels.psi import PsiMethod, psi_statistics


def augmented_forecast(kernel, noise_variance, Z, X_mean, X_variance, y, window, steps: int, *,
                       augment: bool = True, propagate: bool = True, psi: PsiMethod = PsiMethod(),
                       window_variance=0.0, seed: int = 0, jitter: float = DEFAULT_JITTER) -> FreeSimulation:
    """Forecast ``steps`` values from ``window`` (see the module docstring).

    Parameters
    ----------
    kernel : Kernel
        The fitted kernel over lag windows.
    noise_variance : float
        The fitted noise variance.
    Z : array_like, shape (M, L)
        Inducing inputs.
    X_mean, X_variance : array_like, shape (n, L)
        The training windows and their variances (``q(X)``; 0 for known inputs).
    y : array_like, shape (n,)
        Training targets.
    window : array_like, shape (L,)
        The last known window, newest value first.
    steps : int
        Number of values to forecast.
    augment, propagate : bool
        The variant (see the module docstring).
    psi : PsiMethod
        How the Psi statistics are computed (Monte Carlo draws afresh at every step, seeded by ``seed``).
    window_variance : float or array_like, shape (L,)
        Variances of the starting window.
    jitter : float
        Added to the diagonal of ``Kuu``.

    Returns
    -------
    FreeSimulation
        Means and variances of the forecast values (noise included).
    """
    X_mean, X_variance, Z = (np.atleast_2d(np.asarray(a, dtype=float)) for a in (X_mean, X_variance, Z))
    y = np.asarray(y, dtype=float).reshape(-1)
    window = np.asarray(window, dtype=float).reshape(-1)
    L = window.size
    if X_mean.shape != X_variance.shape or X_mean.shape != (y.size, L) or Z.shape[1] != L:
        raise DataError(f"the training windows and their variances must have shape (n, {L}) with n = {y.size} "
                        f"targets, and the inducing inputs {L} columns; got {X_mean.shape}, {X_variance.shape}, "
                        f"{Z.shape}")
    window_variance = np.broadcast_to(np.asarray(window_variance, dtype=float), (L,))
    means, variances = _forecast(kernel, jnp.asarray(noise_variance, dtype=float), jnp.asarray(Z),
                                 jnp.asarray(X_mean), jnp.asarray(X_variance), jnp.asarray(y), jnp.asarray(window),
                                 jnp.asarray(window_variance), jax.random.PRNGKey(seed), steps, bool(augment),
                                 bool(propagate), psi, jitter)
    means, variances = np.asarray(means), np.asarray(variances)
    if not (np.all(np.isfinite(means)) and np.all(np.isfinite(variances))):
        raise_not_positive_definite(jitter, float(noise_variance))
    return FreeSimulation(means, variances)


@partial(jax.jit, static_argnames=("steps", "augment", "propagate", "psi", "jitter"))
def _forecast(kernel, noise, Z, X_mean, X_variance, y, window, window_variance, key, steps, augment, propagate,
              psi, jitter):
    random = psi.kind == "monte_carlo"
    key, train_key = jax.random.split(key)
    train = psi_statistics(kernel, Z, X_mean, X_variance, psi, key=train_key if random else None)
    Kuu = kernel(Z)
    eye = jnp.eye(1)

    def step(carry, step_key):
        psi2, psi1_y, window_mean, window_var = carry
        # q(u) depends on the data only through Psi1^T y: pass it as one pseudo-row with target 1
        posterior = inducing_posterior(Kuu, psi1_y[None], psi2, eye, noise, jitter)
        stats = psi_statistics(kernel, Z, window_mean[None], window_var[None], psi,
                               key=step_key if random else None, row_weights=jnp.eye(1))
        mean, covariance = gaussian_input_moments(posterior, stats.psi0, stats.psi1, stats.psi2)
        mean, variance = mean[0, 0], jnp.maximum(covariance[0, 0, 0], 0.0)
        if augment:
            psi2, psi1_y = psi2 + stats.psi2[0], psi1_y + stats.psi1[0] * mean
        new_variance = variance if propagate else jnp.zeros(())
        shifted = (jnp.concatenate([mean[None], window_mean[:-1]]),
                   jnp.concatenate([new_variance[None], window_var[:-1]]))
        return (psi2, psi1_y) + shifted, (mean, variance)

    start = (train.psi2, train.psi1.T @ y, window, window_variance)
    _, (means, variances) = jax.lax.scan(step, start, jax.random.split(key, steps))
    return means, variances
