"""Zero-inflated counts with a log link: ``zero_inflated_poisson_log(eta, zi)`` and
``zero_inflated_neg_binomial_2_log(eta, phi, zi)``.

With probability ``zi`` an observation is a structural zero, otherwise a draw of the count likelihood
(``poisson_log`` or ``neg_binomial_2_log``), so ``p(0) = zi + (1 - zi) p_count(0)`` and
``p(k) = (1 - zi) p_count(k)`` for ``k > 0``. The mixture makes ``log p(0 | eta)`` not concave in ``eta``, so
the Laplace approximation refuses them. Stan has neither: its spellings call the template functions of
``stan_templates/likelihoods.stan``.
"""

from __future__ import annotations

from gpdsl.likelihoods.base import Likelihood, count_check, template_spellings
from gpdsl.likelihoods.neg_binomial import NEG_BINOMIAL_2_LOG
from gpdsl.likelihoods.poisson import POISSON_LOG

NOT_LOG_CONCAVE = ("at y = 0 it mixes a point mass with the count density, so log p(0 | eta) = "
                   "log(zi + (1 - zi) p(0 | eta)) flattens to log zi as eta grows and has positive curvature")


def _inflated(y, zi, count_log_density):
    import jax.numpy as jnp

    kept = jnp.log1p(-zi) + count_log_density
    return jnp.where(y == 0, jnp.logaddexp(jnp.log(zi), kept), kept)


def _zip_log_density(y, eta, zi):
    return _inflated(y, zi, POISSON_LOG.log_density(y, eta))


def _zinb_log_density(y, eta, phi, zi):
    return _inflated(y, zi, NEG_BINOMIAL_2_LOG.log_density(y, eta, phi))


def _zero_inflate(sample):
    """A sampler of the zero-inflated likelihood from the count likelihood's ``sample``."""
    def inflated(key, shape, *params):
        import jax
        import jax.numpy as jnp

        zero_key, count_key = jax.random.split(key)
        *count_params, zi = params
        counts = sample(count_key, shape, *count_params)
        return jnp.where(jax.random.bernoulli(zero_key, zi, shape), 0, counts)

    return inflated


_ZIP_STAN, _ZIP_STAN_RNG = template_spellings("zero_inflated_poisson_log", ("eta", "zi"))

ZERO_INFLATED_POISSON_LOG = Likelihood(
    "zero_inflated_poisson_log", ("eta", "zi"), "count",
    "structural zero with probability zi, else Poisson(exp(eta)): p(0) = zi + (1 - zi) exp(-exp(eta))",
    log_density=_zip_log_density, stan=_ZIP_STAN, stan_rng=_ZIP_STAN_RNG, sample=_zero_inflate(POISSON_LOG.sample),
    param_support={"zi": "unit"}, not_log_concave=NOT_LOG_CONCAVE, invalid_observations=count_check)
"""Counts with excess zeros; Gibbs (ESS for ``f``) and NUTS run it, the Laplace approximation refuses it."""

_ZINB_STAN, _ZINB_STAN_RNG = template_spellings("zero_inflated_neg_binomial_2_log", ("eta", "phi", "zi"))

ZERO_INFLATED_NEG_BINOMIAL_2_LOG = Likelihood(
    "zero_inflated_neg_binomial_2_log", ("eta", "phi", "zi"), "count",
    "structural zero with probability zi, else neg_binomial_2_log(eta, phi): "
    "p(0) = zi + (1 - zi) (phi / (phi + exp(eta)))^phi",
    log_density=_zinb_log_density, stan=_ZINB_STAN, stan_rng=_ZINB_STAN_RNG,
    sample=_zero_inflate(NEG_BINOMIAL_2_LOG.sample), param_support={"phi": "positive", "zi": "unit"},
    not_log_concave=NOT_LOG_CONCAVE, invalid_observations=count_check)
"""Overdispersed counts with excess zeros; like :data:`ZERO_INFLATED_POISSON_LOG`, not log-concave."""
