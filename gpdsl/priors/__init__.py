"""The built-in priors: one :class:`Prior` object each, in one table.

Every consumer reads these objects: the checker's catalog (parameters, defaults, supports, docs), the
JAX lowering (log density), the simulator (sampling), the Stan backend (spelling) and the ESS-in-z-space
engine (which priors are Gaussian in z-space). Adding a prior is one object and one entry in
:data:`PRIORS`, or, from another package, one :func:`register_prior` call; every consumer reads the table
when it runs. Importing this package does not import JAX.
"""

from __future__ import annotations

from gpdsl.errors import ModelCheckError
from gpdsl.priors.base import Prior, StanArguments, ZSpace
from gpdsl.priors.bounded import SCALED_SIGMOID_NORMAL, UNIFORM
from gpdsl.priors.cauchy import BETA, CAUCHY
from gpdsl.priors.dirichlet import DIRICHLET
from gpdsl.priors.exponential import EXPONENTIAL, WEIBULL
from gpdsl.priors.gamma import GAMMA, INV_GAMMA
from gpdsl.priors.lkj import LKJ_CORR_CHOLESKY
from gpdsl.priors.normal import HALF_NORMAL, LOGNORMAL, NORMAL
from gpdsl.priors.student_t import STUDENT_T

__all__ = ["PRIORS", "Prior", "StanArguments", "ZSpace", "register_prior", "unregister_prior"]

PRIORS: dict[str, Prior] = {prior.name: prior for prior in [
    NORMAL,
    LOGNORMAL,
    GAMMA,
    INV_GAMMA,
    HALF_NORMAL,
    STUDENT_T,
    UNIFORM,
    SCALED_SIGMOID_NORMAL,
    EXPONENTIAL,
    WEIBULL,
    CAUCHY,
    BETA,
    LKJ_CORR_CHOLESKY,
    DIRICHLET,
]}
"""Every prior by name: the built-in ones in the order the docs and messages list them, then those added by
:func:`register_prior`."""


def register_prior(prior: Prior, replace: bool = False) -> Prior:
    """Add a prior to :data:`PRIORS` (plugins and tests).

    The checker's catalog, the JAX lowering, the simulator and the Stan code generator read the table when
    they run, so a model checked after this call may use ``x ~ <name>(...)`` on parameters and latent values.

    Parameters
    ----------
    prior : Prior
    replace : bool
        Allow replacing a prior of the same name.

    Returns
    -------
    Prior
        ``prior``.

    Raises
    ------
    ModelCheckError
        The name is taken (and ``replace`` is False).
    """
    if prior.name in PRIORS and not replace:
        raise ModelCheckError(f"a prior named '{prior.name}' is already registered")
    PRIORS[prior.name] = prior
    return prior


def unregister_prior(name: str) -> None:
    """Remove the prior ``name`` from :data:`PRIORS` (plugins and tests)."""
    PRIORS.pop(name, None)
