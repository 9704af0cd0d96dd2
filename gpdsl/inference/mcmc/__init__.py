"""Markov chain samplers: elliptical slice sampling, hyperparameter updates, Gibbs, pseudo-marginal MH."""
