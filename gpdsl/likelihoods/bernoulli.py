"""Bernoulli likelihoods of binary labels: ``p(y = 1 | f) = Phi(f)`` (probit) or ``inv_logit(f)`` (logit).

The Laplace and EP formulas work with the labels as signs ``2 y - 1`` (Rasmussen & Williams 2006,
Sec. 3.4 and 3.6).
"""

from __future__ import annotations

import numpy as np

from gpdsl.likelihoods.base import Likelihood, StanArguments

_HERMITE_NODES, _HERMITE_WEIGHTS = np.polynomial.hermite.hermgauss(64)


def _probit_log_density(y, f):
    from gpdsl.numerics.special import log_ndtr

    return log_ndtr((2.0 * y - 1.0) * f)


def _probit_derivatives(y, f):
    import jax.numpy as jnp

    from gpdsl.numerics.special import inverse_mills, log_ndtr

    signs = 2.0 * y - 1.0
    log_cdf = log_ndtr(signs * f)
    ratio = inverse_mills(signs * f, log_cdf)  # N(f) / Phi(y f)
    return jnp.sum(log_cdf), signs * ratio, ratio**2 + signs * f * ratio


def _probit_tilted_moments(y, cavity_mean, cavity_var):
    """R&W eq. 3.58."""
    import jax.numpy as jnp

    from gpdsl.numerics.special import inverse_mills, log_ndtr

    signs = 2.0 * y - 1.0
    scale = jnp.sqrt(1.0 + cavity_var)
    z = signs * cavity_mean / scale
    log_z = log_ndtr(z)
    ratio = inverse_mills(z, log_z)  # N(z) / Phi(z)
    mean = cavity_mean + signs * cavity_var * ratio / scale
    var = cavity_var - cavity_var**2 * ratio * (z + ratio) / (1.0 + cavity_var)
    return log_z, mean, var


def _probit_class_probability(mean, var):
    """Exactly ``Phi(mean / sqrt(1 + var))``."""
    import jax.numpy as jnp
    from jax.scipy.special import ndtr

    return ndtr(mean / jnp.sqrt(1.0 + var))


def _probit_sample(key, shape, f):
    import jax
    import jax.numpy as jnp

    return (jax.random.uniform(key, shape) < jax.scipy.stats.norm.cdf(f)).astype(jnp.int64)


def _probit_stan(y: str, args: StanArguments, vectorised: bool) -> str:
    f, f_shaped = args["f"]
    if not vectorised:
        return f"std_normal_lcdf((2 * {y} - 1) * {_parenthesised(f)})"
    return f"std_normal_lcdf((2 * to_vector({y}) - 1) {'.*' if f_shaped else '*'} {_parenthesised(f)})"


def _probit_stan_rng(args: StanArguments) -> str:
    return f"bernoulli_rng(Phi({args['f'][0]}))"


def _parenthesised(text: str) -> str:
    simple = text.replace("_", "").replace("[", "").replace("]", "").replace(", ", "").isalnum()
    return text if simple else f"({text})"


def _logit_log_density(y, f):
    import jax

    return -jax.nn.softplus(-(2.0 * y - 1.0) * f)


def _logit_derivatives(y, f):
    import jax
    import jax.numpy as jnp

    prob = jax.nn.sigmoid(f)
    return -jnp.sum(jax.nn.softplus(-(2.0 * y - 1.0) * f)), y - prob, prob * (1.0 - prob)


def _logit_class_probability(mean, var):
    """64-point Gauss-Hermite quadrature (not the probit approximation), about 1e-10 accurate."""
    import jax
    import jax.numpy as jnp

    nodes = mean[..., None] + jnp.sqrt(2.0 * var)[..., None] * _HERMITE_NODES
    return jax.nn.sigmoid(nodes) @ _HERMITE_WEIGHTS / np.sqrt(np.pi)


def _logit_sample(key, shape, f):
    import jax
    import jax.numpy as jnp

    return (jax.random.uniform(key, shape) < jax.nn.sigmoid(f)).astype(jnp.int64)


def _logit_stan(y: str, args: StanArguments, vectorised: bool) -> str:
    return f"bernoulli_logit_lpmf({y} | {args['f'][0]})"


def _logit_stan_rng(args: StanArguments) -> str:
    return f"bernoulli_logit_rng({args['f'][0]})"


def _invalid(y, args):
    return (y != 0) & (y != 1), "0 or 1"


BERNOULLI_PROBIT = Likelihood(
    "bernoulli_probit", ("f",), "binary", "P(y = 1) = Phi(f), the standard normal CDF",
    log_density=_probit_log_density, stan=_probit_stan, stan_rng=_probit_stan_rng, sample=_probit_sample,
    derivatives=_probit_derivatives, tilted_moments=_probit_tilted_moments,
    class_probability=_probit_class_probability, invalid_observations=_invalid)
"""Probit classification: ``p(y | f) = Phi((2 y - 1) f)``."""

BERNOULLI_LOGIT = Likelihood(
    "bernoulli_logit", ("f",), "binary", "P(y = 1) = inv_logit(f)",
    log_density=_logit_log_density, stan=_logit_stan, stan_rng=_logit_stan_rng, sample=_logit_sample,
    derivatives=_logit_derivatives, class_probability=_logit_class_probability, invalid_observations=_invalid)
"""Logistic classification: ``p(y | f) = inv_logit((2 y - 1) f)``; EP has no closed-form moments for it."""
