"""One view per model family: what its engines receive."""

import gpdsl.numerics.float64  # noqa: F401  (float64 before any array is made)
