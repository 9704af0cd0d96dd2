"""JAX computes in float64 everywhere in gpdsl.

Each subpackage that computes with JAX imports this module first (``gpdsl.kernels``,
``gpdsl.inference``, ``gpdsl.backends.jax``, ``gpdsl.testing``, and the top-level ``linalg`` and
``special``), so the setting is made in this one place. It is kept out of ``gpdsl/__init__.py`` because
the PyStan worker process must never import JAX.
"""

import jax

jax.config.update("jax_enable_x64", True)
