"""Joint draws at new inputs: a draw of ``f*`` from its full predictive covariance, in batches that fit in memory.

With ``joint``, ``f*`` at the m new points is drawn from ``N(mean*, Sigma*)`` given each posterior draw, so curves,
integrals and maxima of ``f*`` have the right law; with ``marginal`` each point is drawn from its own
``N(mean*_j, Sigma*_jj)``, O(m) instead of O(m^3) per draw. Which one a run makes is chosen by
:meth:`gpdsl.registry.Method.predictive_choice` (``--predictive``; joint below 2,000 new points by default).
"""

from __future__ import annotations

import jax
import numpy as np

from gpdsl.errors import NumericalError
from gpdsl.numerics.linalg import cholesky_with_jitter

_BATCH_ENTRIES = 2 ** 25
"""Entries of the m x m matrices one compiled batch of draws may hold (about 256 MB each)."""


def draw_batch(points: int) -> int:
    """Draws per compiled batch when each holds m x m matrices (m = ``points``)."""
    return int(max(1, min(256, _BATCH_ENTRIES // max(points * points, 1))))


def joint_normal(key, mean, covariance) -> jax.Array:
    """One draw of ``N(mean, covariance)`` (traceable): the covariance symmetrised and factorised with jitter
    relative to its mean variance only where needed (:func:`~gpdsl.numerics.linalg.cholesky_with_jitter`: a
    predictive covariance can be far smaller than the prior's, so no absolute jitter); NaN where even that fails
    (:func:`check_draws`)."""
    factor, _ = cholesky_with_jitter(0.5 * (covariance + covariance.T))
    return mean + factor @ jax.random.normal(key, mean.shape)


def check_draws(values, name: str) -> None:
    """Raise a :class:`~gpdsl.errors.NumericalError` when joint draws of ``name`` are not finite (a predictive
    covariance not positive definite even with jitter)."""
    if not np.all(np.isfinite(values)):
        raise NumericalError(f"joint draws of {name} at the new inputs are not finite: the predictive covariance "
                             "is not positive definite even with jitter",
                             hint="use --predictive marginal, or fewer or more widely spaced new inputs")
