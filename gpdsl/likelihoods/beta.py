"""Proportions in ``(0, 1)`` with a logit link: ``y ~ beta_logit(eta, phi)``, that is Stan's
``y ~ beta_proportion(inv_logit(eta), phi)`` (brms' ``Beta`` family with its default logit link).

The mean is ``mu = inv_logit(eta)`` and the precision ``phi``: ``y ~ beta(mu phi, (1 - mu) phi)``, with variance
``mu (1 - mu) / (1 + phi)``. The log density is concave in ``mu`` but not in ``eta``: where ``mu`` is far from
``y`` the link's curvature wins (at ``y = 0.9``, ``phi = 20``, ``eta = -2`` the second derivative is about
``+4.5``), so the Laplace approximation refuses it; EP (by quadrature), ESS-within-Gibbs and NUTS run it.
"""

from __future__ import annotations

from gpdsl.likelihoods.base import Likelihood, StanArguments


def _log_density(y, eta, phi):
    import jax
    import jax.numpy as jnp
    from jax.scipy import special

    a = phi * jax.nn.sigmoid(eta)
    b = phi * jax.nn.sigmoid(-eta)
    return (special.gammaln(phi) - special.gammaln(a) - special.gammaln(b)
            + (a - 1.0) * jnp.log(y) + (b - 1.0) * jnp.log1p(-y))


def _sample(key, shape, eta, phi):
    import jax
    import jax.numpy as jnp

    a = jnp.broadcast_to(phi * jax.nn.sigmoid(eta), shape)
    b = jnp.broadcast_to(phi * jax.nn.sigmoid(-eta), shape)
    return jax.random.beta(key, a, b, shape)


def _stan(y: str, args: StanArguments, vectorised: bool) -> str:
    return f"beta_proportion_lpdf({y} | inv_logit({args['eta'][0]}), {args['phi'][0]})"


def _stan_rng(args: StanArguments) -> str:
    return f"beta_proportion_rng(inv_logit({args['eta'][0]}), {args['phi'][0]})"


def _invalid(y, args):
    return (y <= 0) | (y >= 1), "a proportion strictly between 0 and 1"


BETA_LOGIT = Likelihood(
    "beta_logit", ("eta", "phi"), "unit",
    "Stan's beta_proportion(inv_logit(eta), phi): beta(mu phi, (1 - mu) phi) with mean mu = inv_logit(eta) "
    "and variance mu (1 - mu) / (1 + phi)",
    log_density=_log_density, stan=_stan, stan_rng=_stan_rng, sample=_sample,
    param_support={"phi": "positive"}, invalid_observations=_invalid,
    not_log_concave="the logit link bends log p(y | eta) upwards where the mean inv_logit(eta) is far from y "
                    "(at y = 0.9, phi = 20, eta = -2 its second derivative is about +4.5)")
"""Proportions strictly inside ``(0, 1)``; not log-concave in ``eta``, so no Laplace derivatives."""
