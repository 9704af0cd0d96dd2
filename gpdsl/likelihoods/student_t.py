"""The Student-t likelihood of real observations, ``y ~ student_t(nu, mu, sigma)`` (Stan's parameterisation).

Robust regression: heavy tails make ``log p(y | mu)`` not concave in ``mu`` (far from ``y`` its curvature is
positive), so the Laplace approximation refuses it; ESS-within-Gibbs and NUTS run it.
"""

from __future__ import annotations

from gpdsl.likelihoods.base import Likelihood, StanArguments


def _log_density(y, nu, mu, sigma):
    from jax.scipy import stats

    return stats.t.logpdf(y, nu, mu, sigma)


def _sample(key, shape, nu, mu, sigma):
    import jax
    import jax.numpy as jnp

    return mu + sigma * jax.random.t(key, jnp.broadcast_to(nu, shape), shape)


def _stan(y: str, args: StanArguments, vectorised: bool) -> str:
    return f"student_t_lpdf({y} | {args['nu'][0]}, {args['mu'][0]}, {args['sigma'][0]})"


def _stan_rng(args: StanArguments) -> str:
    return f"student_t_rng({args['nu'][0]}, {args['mu'][0]}, {args['sigma'][0]})"


STUDENT_T = Likelihood(
    "student_t", ("nu", "mu", "sigma"), "real", "degrees of freedom nu, location mu, scale sigma",
    log_density=_log_density, stan=_stan, stan_rng=_stan_rng, sample=_sample,
    param_support={"nu": "positive", "sigma": "positive"}, latent="mu",
    not_log_concave="its heavy tails give log p(y | mu) positive curvature far from y, so Newton's method may "
                    "diverge and a Gaussian proposal misses the tails")
"""Heavy-tailed observations around a latent ``mu``; not log-concave in ``mu``, so no Laplace derivatives."""
