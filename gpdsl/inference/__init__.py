"""gpdsl.inference."""
