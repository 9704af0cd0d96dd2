"""JAX computes in float64 everywhere in gpdsl.

Each package or module that computes with JAX imports this module first (``gpdsl.kernels``,
``gpdsl.backends.jax``, ``gpdsl.testing``, the engine subpackages of ``gpdsl.inference`` and its
``driver``, and the top-level ``linalg`` and ``special``), so the setting is made in this one place. It is
kept out of ``gpdsl/__init__.py`` and ``gpdsl.inference.methods`` because the PyStan worker must never
import JAX and the command line builds its flags without starting JAX.
"""

import jax

jax.config.update("jax_enable_x64", True)
