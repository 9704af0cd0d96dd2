"""A function of one draw applied to every draw of a run, in compiled batches (predictions, pointwise groups,
the reported latent values)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.inference import progress


def over_draws(function, *draws, batch: int = 256):
    """``function`` of one draw applied to every draw of ``(chain, draw, ...)`` arrays, in compiled batches.

    Each finished batch moves the bar of the :func:`~gpdsl.inference.progress.stage` it runs in by its draws.

    Returns
    -------
    numpy.ndarray or tuple of numpy.ndarray
        Each output of ``function`` shaped ``(chain, draw, *its shape)``.
    """
    chains, num = np.shape(draws[0])[:2]
    flat = [jnp.reshape(jnp.asarray(d), (chains * num,) + np.shape(d)[2:]) for d in draws]
    batched = jax.jit(jax.vmap(function))
    parts = []
    for i in range(0, chains * num, batch):
        parts.append(jax.tree_util.tree_map(np.asarray, batched(*[d[i:i + batch] for d in flat])))
        progress.advance(min(batch, chains * num - i))
    joined = jax.tree_util.tree_map(lambda *leaves: np.concatenate(leaves), *parts)
    return jax.tree_util.tree_map(lambda x: x.reshape((chains, num) + x.shape[1:]), joined)
