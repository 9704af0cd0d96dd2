"""The ordinal likelihood ``y ~ ordered_logistic(eta, c)`` (Stan's spelling) of labels ``1..K``.

With increasing cutpoints ``c`` (a vector of length ``K - 1``, shared by every observation),
``P(y = k) = inv_logit(eta - c[k-1]) - inv_logit(eta - c[k])`` with ``c[0] = -inf`` and ``c[K] = inf``.
Log-concave in ``eta``; its derivatives come from ``jax.grad`` per element.
"""

from __future__ import annotations

from gpdsl.likelihoods.base import Likelihood, StanArguments, autodiff_derivatives


def _log_density(y, eta, c):
    """``log sigma(u - eta) + log sigma(eta - l) + log(1 - exp(l - u))`` for the cutpoints ``l < u`` around ``y``;
    ``-inf`` where they are not increasing (Stan rejects such cutpoints)."""
    import jax
    import jax.numpy as jnp

    c = jnp.asarray(c, dtype=float)
    k = jnp.asarray(y).astype(int)
    edges = jnp.concatenate([jnp.array([-jnp.inf]), c, jnp.array([jnp.inf])])
    lower, upper = edges[k - 1], edges[k]
    finite_lower, finite_upper = jnp.isfinite(lower), jnp.isfinite(upper)
    safe_lower = jnp.where(finite_lower, lower, 0.0)
    safe_upper = jnp.where(finite_upper, upper, 0.0)
    gap = jnp.where(finite_lower & finite_upper, safe_lower - safe_upper, -1.0)
    ordered = gap < 0
    width = jnp.where(ordered, jnp.log(-jnp.expm1(jnp.where(ordered, gap, -1.0))), -jnp.inf)
    return (jnp.where(finite_upper, jax.nn.log_sigmoid(safe_upper - eta), 0.0)
            + jnp.where(finite_lower, jax.nn.log_sigmoid(eta - safe_lower), 0.0)
            + jnp.where(finite_lower & finite_upper, width, 0.0))


def _sample(key, shape, eta, c):
    import jax
    import jax.numpy as jnp

    latent = jnp.broadcast_to(eta, shape) + jax.random.logistic(key, shape)
    return 1 + jnp.sum(latent[..., None] > jnp.asarray(c), axis=-1).astype(jnp.int64)


def _stan(y: str, args: StanArguments, vectorised: bool) -> str:
    eta, shaped = args["eta"]
    if vectorised and not shaped:
        eta = f"rep_vector({eta}, size({y}))"
    return f"ordered_logistic_lpmf({y} | {eta}, {args['c'][0]})"


def _stan_rng(args: StanArguments) -> str:
    return f"ordered_logistic_rng({args['eta'][0]}, {args['c'][0]})"


def _invalid(y, args):
    levels = len(args["c"]) + 1
    return (y < 1) | (y > levels), f"a label from 1 to {levels} (one more than the cutpoints)"


ORDERED_LOGISTIC = Likelihood(
    "ordered_logistic", ("eta", "c"), "ordinal",
    "P(y = k) = inv_logit(eta - c[k-1]) - inv_logit(eta - c[k]), increasing cutpoints c, labels 1..K",
    log_density=_log_density, stan=_stan, stan_rng=_stan_rng, sample=_sample,
    derivatives=autodiff_derivatives(_log_density, shared=(0,)), own_shape=("c",), invalid_observations=_invalid)
"""Ordered categories; the Laplace approximation supports it (log-concave in ``eta``)."""
