"""The built-in priors: one :class:`Prior` object each, in one table.

Every consumer reads these objects: the checker's catalog (parameters, defaults, supports, docs), the
JAX lowering (log density), the simulator (sampling), the Stan backend (spelling) and the ESS-in-z-space
engine (which priors are Gaussian in z-space). Adding a prior is one object and one entry in
:data:`PRIORS`. Importing this package does not import JAX.
"""

from __future__ import annotations

from gpdsl.priors.base import Prior, StanArguments, ZSpace
from gpdsl.priors.bounded import SCALED_SIGMOID_NORMAL, UNIFORM
from gpdsl.priors.gamma import GAMMA, INV_GAMMA
from gpdsl.priors.normal import HALF_NORMAL, LOGNORMAL, NORMAL
from gpdsl.priors.student_t import STUDENT_T

__all__ = ["PRIORS", "Prior", "StanArguments", "ZSpace"]

PRIORS: dict[str, Prior] = {prior.name: prior for prior in [
    NORMAL,
    LOGNORMAL,
    GAMMA,
    INV_GAMMA,
    HALF_NORMAL,
    STUDENT_T,
    UNIFORM,
    SCALED_SIGMOID_NORMAL,
]}
"""Every built-in prior by name, in the order the docs and messages list them."""
