"""gpdsl.backends."""
