"""gpdsl's own engines (JAX): samplers, approximations, variational methods, optimisers, predictions.

The methods the registry (:mod:`gpdsl.registry`) runs are in :mod:`gpdsl.inference.methods`.
"""
