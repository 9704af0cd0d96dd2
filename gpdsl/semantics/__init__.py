"""gpdsl.semantics."""
