"""Draws of a prior restricted to the declared bounds of its variable (``<lower=a, upper=b>``).

``real<lower=0> alpha ~ normal(0, 2)`` is a half-normal: the model's density is the prior's restricted to the
bounds, so forward simulation, and with it every chain's starting point, draws from that restriction. A prior
with a :attr:`~gpdsl.priors.Prior.cdf` is inverted: ``u`` uniform between ``F(a)`` and ``F(b)``, then the ``x``
with ``F(x) = u`` by bisection along the variable's unconstrained coordinate. A prior without one is drawn
:data:`REJECTION_ROUNDS` times and the first draw inside the bounds kept. Where that finds nothing (the bounds
hold no mass in floating point, or no draw fell inside) the value is Stan's default initial value: uniform on
(-2, 2) in the unconstrained coordinate, always inside the bounds.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from gpdsl.ir import nodes as ir
from gpdsl.priors import Prior
from gpdsl.semantics.constants import constant_vector
from gpdsl.semantics.support import SUPPORTS, Interval

REJECTION_ROUNDS = 64
"""Draws of a prior without a CDF before its restriction falls back to Stan's default initial value."""

BISECTION_STEPS = 64
"""Halvings of the bracket ``(-BRACKET, BRACKET)`` of the unconstrained coordinate, to below 1e-17."""

BRACKET = 80.0
"""The inverse CDF searches ``x`` within ``exp(±BRACKET)`` of a single bound (sigmoid(±BRACKET) of two)."""

SMALLEST_MASS = 1024 * float(jnp.finfo(jnp.float64).eps)
"""Mass between the bounds, relative to ``F(b)``, below which the inverse CDF has too few values of ``u``."""


def _support(prior: Prior, distribution: ir.Distribution) -> Interval:
    """The interval the prior's draws lie in: its support, the constant ``lower`` and ``upper`` of a bounded prior
    (the whole line when they are not constant)."""
    if prior.support != "bounded":
        return SUPPORTS[prior.support]
    lower, upper = constant_vector(distribution.arg("lower")), constant_vector(distribution.arg("upper"))
    return Interval() if lower is None or upper is None else Interval(min(lower), max(upper))


def restricts(prior: Prior, distribution: ir.Distribution, lower: float | None, upper: float | None) -> bool:
    """Whether the declared bounds cut into the support of the prior (a warning of the checker's on a whole
    parameter), so that its draws need the restriction."""
    support = _support(prior, distribution)
    return (lower is not None and lower > support.lower) or (upper is not None and upper < support.upper)


def draw_within(prior: Prior, key, shape, args, lower: float | None, upper: float | None) -> jax.Array:
    """A draw of ``prior`` restricted to ``(lower, upper)``.

    Parameters
    ----------
    prior : Prior
    key : jax.Array
        Random key.
    shape : tuple of int
        Shape of the draw.
    args : sequence of jax.Array
        The prior's arguments, each a scalar or of ``shape``.
    lower, upper : float or None
        The declared bounds; at least one is given.

    Returns
    -------
    jax.Array
        Values strictly inside the bounds.
    """
    key_draw, key_default = jax.random.split(key)
    default = _along(jax.random.uniform(key_default, shape, minval=-2.0, maxval=2.0), lower, upper)
    if prior.cdf is None:
        return _rejection(prior, key_draw, shape, args, lower, upper, default)

    def cdf(x):
        return jnp.broadcast_to(prior.cdf(x, *args), shape)

    low = jnp.zeros(shape) if lower is None else cdf(jnp.asarray(lower, float))
    high = jnp.ones(shape) if upper is None else cdf(jnp.asarray(upper, float))
    mass = high - low
    u = low + mass * jax.random.uniform(key_draw, shape)
    x = _inside(_along(_bisect(lambda t: cdf(_along(t, lower, upper)), u), lower, upper), lower, upper)
    return jnp.where(mass > SMALLEST_MASS * high, x, default)


def _along(t, lower, upper):
    """The point at ``t`` of an increasing map of the real line onto ``(lower, upper)`` (Stan's transform, or its
    mirror image for an upper bound alone)."""
    if upper is None:
        return lower + jnp.exp(t)
    if lower is None:
        return upper - jnp.exp(-t)
    return lower + (upper - lower) * jax.nn.sigmoid(t)


def _bisect(increasing, target):
    """The ``t`` in ``(-BRACKET, BRACKET)`` where ``increasing(t)`` reaches ``target``, elementwise."""
    def halve(_, bracket):
        a, b = bracket
        middle = (a + b) / 2
        below = increasing(middle) < target
        return jnp.where(below, middle, a), jnp.where(below, b, middle)

    a, b = jax.lax.fori_loop(0, BISECTION_STEPS, halve,
                             (jnp.full_like(target, -BRACKET), jnp.full_like(target, BRACKET)))
    return (a + b) / 2


def _inside(x, lower, upper):
    """``x`` moved off a bound it rounded onto."""
    low = -math.inf if lower is None else jnp.nextafter(lower, math.inf)
    high = math.inf if upper is None else jnp.nextafter(upper, -math.inf)
    return jnp.clip(x, low, high)


def _rejection(prior: Prior, key, shape, args, lower, upper, default):
    draws = jax.vmap(lambda k: prior.sample(k, shape, *args))(jax.random.split(key, REJECTION_ROUNDS))
    inside = jnp.ones(draws.shape, bool)
    if lower is not None:
        inside &= draws > lower
    if upper is not None:
        inside &= draws < upper
    first = jnp.take_along_axis(draws, jnp.argmax(inside, axis=0)[None], axis=0)[0]
    return jnp.where(inside.any(axis=0), first, default)
