"""Predictions per model family."""

import gpdsl.float64  # noqa: F401  (float64 before any array is made)
