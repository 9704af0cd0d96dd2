"""The surrogate noise S of SDSS from the likelihood's curvature (Tegner et al. 2018, spec decision 14).

Surrogate-data slice sampling (Murray & Adams 2010) is exact for any diagonal ``S`` that does not move with
``f`` during the update; it mixes well when ``N(g; f, S)`` resembles the likelihood in ``f``. For a Gaussian
likelihood that is the noise variance. For another (an option pricer, a count model) ``S_ii`` is the inverse of
the diagonal curvature of ``-log p(y | f)``, ``-d^2 log p / d f_i^2``, taken at a reference point fixed before
the chain (or the step's pass) starts, the curvature floored at ``1e-6`` where the likelihood is flat or not
log-concave in ``f_i``.

The curvature is a central second difference of the log likelihood along each coordinate: ``2 n + 1``
evaluations, batched, so it works the same for a JAX likelihood and for an external one that runs on the host
(whose log likelihood JAX cannot differentiate).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.errors import MethodError

CURVATURE_FLOOR = 1e-6
"""The smallest curvature kept: ``S_ii`` is at most ``1 / CURVATURE_FLOOR``."""


def curvature_surrogate_variance(log_likelihood: Callable, f, step: float = 1e-3,
                                 floor: float = CURVATURE_FLOOR) -> np.ndarray:
    """``S_ii = 1 / max(-d^2 log p(y | f) / d f_i^2, floor)`` at ``f``, by central second differences.

    Parameters
    ----------
    log_likelihood : callable
        ``f -> log p(y | f)`` (a scalar) at fixed hyperparameters.
    f : array_like, shape (n,)
        The reference point.
    step : float
        The difference step along each coordinate (f is on the scale of the GP, of order one).
    floor : float
        The smallest curvature kept.

    Returns
    -------
    numpy.ndarray, shape (n,)
        The diagonal of ``S``.

    Raises
    ------
    MethodError
        When the log likelihood is not finite at the reference point or next to it.
    """
    f = jnp.asarray(f, dtype=jnp.float64)
    shifts = step * jnp.eye(f.shape[0])
    points = jnp.concatenate([f[None], f + shifts, f - shifts])
    values = np.asarray(jax.jit(jax.vmap(log_likelihood))(points))
    if not np.isfinite(values).all():
        bad = int(np.flatnonzero(~np.isfinite(values))[0])
        where = "at the reference f" if bad == 0 else f"{step:g} away from it along f[{(bad - 1) % f.shape[0]}]"
        raise MethodError(f"the log likelihood is {values[bad]} {where}: the curvature surrogate of SDSS cannot be "
                          "formed", hint="give a fixed surrogate variance (surrogate = fixed) instead")
    centre, ahead, behind = values[0], values[1:f.shape[0] + 1], values[f.shape[0] + 1:]
    curvature = -(ahead - 2.0 * centre + behind) / step ** 2
    return 1.0 / np.maximum(curvature, floor)
