"""Positive observations with a log link: ``y ~ gamma_log(eta, shape)``, that is Stan's
``y ~ gamma(shape, shape / exp(eta))`` (shape, rate), with mean ``exp(eta)`` and variance ``exp(2 eta) / shape``.

Log-concave in ``eta``: gradient ``shape (y exp(-eta) - 1)``, ``W = shape y exp(-eta)``.
"""

from __future__ import annotations

from gpdsl.likelihoods.base import Likelihood, StanArguments


def _log_density(y, eta, shape):
    import jax.numpy as jnp
    from jax.scipy import special

    return (shape * (jnp.log(shape) - eta) - special.gammaln(shape) + (shape - 1.0) * jnp.log(y)
            - shape * y * jnp.exp(-eta))


def _derivatives(y, eta, shape):
    import jax.numpy as jnp

    scaled = shape * y * jnp.exp(-eta)
    return jnp.sum(_log_density(y, eta, shape)), scaled - shape, scaled


def _sample(key, shape_, eta, shape):
    import jax
    import jax.numpy as jnp

    return jax.random.gamma(key, jnp.broadcast_to(shape, shape_)) / shape * jnp.exp(eta)


def _rate(args: StanArguments) -> str:
    (eta, eta_shaped), (shape, shape_shaped) = args["eta"], args["shape"]
    return f"{shape} {'.*' if eta_shaped and shape_shaped else '*'} exp(-({eta}))"


def _stan(y: str, args: StanArguments, vectorised: bool) -> str:
    return f"gamma_lpdf({y} | {args['shape'][0]}, {_rate(args)})"


def _stan_rng(args: StanArguments) -> str:
    return f"gamma_rng({args['shape'][0]}, {_rate(args)})"


def _invalid(y, args):
    return y <= 0, "a positive value"


GAMMA_LOG = Likelihood(
    "gamma_log", ("eta", "shape"), "positive",
    "gamma(shape, rate = shape / exp(eta)): mean exp(eta), variance exp(2 eta) / shape",
    log_density=_log_density, stan=_stan, stan_rng=_stan_rng, sample=_sample, derivatives=_derivatives,
    param_support={"shape": "positive"}, invalid_observations=_invalid)
"""Positive data (durations, amounts) with a log link; the Laplace approximation supports it."""
