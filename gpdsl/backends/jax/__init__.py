"""gpdsl.backends.jax."""
