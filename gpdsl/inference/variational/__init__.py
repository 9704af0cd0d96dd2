"""Variational inference: the collapsed bound, q(X) and its KL, variational EM."""

import gpdsl.numerics.float64  # noqa: F401  (float64 before any array is made)
