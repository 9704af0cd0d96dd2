"""The hurdle Poisson likelihood with a log link: ``y ~ hurdle_poisson_log(eta, hu)``.

A zero with probability ``hu``, else a zero-truncated Poisson count: ``p(0) = hu`` and
``p(k) = (1 - hu) Poisson(k | exp(eta)) / (1 - exp(-exp(eta)))`` for ``k > 0``. The truncated Poisson is an
exponential family in ``eta``, so the log density is concave in ``eta``: for ``y > 0`` the gradient is
``y - m`` and ``W`` the truncated variance ``m (1 + exp(eta) - m)``, with ``m = exp(eta) / (1 - exp(-exp(eta)))``
the truncated mean; a zero does not depend on ``eta`` (gradient and ``W`` zero).
"""

from __future__ import annotations

from gpdsl.likelihoods.base import Likelihood, count_check, template_spellings
from gpdsl.likelihoods.poisson import POISSON_LOG


def _log_density(y, eta, hu):
    import jax.numpy as jnp

    truncated = POISSON_LOG.log_density(y, eta) - jnp.log(-jnp.expm1(-jnp.exp(eta)))
    return jnp.where(y == 0, jnp.log(hu), jnp.log1p(-hu) + truncated)


def _derivatives(y, eta, hu):
    import jax.numpy as jnp

    rate = jnp.exp(eta)
    mean = rate / -jnp.expm1(-rate)
    positive = y > 0
    return (jnp.sum(_log_density(y, eta, hu)), jnp.where(positive, y - mean, 0.0),
            jnp.where(positive, mean * (1.0 + rate - mean), 0.0))


def _sample(key, shape, eta, hu):
    """A zero with probability ``hu``; else one plus the Poisson events after the first, whose time in
    ``(0, rate)`` has the exponential density truncated there (exact, no rejection)."""
    import jax
    import jax.numpy as jnp

    zero_key, first_key, rest_key = jax.random.split(key, 3)
    rate = jnp.broadcast_to(jnp.exp(eta), shape)
    first = -jnp.log1p(jax.random.uniform(first_key, shape) * jnp.expm1(-rate))
    counts = 1 + jax.random.poisson(rest_key, jnp.maximum(rate - first, 0.0), shape).astype(jnp.int64)
    return jnp.where(jax.random.bernoulli(zero_key, hu, shape), 0, counts)


_STAN, _STAN_RNG = template_spellings("hurdle_poisson_log", ("eta", "hu"))

HURDLE_POISSON_LOG = Likelihood(
    "hurdle_poisson_log", ("eta", "hu"), "count",
    "zero with probability hu, else a zero-truncated Poisson(exp(eta)): "
    "p(k) = (1 - hu) Poisson(k | exp(eta)) / (1 - exp(-exp(eta))) for k > 0",
    log_density=_log_density, stan=_STAN, stan_rng=_STAN_RNG, sample=_sample, derivatives=_derivatives,
    param_support={"hu": "unit"}, invalid_observations=count_check)
"""Counts whose zeros have their own probability; log-concave in ``eta``, so the Laplace approximation runs it."""
