"""Predictions of the sequential sampler at new inputs of each step (Tegner et al. 2018, Fig. 2).

For state i of step t, ``f_t`` at new inputs is drawn from the GP conditional given that state's
``f_t`` and the ``window`` steps before it in its trajectory (the windowed prior of eq. 6, spec decision
15), at its hyperparameters. Step 1 conditions on ``f_1`` alone.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.errors import DataError
from gpdsl.inference import progress
from gpdsl.numerics.linalg import cholesky
from gpdsl.numerics import GP_JITTER


def check_step_inputs(view, X_new) -> np.ndarray:
    """New inputs as ``(T, m, D)``: one set of m points per step, D the columns of the model's inputs."""
    X_new = np.asarray(X_new, dtype=float)
    width = np.asarray(view.data[view.node.statement.inputs.components[1].name]).shape[-1] \
        if hasattr(view.node.statement.inputs.components[1], "name") else None
    if X_new.ndim == 2 and width == 1:
        X_new = X_new[..., None]
    if X_new.ndim != 3 or X_new.shape[0] != view.steps or X_new.shape[2] != width or not np.isfinite(X_new).all():
        raise DataError(f"new inputs of a sequential model must be finite, of shape ({view.steps}, m, {width}): m "
                        f"points for each of the {view.steps} steps; got shape {X_new.shape}")
    return X_new


def step_moments(view, t: int, window: int, thetas, fs: list, X_new):
    """Means ``(M, m)`` and covariances ``(M, m, m)`` of ``f_t`` at ``X_new`` (``(m, D)``), one per state of step
    ``t`` (from 1); ``fs`` holds each finished step's ``(M, n)`` states."""
    window = min(window, t - 1)
    functions = view.functions(window)
    data = {name: jnp.asarray(value) for name, value in view.window(t - 1 - window, t).items()}
    trajectories = jnp.asarray(np.concatenate([fs[s] for s in range(t - 1 - window, t)], axis=1))
    one = jax.jit(jax.vmap(lambda theta, f: functions.new_conditional(theta, data, f, jnp.asarray(X_new))))
    return one(jnp.asarray(thetas), trajectories)


def predict_steps(view, window: int, thetas: list, fs: list, X_new, rng_key) -> np.ndarray:
    """Draws of f at the new inputs of every step, ``(M, T, m)``: one per state. Each step moves the bar of the
    :func:`~gpdsl.inference.progress.stage` it runs in by one."""
    draws = []
    for t in range(1, view.steps + 1):
        means, covariances = step_moments(view, t, window, thetas[t - 1], fs, X_new[t - 1])
        eye = GP_JITTER * jnp.eye(means.shape[1])
        chols = jax.vmap(lambda c: cholesky(c + eye))(covariances)
        normals = jax.random.normal(jax.random.fold_in(rng_key, t), means.shape, jnp.float64)
        draws.append(np.asarray(means + jnp.einsum("kij,kj->ki", chols, normals)))
        progress.advance(1)
    return np.stack(draws, axis=1)
