"""The Poisson likelihood of counts with a log link, ``y ~ Poisson(exp(eta))``."""

from __future__ import annotations

from gpdsl.likelihoods.base import Likelihood, StanArguments, count_check


def _log_density(y, eta):
    import jax.numpy as jnp
    from jax.scipy import special

    return y * eta - jnp.exp(eta) - special.gammaln(y + 1.0)


def _sample(key, shape, eta):
    import jax
    import jax.numpy as jnp

    return jax.random.poisson(key, jnp.exp(eta), shape).astype(jnp.int64)


def _stan(y: str, args: StanArguments, vectorised: bool) -> str:
    return f"poisson_log_lpmf({y} | {args['eta'][0]})"


def _stan_rng(args: StanArguments) -> str:
    return f"poisson_log_rng({args['eta'][0]})"


def _derivatives(y, eta):
    import jax.numpy as jnp

    rate = jnp.exp(eta)
    return jnp.sum(_log_density(y, eta)), y - rate, rate


def _expected_log_density(y, mean, var):
    """Closed form: ``y mean - exp(mean + var / 2) - log(y!)``."""
    import jax.numpy as jnp
    from jax.scipy import special

    return y * mean - jnp.exp(mean + 0.5 * var) - special.gammaln(y + 1.0)


POISSON_LOG = Likelihood("poisson_log", ("eta",), "count", "y ~ Poisson(exp(eta))",
                         log_density=_log_density, stan=_stan, stan_rng=_stan_rng, sample=_sample,
                         derivatives=_derivatives, invalid_observations=count_check,
                         expected_log_density=_expected_log_density)
"""Counts: the Laplace approximation supports them (log-concave, ``W = exp(eta)``); EP has no closed-form moments."""
