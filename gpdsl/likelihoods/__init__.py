"""The built-in likelihoods: one :class:`Likelihood` object each, in one registry.

Every consumer reads these objects: the checker's catalog (parameters, support, docs), the JAX
lowering (log density), the simulator (sampling), the Stan backend (spelling), the Laplace
approximation (derivatives), expectation propagation (tilted moments) and the predictions (class
probabilities). Adding a likelihood is one module and one entry in :data:`LIKELIHOODS`, or, from
another package, one :func:`register_likelihood` call; every consumer reads the table when it runs.
Importing this package does not import JAX.
"""

from __future__ import annotations

from gpdsl.errors import MethodError, ModelCheckError
from gpdsl.likelihoods.base import Likelihood, StanArguments
from gpdsl.likelihoods.bernoulli import BERNOULLI_LOGIT, BERNOULLI_PROBIT
from gpdsl.likelihoods.beta import BETA_LOGIT
from gpdsl.likelihoods.binomial import BINOMIAL_LOGIT
from gpdsl.likelihoods.categorical import CATEGORICAL_LOGIT
from gpdsl.likelihoods.censored import LOGNORMAL_CENSORED, NORMAL_CENSORED, WEIBULL_CENSORED
from gpdsl.likelihoods.gamma_log import GAMMA_LOG
from gpdsl.likelihoods.hurdle import HURDLE_POISSON_LOG
from gpdsl.likelihoods.neg_binomial import NEG_BINOMIAL_2_LOG
from gpdsl.likelihoods.normal import NORMAL
from gpdsl.likelihoods.ordered_logistic import ORDERED_LOGISTIC
from gpdsl.likelihoods.poisson import POISSON_LOG
from gpdsl.likelihoods.student_t import STUDENT_T
from gpdsl.likelihoods.zero_inflated import ZERO_INFLATED_NEG_BINOMIAL_2_LOG, ZERO_INFLATED_POISSON_LOG

__all__ = ["LIKELIHOODS", "Likelihood", "StanArguments", "capability", "register_likelihood", "require",
           "supporting", "unregister_likelihood"]

LIKELIHOODS: dict[str, Likelihood] = {likelihood.name: likelihood for likelihood in [
    NORMAL,
    STUDENT_T,
    BERNOULLI_PROBIT,
    BERNOULLI_LOGIT,
    POISSON_LOG,
    NEG_BINOMIAL_2_LOG,
    BINOMIAL_LOGIT,
    ORDERED_LOGISTIC,
    CATEGORICAL_LOGIT,
    GAMMA_LOG,
    ZERO_INFLATED_POISSON_LOG,
    ZERO_INFLATED_NEG_BINOMIAL_2_LOG,
    HURDLE_POISSON_LOG,
    BETA_LOGIT,
    NORMAL_CENSORED,
    LOGNORMAL_CENSORED,
    WEIBULL_CENSORED,
]}
"""Every likelihood by name: the built-in ones in the order the docs and messages list them, then those
added by :func:`register_likelihood`."""

RESERVED = ("external", "gp", "student_t_process")
"""Names the language gives another meaning in likelihood position."""


def register_likelihood(likelihood: Likelihood, replace: bool = False) -> Likelihood:
    """Add a likelihood to :data:`LIKELIHOODS` (plugins and tests).

    The checker's catalog, the JAX lowering, the simulator, the Stan code generator and the engines read the
    table when they run, so a model checked after this call may use ``y ~ <name>(...)``. A likelihood with the
    name and parameters of a prior is both, as ``normal`` is.

    Parameters
    ----------
    likelihood : Likelihood
    replace : bool
        Allow replacing a likelihood of the same name.

    Returns
    -------
    Likelihood
        ``likelihood``.

    Raises
    ------
    ModelCheckError
        The name is reserved, or taken (and ``replace`` is False).
    """
    if likelihood.name in RESERVED:
        raise ModelCheckError(f"'{likelihood.name}' is reserved in likelihood position")
    if likelihood.name in LIKELIHOODS and not replace:
        raise ModelCheckError(f"a likelihood named '{likelihood.name}' is already registered")
    LIKELIHOODS[likelihood.name] = likelihood
    return likelihood


def unregister_likelihood(name: str) -> None:
    """Remove the likelihood ``name`` from :data:`LIKELIHOODS` (plugins and tests)."""
    LIKELIHOODS.pop(name, None)

CAPABILITIES = ("stan", "stan_rng", "sample", "derivatives", "tilted_moments", "expected_log_density",
                "class_probability")
"""The optional fields of :class:`Likelihood`."""


def capability(name: str, field: str):
    """The callable ``field`` of the likelihood ``name``, or None if it lacks it or is not registered.

    Parameters
    ----------
    name : str
        A likelihood name (``"external"`` and unknown names give None).
    field : str
        One of :data:`CAPABILITIES`, or ``"log_density"``.

    Returns
    -------
    callable or None
    """
    likelihood = LIKELIHOODS.get(name)
    return None if likelihood is None else getattr(likelihood, field)


def supporting(field: str) -> tuple[str, ...]:
    """Names of the likelihoods that have the capability ``field``, in registry order."""
    return tuple(name for name, likelihood in LIKELIHOODS.items() if getattr(likelihood, field) is not None)


def require(name: str, field: str, method: str, what: str = "likelihood", hint: str = ""):
    """The callable ``field`` of the likelihood ``name`` for ``method``, which needs it.

    Parameters
    ----------
    name : str
        A likelihood name.
    field : str
        The capability the method needs (see :data:`CAPABILITIES`).
    method : str
        The method, as the message names it (e.g. ``"the Laplace approximation"``).
    what : str
        What ``name`` is, as the message names it.
    hint : str
        Appended to the message (what to use instead).

    Returns
    -------
    callable

    Raises
    ------
    MethodError
        ``"<method> supports <likelihoods with field>; <what> is <name>"`` when ``name`` lacks it.
    """
    found = capability(name, field)
    if found is None:
        names = supporting(field)
        listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
        raise MethodError(f"{method} supports {listed}; {what} is {name}{hint}")
    return found
