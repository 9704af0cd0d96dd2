"""Numerical constants shared by every backend and engine.

This module imports nothing, so the checker and the Stan backend (whose processes never import JAX)
can use it.
"""

GP_JITTER = 1e-8
"""Diagonal jitter added to every GP covariance matrix before it is factorised.

The JAX lowering, the generated Stan program and the inducing-point covariances of the variational
methods all add this constant, so that the backends share one log density; it is also the smallest
relative jitter of :func:`gpdsl.numerics.linalg.jitter_ladder`.
"""

CHOLESKY_JITTER_CEILING = 1e-6
"""Largest relative jitter (times the mean diagonal) of :func:`gpdsl.numerics.linalg.jitter_ladder`.

GPy's ``jitchol`` starts at this multiple; the ladder climbs from ``GP_JITTER`` and stops there, so an
escalated factor is never perturbed more than GPy's first try perturbs it.
"""

GPFLOW_JITTER = 1e-6
"""GPflow's default jitter (``gpflow.settings.jitter``), on ``K(Z)`` where a method follows GPflow code.

The reference implementations keep it: Salimbeni & Deisenroth's deep GP, de Souza's deep Mahalanobis GP
and GPflow's predictive at uncertain inputs.
"""
