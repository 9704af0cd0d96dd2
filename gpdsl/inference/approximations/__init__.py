"""Gaussian approximations of p(f | y, theta): Laplace and expectation propagation."""

import gpdsl.numerics.float64  # noqa: F401  (float64 before any array is made)
