"""The likelihood object: everything gpdsl knows about one built-in observation model."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

StanArguments = Mapping[str, tuple[str, bool]]
"""Stan text of each parameter of a likelihood, and whether it has the variate's shape."""


@dataclass(frozen=True)
class Likelihood:
    """One built-in likelihood ``p(y | params)`` with every fact the checker, backends and engines use.

    Importing a likelihood does not import JAX (the checker and the Stan backend read these objects in
    processes that never import it); the JAX callables import it when called. A capability that a
    likelihood lacks is ``None``, and each consumer refuses such a likelihood with its own message.

    Parameters
    ----------
    name : str
        Name in model files.
    params : tuple of str
        Parameter names in positional order. The approximations take the first as the latent value
        ``f`` and need no other.
    support : {"real", "binary", "count"}
        Support of the observations.
    doc : str
        The density, as written in the docs.
    log_density : callable
        ``log_density(y, *params)``: ``log p(y | params)`` elementwise, in JAX.
    stan : callable or None
        ``stan(y, args, vectorised)``: the Stan expression of ``sum log p(y | params)`` for the Stan text
        ``y`` of the observations (a container if ``vectorised``), with ``args`` as in
        :data:`StanArguments`. Called with ``vectorised=False`` on one element it gives that element's log
        density (the pointwise ``log_lik`` of generated quantities).
    stan_rng : callable or None
        ``stan_rng(args)``: the Stan expression of one draw of an observation, for elementwise ``args`` as in
        :data:`StanArguments` (the replicates of generated quantities).
    sample : callable or None
        ``sample(key, shape, *params)``: a JAX array of observations of ``shape`` drawn with the PRNG
        ``key``.
    derivatives : callable or None
        ``derivatives(y, f)``: ``sum log p(y | f)``, its gradient in ``f`` and its negative second
        derivative ``W`` (elementwise), with ``y`` as floats: what the Laplace approximation's Newton
        steps use.
    tilted_moments : callable or None
        ``tilted_moments(y, cavity_mean, cavity_var)``: log normaliser, mean and variance of the tilted
        distribution ``p(y | f) N(f | cavity_mean, cavity_var)`` elementwise, with ``y`` as floats: what
        expectation propagation's site updates use.
    class_probability : callable or None
        ``class_probability(mean, var)``: ``p(y = 1)`` when ``f ~ N(mean, var)`` elementwise, the
        predictive probability of the approximations.
    param_support : mapping
        Support of each parameter by name (``{"sigma": "positive"}``), as the checker's catalog names
        supports; a parameter not listed is real.
    """

    name: str
    params: tuple[str, ...]
    support: str
    doc: str
    log_density: Callable
    stan: Callable[[str, StanArguments, bool], str] | None = None
    stan_rng: Callable[[StanArguments], str] | None = None
    sample: Callable | None = None
    derivatives: Callable | None = None
    tilted_moments: Callable | None = None
    class_probability: Callable | None = None
    param_support: Mapping[str, str] = field(default_factory=dict, hash=False)
