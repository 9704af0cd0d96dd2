"""The option-pricing likelihood of Tegner, Bloem-Reddy & Roberts (2018, Sec. 4.2) in JAX.

:func:`dupire_call_prices` solves Dupire's forward PDE by Crank-Nicolson as
:func:`gpdsl.testing.external_likelihoods.dupire_call_prices` does (same strike grid, Rannacher start-up,
bilinear surface, flat outside), but with a fixed number of time steps between consecutive maturities, so that
every size is known when it is traced: it compiles with the model, runs batched over chains and states, and
needs no host callback. :func:`call_price_log_likelihood` is the external likelihood the case study's model
names; its options lie on a grid of distinct strikes x distinct maturities given as two vectors.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy import stats


def _substeps(intervals: int, steps, rannacher: int):
    """The time steps as static arrays: interval, start and end as fractions of it, implicit or not."""
    steps = (steps,) * intervals if np.ndim(steps) == 0 else tuple(steps)
    if len(steps) != intervals:
        raise ValueError(f"steps has {len(steps)} entries for {intervals} maturities")
    rows = []
    for interval, count in enumerate(steps):
        for step in range(count):
            start, end = step / count, (step + 1) / count
            if interval == 0 and step < rannacher:
                middle = 0.5 * (start + end)
                rows += [(interval, start, middle, 1.0), (interval, middle, end, 1.0)]
            else:
                rows.append((interval, start, end, 0.5))
    interval, start, end, theta = (np.array(column) for column in zip(*rows))
    last = np.flatnonzero(np.diff(np.append(interval, intervals)))
    return interval, start, end, theta, last


def strike_grid(spot, k_max, nodes: int, concentration):
    """``nodes`` strikes on ``[0, k_max]``, denser near ``spot`` (``k = spot + concentration * sinh(u)``)."""
    u = jnp.linspace(jnp.arcsinh(-spot / concentration), jnp.arcsinh((k_max - spot) / concentration), nodes)
    k = spot + concentration * jnp.sinh(u)
    return k.at[0].set(0.0).at[-1].set(k_max)


def dupire_call_prices(volatility, spot, strikes, maturities, rate=0.0, nodes: int = 300, steps=45,
                       k_max=None, rannacher: int = 2, concentration=None):
    """Call prices at every (maturity, strike) of a local volatility given on that grid.

    Parameters
    ----------
    volatility : array, shape (n_T, n_K)
        ``sigma`` at ascending maturities x ascending strikes; bilinear between them, flat outside.
    spot, rate : float
    strikes : array, shape (n_K,)
        Ascending.
    maturities : array, shape (n_T,)
        Ascending and positive.
    nodes : int
        Strike grid points on ``[0, k_max]``.
    steps : int or tuple of int
        Crank-Nicolson steps from each maturity to the next (from 0 to the first): one number for all, or one
        per maturity.
    k_max : float, optional
        Default ``3 * spot``.
    rannacher : int
        The first steps taken as two implicit half steps each.
    concentration : float, optional
        The strike grid's scale near the spot; default ``spot / 20``.

    Returns
    -------
    array, shape (n_T, n_K)
    """
    volatility = jnp.asarray(volatility, jnp.float64)
    spot = jnp.asarray(spot, jnp.float64)
    k_max = 3.0 * spot if k_max is None else k_max
    concentration = spot / 20 if concentration is None else concentration
    k = strike_grid(spot, k_max, nodes, concentration)
    interior = k[1:-1]
    below, above = jnp.diff(k)[:-1], jnp.diff(k)[1:]
    spacing = below * above * (below + above)
    on_nodes = jax.vmap(lambda row: jnp.interp(interior, strikes, row))(volatility)

    interval, start, end, theta, last = _substeps(maturities.shape[0], steps, rannacher)
    begins = jnp.concatenate([jnp.zeros(1), maturities[:-1]])
    length = maturities - begins
    weight = np.where(interval == 0, 0.0, 0.5 * (start + end))
    previous = np.maximum(interval - 1, 0)
    sigma = (1 - weight)[:, None] * on_nodes[previous] + weight[:, None] * on_nodes[interval]
    step = (end - start) * length[interval]

    def advance(c, inputs):
        vol, h, implicit = inputs
        diffusion = interior ** 2 * vol ** 2 / spacing
        drift = rate * interior / spacing
        lower = diffusion * above + drift * above ** 2
        upper = diffusion * below - drift * below ** 2
        centre = -(lower + upper)
        explicit = c[1:-1] + (1 - implicit) * h * (lower * c[:-2] + centre * c[1:-1] + upper * c[2:])
        rhs = explicit.at[0].add(implicit * h * lower[0] * spot)
        sub = (-implicit * h * lower).at[0].set(0.0)
        sup = (-implicit * h * upper).at[-1].set(0.0)
        solved = jax.lax.linalg.tridiagonal_solve(sub, 1 - implicit * h * centre, sup, rhs[:, None])[:, 0]
        c = jnp.concatenate([spot[None], solved, jnp.zeros(1)])
        return c, c

    payoff = jnp.maximum(spot - k, 0.0)
    _, path = jax.lax.scan(advance, payoff, (sigma, step, jnp.asarray(theta)))
    return jax.vmap(lambda c: jnp.interp(strikes, k, c))(path[last])


def call_price_log_likelihood(prices, volatility, sigma_c, spot, strikes, maturities, *, steps=45):
    """``log N(prices; C(sigma), sigma_c^2 I)`` for one date's options on a strikes x maturities grid.

    Parameters
    ----------
    prices, volatility : array, shape (n_K * n_T,)
        Strike-major: entry ``i * n_T + j`` is the option of strike ``strikes[i]`` and maturity
        ``maturities[j]`` (the case study's order); ``volatility`` is the model's ``sigma`` there.
    sigma_c, spot : float
    strikes : array, shape (n_K,)
        Distinct strikes, in any order.
    maturities : array, shape (n_T,)
        Distinct maturities, ascending.
    steps : int or tuple of int
        Time steps between consecutive maturities (:func:`dupire_call_prices`).
    """
    strikes = jnp.asarray(strikes, jnp.float64)
    order = jnp.argsort(strikes)
    n_strikes, n_maturities = strikes.shape[0], jnp.shape(maturities)[0]
    grid = jnp.reshape(volatility, (n_strikes, n_maturities))[order].T
    model = dupire_call_prices(grid, spot, strikes[order], jnp.asarray(maturities, jnp.float64), steps=steps)
    fitted = jnp.zeros((n_strikes, n_maturities)).at[order].set(model.T).ravel()
    return jnp.sum(stats.norm.logpdf(jnp.ravel(prices), fitted, sigma_c))


call_price_log_likelihood.gpdsl_traceable = True
