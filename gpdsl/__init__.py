"""gpdsl: a modelling language for Gaussian-process hierarchies."""

__version__ = "0.1.0"
