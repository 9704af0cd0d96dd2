"""gpdsl.syntax."""
