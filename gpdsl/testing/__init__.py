"""Testing utilities: simulation-based calibration."""

import gpdsl.numerics.float64  # noqa: F401  (float64 before any array is made)
