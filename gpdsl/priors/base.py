"""The prior object: everything gpdsl knows about one built-in prior distribution."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

StanArguments = Mapping[str, tuple[str, bool]]
"""Stan text of each parameter of a prior, and whether it has the variate's shape."""


@dataclass(frozen=True)
class ZSpace:
    """How the ESS-in-z-space engine uses a prior: Gaussian on gpdsl's unconstrained scale of a parameter.

    Parameters
    ----------
    bounds : {"unbounded", "positive", "bounds"}
        The bounds a parameter must have for its unconstrained coordinate ``z`` to be Gaussian under the
        prior: none, ``<lower=0>``, or a lower and an upper bound (the prior's own or declared ones).
    requirement : str
        Those bounds as the engine's advice names them (``"without bounds"``); empty when the prior
        implies them.
    mean, sd : str
        The parameters that are the mean and standard deviation of ``z``.
    """

    bounds: str
    requirement: str = ""
    mean: str = "mu"
    sd: str = "sigma"


@dataclass(frozen=True)
class Prior:
    """One built-in prior ``p(x | params)`` on parameters or latent values, with every fact its consumers use.

    Importing a prior does not import JAX (the checker and the Stan backend read these objects in processes
    that never import it); the JAX callables import it when called.

    Parameters
    ----------
    name : str
        Name in model files.
    params : tuple of str
        Parameter names in positional order.
    doc : str
        The density, as written in the docs.
    log_density : callable
        ``log_density(x, *params)``: ``log p(x | params)`` elementwise, in JAX.
    sample : callable
        ``sample(key, shape, *params)``: a JAX array of ``shape`` drawn with the PRNG ``key``.
    stan : callable
        ``stan(x, args, count)``: the Stan expression of ``sum log p(x | params)`` for the Stan text ``x``
        of the variate, with ``args`` as in :data:`StanArguments`; ``count`` is the Stan text of the number
        of elements of ``x`` when it is a container, None when it is a scalar.
    defaults : mapping
        Default values of optional parameters.
    support : {"real", "positive", "bounded", "cholesky_corr", "simplex"}
        Support of the variate; ``"bounded"`` takes its bounds from the ``lower`` and ``upper`` arguments;
        ``"cholesky_corr"`` and ``"simplex"`` are the priors of a whole structured parameter, whose
        ``log_density`` is that of the whole matrix or vector.
    arg_support : mapping
        Support of each parameter by name, a key of :data:`gpdsl.semantics.support.SUPPORTS`; a parameter
        not listed is real.
    ordered : tuple of str or None
        Two parameters that must be strictly increasing, elementwise (``("lower", "upper")``).
    z_space : ZSpace or None
        How the ESS-in-z-space engine uses the prior; None when it cannot.
    cdf : callable or None
        ``cdf(x, *params)``: ``P(X <= x)`` elementwise in JAX, for every real ``x`` (0 below the support, 1
        above). Draws truncated to a parameter's declared bounds invert it; without one they are rejection
        sampled (:mod:`gpdsl.backends.jax.truncated_draws`).
    centre : str or None
        The parameter the density is symmetric about (``mu`` of ``normal``); a parameter bounded at a constant
        centre (``real<lower=0> s ~ cauchy(0, 1)``) has the half-distribution as its prior, with no warning.
    """

    name: str
    params: tuple[str, ...]
    doc: str
    log_density: Callable
    sample: Callable
    stan: Callable[[str, StanArguments, str | None], str]
    defaults: Mapping[str, float] = field(default_factory=dict, hash=False)
    support: str = "real"
    arg_support: Mapping[str, str] = field(default_factory=dict, hash=False)
    ordered: tuple[str, str] | None = None
    z_space: ZSpace | None = None
    cdf: Callable | None = None
    centre: str | None = None

    @property
    def signature(self) -> str:
        """The prior as called in a model file with its parameters' names: ``normal(mu, sigma)``."""
        return f"{self.name}({', '.join(self.params)})"


def lpdf(function: str, x: str, values) -> str:
    """``<function>_lpdf(<x> | <values>)``: a Stan log density call on the texts ``values``."""
    return f"{function}_lpdf({x} | {', '.join(values)})"


def stan_lpdf(function: str, params: tuple[str, ...]) -> Callable[[str, StanArguments, str | None], str]:
    """The :attr:`Prior.stan` of a prior that Stan has as ``<function>_lpdf`` with parameters ``params``."""
    def stan(x: str, args: StanArguments, count: str | None) -> str:
        return lpdf(function, x, [args[p][0] for p in params])

    return stan
