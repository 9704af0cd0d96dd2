"""Markov chain samplers: elliptical slice sampling, hyperparameter updates, Gibbs, pseudo-marginal MH."""

import gpdsl.numerics.float64  # noqa: F401  (float64 before any array is made)
