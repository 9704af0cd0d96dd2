"""The Dirichlet prior on a simplex."""

from __future__ import annotations

from gpdsl.priors.base import Prior, StanArguments, lpdf


def _log_density(x, alpha):
    """``log p(x | alpha) = log Gamma(sum alpha) - sum log Gamma(alpha) + sum (alpha - 1) log x`` over the last axis."""
    import jax.numpy as jnp
    from jax.scipy.special import gammaln, xlogy

    alpha = jnp.broadcast_to(jnp.asarray(alpha, dtype=jnp.result_type(float)), jnp.shape(x))
    return (gammaln(jnp.sum(alpha, axis=-1)) - jnp.sum(gammaln(alpha), axis=-1)
            + jnp.sum(xlogy(alpha - 1.0, x), axis=-1))


def _sample(key, shape, alpha):
    """A draw of ``shape`` (``(..., K)``): independent ``gamma(alpha_k, 1)`` values over their sum."""
    import jax
    import jax.numpy as jnp

    alpha = jnp.broadcast_to(jnp.asarray(alpha, dtype=jnp.result_type(float)), shape)
    return jax.random.dirichlet(key, alpha, shape[:-1])


def _stan(x: str, args: StanArguments, count: str | None) -> str:
    alpha, elementwise = args["alpha"]
    return lpdf("dirichlet", x, [alpha if elementwise else f"rep_vector({alpha}, {count})"])


DIRICHLET = Prior(
    "dirichlet", ("alpha",),
    "a simplex x (entries >= 0 summing to one) with density Gamma(sum alpha) / prod Gamma(alpha_k) "
    "prod x_k^(alpha_k - 1); mean alpha / sum(alpha); alpha = 1 is uniform on the simplex",
    log_density=_log_density, sample=_sample, stan=_stan, support="simplex",
    arg_support={"alpha": "positive"})
"""The Dirichlet prior of a ``simplex[K]`` parameter (Stan's ``dirichlet``); a scalar ``alpha`` is symmetric."""
