"""Numerical constants shared by every backend and engine.

This module imports nothing, so the checker and the Stan backend (whose processes never import JAX)
can use it.
"""

GP_JITTER = 1e-8
"""Diagonal jitter added to every GP covariance matrix before it is factorised.

The JAX lowering, the generated Stan program and the inducing-point covariances of the variational
methods all add this constant, so that the backends share one log density; it is also the smallest
relative jitter of :func:`gpdsl.linalg.jitter_ladder`.
"""
