"""Optimisers: L-BFGS and type-II maximum likelihood on the EP marginal."""

import gpdsl.numerics.float64  # noqa: F401  (float64 before any array is made)
