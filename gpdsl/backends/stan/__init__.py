"""gpdsl.backends.stan."""
