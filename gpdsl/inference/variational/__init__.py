"""Variational inference: the collapsed bound, q(X) and its KL, variational EM."""
