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
        Parameter names in positional order.
    support : {"real", "positive", "binary", "count", "ordinal"}
        Support of the observations (``"ordinal"``: labels ``1..K``).
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
        ``derivatives(y, f, *others)``: ``sum log p(y | f, others)``, its gradient in the latent argument
        ``f`` and its negative second derivative ``W`` (elementwise), with ``y`` as floats and ``others``
        the values of the other parameters in positional order: what the Laplace approximation's Newton
        steps use. Only a likelihood log-concave in ``f`` has them.
    tilted_moments : callable or None
        ``tilted_moments(y, cavity_mean, cavity_var, *others)``: log normaliser, mean and variance of the tilted
        distribution ``p(y | f, others) N(f | cavity_mean, cavity_var)`` elementwise, with ``y`` as floats and
        ``others`` as in ``derivatives``: what expectation propagation's site updates use. A likelihood given
        None gets them by adaptive Gauss-Hermite quadrature (:mod:`gpdsl.likelihoods.quadrature`), so every
        likelihood has them; closed forms (probit, normal) are exact.
    expected_log_density : callable or None
        ``expected_log_density(y, mean, var, *others)``: ``E[log p(y | f, others)]`` under ``f ~ N(mean, var)``
        elementwise, with ``y`` and ``others`` as in ``tilted_moments``: the data term of a sparse variational GP's
        bound. A likelihood given None gets it by Gauss-Hermite quadrature
        (:func:`~gpdsl.likelihoods.quadrature.quadrature_expected_log_density`); closed forms (normal, Poisson)
        are exact.
    class_probability : callable or None
        ``class_probability(mean, var)``: ``p(y = 1)`` when ``f ~ N(mean, var)`` elementwise, the
        predictive probability of the approximations.
    param_support : mapping
        Support of each parameter by name (``{"sigma": "positive"}``), as the checker's catalog names
        supports; a parameter not listed is real.
    latent : str or None
        The parameter that carries the latent GP value ``f`` (the approximations' argument); the first
        parameter when None.
    own_shape : tuple of str
        Parameters that are one vector shared by every observation (ordinal cutpoints), not scalars or
        the variate's shape.
    row_params : tuple of str
        Parameters that are a matrix with one row per observation (the ``matrix[N, K]`` logits of
        ``categorical_logit``): ``log_density`` gets the whole matrix and gives one value per row.
    integer_params : tuple of str
        Parameters that must be integer data (binomial trials).
    not_log_concave : str
        Why ``log p(y | f)`` is not concave in ``f``, for the Laplace approximation's refusal; empty for a
        log-concave likelihood.
    invalid_observations : callable or None
        ``invalid_observations(y, args) -> (mask, requirement)``: the observations (a NumPy array) that the
        likelihood gives zero probability, and what each must be, as in ``"a count from 0 to trials"``;
        ``args`` holds the value of each parameter that is data (else None), and zeros of the parameter's
        shape for each ``own_shape`` and ``row_params`` parameter.
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
    latent: str | None = None
    own_shape: tuple[str, ...] = ()
    row_params: tuple[str, ...] = ()
    integer_params: tuple[str, ...] = ()
    not_log_concave: str = ""
    invalid_observations: Callable | None = None
    expected_log_density: Callable | None = None

    def __post_init__(self):
        if self.row_params:
            return
        from gpdsl.likelihoods.quadrature import quadrature_expected_log_density, quadrature_tilted_moments

        if self.tilted_moments is None or getattr(self.tilted_moments, "by_quadrature", False):
            object.__setattr__(self, "tilted_moments", quadrature_tilted_moments(self))
        if self.expected_log_density is None or getattr(self.expected_log_density, "by_quadrature", False):
            object.__setattr__(self, "expected_log_density", quadrature_expected_log_density(self))

    @property
    def closed_form_tilted_moments(self) -> bool:
        """Whether :attr:`tilted_moments` is a closed form (not the quadrature default)."""
        return not getattr(self.tilted_moments, "by_quadrature", False)

    @property
    def placeholder(self) -> float:
        """A value in the support of the observations, which stands in for a missing one (whose term is then
        dropped): 1 for positive and ordinal observations, else 0."""
        return 1.0 if self.support in ("positive", "ordinal") else 0.0

    @property
    def latent_param(self) -> str:
        """The parameter that carries the latent value: ``latent``, or the first parameter."""
        return self.latent or self.params[0]

    @property
    def log_concave(self) -> bool:
        """Whether ``log p(y | f)`` is concave in the latent value (no :attr:`not_log_concave` reason)."""
        return not self.not_log_concave

    @property
    def other_params(self) -> tuple[str, ...]:
        """The parameters other than :attr:`latent_param`, in positional order (``derivatives``' ``others``)."""
        return tuple(p for p in self.params if p != self.latent_param)


def autodiff_derivatives(log_density, shared: tuple[int, ...] = ()):
    """``derivatives`` of a likelihood from its elementwise log density in ``f``, by ``jax.grad`` per element.

    Parameters
    ----------
    log_density : callable
        ``log_density(y, f, *others)``: the log density with the latent argument second.
    shared : tuple of int
        Positions in ``others`` of vectors shared by every element (not broadcast against ``f``).

    Returns
    -------
    callable
        ``derivatives(y, f, *others)`` as :class:`Likelihood` describes it.
    """
    def derivatives(y, f, *others):
        import jax
        import jax.numpy as jnp

        first = jax.grad(log_density, argnums=1)
        second = jax.grad(first, argnums=1)
        f = jnp.asarray(f, dtype=float)
        y = jnp.broadcast_to(y, f.shape)
        args = [o if i in shared else jnp.broadcast_to(o, f.shape) for i, o in enumerate(others)]
        axes = (0, 0, *(None if i in shared else 0 for i in range(len(others))))
        grad = jax.vmap(first, in_axes=axes)(y, f, *args)
        hess = jax.vmap(second, in_axes=axes)(y, f, *args)
        return jnp.sum(log_density(y, f, *others)), grad, -hess

    return derivatives


def count_check(y, args):
    """``invalid_observations`` of a count likelihood: negative counts."""
    return y < 0, "a non-negative count"


def template_spellings(function: str, params: tuple[str, ...]):
    """``stan`` and ``stan_rng`` of a likelihood whose Stan log pmf and sampler are template functions.

    The templates (``stan_templates/likelihoods.stan``) define ``<function>_lpmf`` for an ``int`` and scalar
    arguments and for an ``array[] int`` and vector arguments, and ``<function>_rng`` for scalar arguments; a
    vectorised call passes each shaped argument through ``to_vector`` and repeats each scalar one.

    Parameters
    ----------
    function : str
        The template functions' name without its suffix.
    params : tuple of str
        The likelihood's parameters in positional order.

    Returns
    -------
    tuple of callable
        ``stan`` and ``stan_rng`` as :class:`Likelihood` describes them.
    """
    def stan(y: str, args: StanArguments, vectorised: bool) -> str:
        values = [(f"to_vector({args[p][0]})" if args[p][1] else f"rep_vector({args[p][0]}, size({y}))")
                  if vectorised else args[p][0] for p in params]
        return f"{function}_lpmf({y} | {', '.join(values)})"

    def stan_rng(args: StanArguments) -> str:
        return f"{function}_rng({', '.join(args[p][0] for p in params)})"

    return stan, stan_rng
