"""The normal likelihood of real observations, ``y ~ normal(mu, sigma)``.

With a latent GP as ``mu`` and a scalar ``sigma`` the backends integrate the GP out (a structural
fact of the IR, see :mod:`gpdsl.ir.structure`); otherwise this density is used as it is.
"""

from __future__ import annotations

from gpdsl.likelihoods.base import Likelihood, StanArguments


def _log_density(y, mu, sigma):
    from jax.scipy import stats

    return stats.norm.logpdf(y, mu, sigma)


def _sample(key, shape, mu, sigma):
    import jax

    return mu + sigma * jax.random.normal(key, shape)


def _tilted_moments(y, cavity_mean, cavity_var, sigma):
    """Closed form: ``N(y | f, sigma^2) N(f | m, v)`` is ``N(y | m, v + sigma^2)`` times a Gaussian in ``f``."""
    import jax.numpy as jnp
    from jax.scipy import stats

    total = cavity_var + sigma**2
    return (stats.norm.logpdf(y, cavity_mean, jnp.sqrt(total)), cavity_mean + cavity_var * (y - cavity_mean) / total,
            cavity_var - cavity_var**2 / total)


def _expected_log_density(y, mean, var, sigma):
    """Closed form: ``-log(2 pi sigma^2) / 2 - ((y - mean)^2 + var) / (2 sigma^2)``."""
    import jax.numpy as jnp

    return -0.5 * jnp.log(2.0 * jnp.pi * sigma**2) - 0.5 * ((y - mean) ** 2 + var) / sigma**2


def _stan(y: str, args: StanArguments, vectorised: bool) -> str:
    return f"normal_lpdf({y} | {args['mu'][0]}, {args['sigma'][0]})"


def _stan_rng(args: StanArguments) -> str:
    return f"normal_rng({args['mu'][0]}, {args['sigma'][0]})"


NORMAL = Likelihood("normal", ("mu", "sigma"), "real", "mean mu, standard deviation sigma",
                    log_density=_log_density, stan=_stan, stan_rng=_stan_rng, sample=_sample,
                    tilted_moments=_tilted_moments, expected_log_density=_expected_log_density,
                    param_support={"sigma": "positive"})
"""Gaussian observations; the approximations, which take no noise parameter, do not use it."""
