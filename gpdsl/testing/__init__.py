"""Testing utilities: simulation-based calibration (:mod:`~gpdsl.testing.sbc`), simulated data sets
(:mod:`~gpdsl.testing.simulated_data`) and example external likelihoods
(:mod:`~gpdsl.testing.external_likelihoods`)."""

import gpdsl.numerics.float64  # noqa: F401  (float64 before any array is made)
