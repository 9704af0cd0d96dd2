"""Multiclass labels ``y ~ categorical_logit(f)`` (Stan's spelling): a softmax over the columns of a latent matrix.

``f`` is a ``matrix[N, K]`` (one column per class, each typically an independent latent GP over the same inputs)
and observation ``n`` is a label in ``1..K`` with ``P(y[n] = k) = exp(f[n, k]) / sum_j exp(f[n, j])``. The log
density is concave in each row of ``f``; its Hessian in a row is ``-(diag(pi) - pi pi^T)`` (Williams & Barber
1998), not diagonal, so the elementwise Laplace and EP approximations do not take it.
"""

from __future__ import annotations

from gpdsl.likelihoods.base import Likelihood, StanArguments


def _log_density(y, logits):
    """``log softmax(logits[n])[y[n] - 1]`` for each row ``n``."""
    import jax
    import jax.numpy as jnp

    labels = jnp.asarray(y).astype(int) - 1
    logits = jnp.asarray(logits, dtype=float)
    shape = jnp.broadcast_shapes(labels.shape, logits.shape[:-1])
    labels = jnp.broadcast_to(labels, shape)
    log_probabilities = jax.nn.log_softmax(jnp.broadcast_to(logits, shape + logits.shape[-1:]), axis=-1)
    return jnp.take_along_axis(log_probabilities, labels[..., None], axis=-1)[..., 0]


def _sample(key, shape, logits):
    import jax
    import jax.numpy as jnp

    logits = jnp.broadcast_to(jnp.asarray(logits, dtype=float), tuple(shape) + jnp.shape(logits)[-1:])
    return 1 + jax.random.categorical(key, logits, axis=-1).astype(jnp.int64)


def _stan(y: str, args: StanArguments, vectorised: bool) -> str:
    logits = args["logits"][0]
    if vectorised:
        return f"categorical_logit_rows_lpmf({y} | {logits})"
    return f"categorical_logit_lpmf({y} | ({logits})')"


def _stan_rng(args: StanArguments) -> str:
    return f"categorical_logit_rng(({args['logits'][0]})')"


def _invalid(y, args):
    classes = args["logits"].shape[-1]
    return (y < 1) | (y > classes) | (y != y.round()), f"a label from 1 to {classes} (the columns of the logits)"


CATEGORICAL_LOGIT = Likelihood(
    "categorical_logit", ("logits",), "ordinal",
    "P(y[n] = k) = exp(logits[n, k]) / sum_j exp(logits[n, j]): one row of the matrix[N, K] logits per label, "
    "labels 1..K",
    log_density=_log_density, stan=_stan, stan_rng=_stan_rng, sample=_sample, row_params=("logits",),
    invalid_observations=_invalid)
"""Multiclass labels through a softmax of ``K`` latent values per observation; ``gibbs`` and NUTS run it."""
