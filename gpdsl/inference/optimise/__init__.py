"""Optimisers: L-BFGS and type-II maximum likelihood on the EP marginal."""
