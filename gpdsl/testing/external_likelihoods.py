"""Example external likelihoods (:mod:`gpdsl.externals`), for the tests, the docs and the case studies.

Each of the first four returns ``log N(y; mean, sigma^2 I)``: :func:`normal_jax` in JAX (compiled with the
model), :func:`normal_numpy` in SciPy (run through a host callback); :func:`failing` raises, and
:func:`normal_numpy_checked` raises on an observation beyond 100.

:func:`call_price_log_likelihood` is a realistic one, the option-pricing likelihood of Tegner, Bloem-Reddy &
Roberts (2018, Sec. 4.2; the ``tegner2018_sequential`` case study): call prices under a local volatility
surface from Dupire's forward PDE, solved by Crank-Nicolson (eq. 13; :func:`dupire_call_prices`),
``dC/dT = 1/2 K^2 sigma(T, K)^2 d2C/dK2 - r K dC/dK`` with ``C(0, K) = (S - K)^+``, on strikes ``0..k_max`` with
``C(T, 0) = S`` and ``C(T, k_max) = 0`` (``k_max = 3 S`` by default; the grid sizes are arguments). The first
``rannacher`` time steps are implicit Euler at half the step (Rannacher start-up), which damps the oscillations
Crank-Nicolson makes from the payoff's kink. ``sigma`` given on a (maturity, strike) grid is interpolated
bilinearly, flat outside it (:func:`surface`). NumPy code: gpdsl runs it through a host callback
(``--allow-external``). :func:`black_scholes_call` gives the prices of a constant volatility, to check it by.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax.scipy import stats
from scipy import stats as scipy_stats
from scipy.linalg import solve_banded
from scipy.stats import norm


def normal_jax(y, mean, sigma):
    """``sum log N(y_i; mean_i, sigma^2)`` in JAX."""
    return jnp.sum(stats.norm.logpdf(y, mean, sigma))


def normal_numpy(y, mean, sigma):
    """``sum log N(y_i; mean_i, sigma^2)`` in SciPy (not JAX-traceable)."""
    return float(np.sum(scipy_stats.norm.logpdf(np.asarray(y), np.asarray(mean), float(sigma))))


def failing(y, *args):
    """Raises, to show how a failing external likelihood is reported."""
    raise ValueError("the pricer did not converge")


def normal_numpy_checked(y, mean, sigma):
    """:func:`normal_numpy`, raising on an observation beyond 100 in absolute value (a failure at one step)."""
    if np.any(np.abs(np.asarray(y)) > 100):
        raise ValueError("observation out of range")
    return normal_numpy(y, mean, sigma)


def black_scholes_call(spot, strikes, maturities, sigma, rate=0.0):
    """Black-Scholes call prices, broadcast over strikes and maturities."""
    strikes, maturities = np.asarray(strikes, float), np.asarray(maturities, float)
    root = sigma * np.sqrt(maturities)
    d1 = (np.log(spot / strikes) + (rate + 0.5 * sigma ** 2) * maturities) / root
    return spot * norm.cdf(d1) - strikes * np.exp(-rate * maturities) * norm.cdf(d1 - root)


def surface(maturities, strikes, values):
    """``sigma(T, K)`` of values on a maturities x strikes grid: bilinear inside, flat outside."""
    maturities, strikes = np.asarray(maturities, float), np.asarray(strikes, float)
    values = np.asarray(values, float).reshape(maturities.size, strikes.size)
    order = np.argsort(strikes)
    strikes, values = strikes[order], values[:, order]

    def sigma(T, K):
        K = np.clip(np.asarray(K, float), strikes[0], strikes[-1])
        T = float(np.clip(T, maturities[0], maturities[-1]))
        row = np.searchsorted(maturities, T, side="right") - 1
        row = min(max(row, 0), maturities.size - 2) if maturities.size > 1 else 0
        if maturities.size == 1:
            return np.interp(K, strikes, values[0])
        weight = (T - maturities[row]) / (maturities[row + 1] - maturities[row])
        return (1 - weight) * np.interp(K, strikes, values[row]) + weight * np.interp(K, strikes, values[row + 1])

    return sigma


def strike_grid(spot, k_max, nodes, concentration=None):
    """``nodes`` strikes on ``[0, k_max]``: uniform, or denser near ``spot`` (``k = spot + concentration * sinh(u)``
    with ``u`` uniform) when ``concentration`` (a price scale) is given."""
    if concentration is None:
        return np.linspace(0.0, k_max, nodes)
    u = np.linspace(np.arcsinh(-spot / concentration), np.arcsinh((k_max - spot) / concentration), nodes)
    k = spot + concentration * np.sinh(u)
    k[0], k[-1] = 0.0, k_max
    return k


def dupire_call_prices(sigma, spot, strikes, maturities, rate=0.0, nodes=300, dt=0.005, k_max=None, rannacher=2,
                       concentration=None):
    """Call prices at every (maturity, strike): shape ``(len(maturities), len(strikes))``.

    Parameters
    ----------
    sigma : callable
        ``sigma(T, K_array) -> volatilities``.
    spot, rate : float
    strikes, maturities : array_like
    nodes : int
        Strike grid points on ``[0, k_max]``.
    dt : float
        Largest time step; the maturities are grid times.
    k_max : float, optional
        Default ``3 * spot``.
    rannacher : int
        Implicit half steps at the start.
    concentration : float, optional
        Strike grid denser near the spot (see :func:`strike_grid`); uniform when None.
    """
    k_max = 3.0 * spot if k_max is None else k_max
    k = strike_grid(spot, k_max, nodes, concentration)
    below, above = np.diff(k)[:-1], np.diff(k)[1:]
    maturities = np.asarray(maturities, float)
    times = [0.0]
    for end in np.sort(np.unique(maturities)):
        steps = max(int(np.ceil((end - times[-1]) / dt)), 1)
        times.extend(np.linspace(times[-1], end, steps + 1)[1:])
    times = np.asarray(times)
    c = np.maximum(spot - k, 0.0)
    found = {}
    interior = k[1:-1]
    half_steps = 0
    index = 1
    while index < times.size:
        start, end = times[index - 1], times[index]
        implicit = half_steps < 2 * rannacher
        stops = [start + (end - start) / 2, end] if implicit else [end]
        for stop in stops:
            step = stop - start
            vol = sigma(0.5 * (start + stop), interior)
            diffusion = interior ** 2 * vol ** 2 / (below * above * (below + above))
            drift = rate * interior / (below * above * (below + above))
            lower = diffusion * above + drift * above ** 2
            upper = diffusion * below - drift * below ** 2
            centre = -(lower + upper)
            theta = 1.0 if implicit else 0.5
            explicit = c[1:-1] + (1 - theta) * step * (lower * c[:-2] + centre * c[1:-1] + upper * c[2:])
            c_new = np.empty_like(c)
            c_new[0], c_new[-1] = spot, 0.0
            rhs = explicit.copy()
            rhs[0] += theta * step * lower[0] * c_new[0]
            rhs[-1] += theta * step * upper[-1] * c_new[-1]
            banded = np.zeros((3, interior.size))
            banded[0, 1:] = -theta * step * upper[:-1]
            banded[1] = 1 - theta * step * centre
            banded[2, :-1] = -theta * step * lower[1:]
            c_new[1:-1] = solve_banded((1, 1), banded, rhs)
            c, start = c_new, stop
            half_steps += implicit
        for position in np.flatnonzero(np.isclose(maturities, end)):
            found[position] = np.interp(strikes, k, c)
        index += 1
    return np.stack([found[i] for i in range(maturities.size)])


def call_price_log_likelihood(prices, volatility, sigma_c, spot, strikes, maturities):
    """``log N(prices; C(sigma), sigma_c^2 I)`` for one date, the tegner2018_sequential case study's external
    likelihood (``external("gpdsl.testing.external_likelihoods:call_price_log_likelihood", ...)``).

    Every argument but ``sigma_c`` and ``spot`` has one entry per observed option, in any order (the paper's
    is strike-major, strikes descending): ``volatility`` is the model's ``softplus(f[i] + mu)`` at that
    option's (maturity, strike), which must together fill a maturities x strikes grid.
    """
    strikes, maturities = np.asarray(strikes, float).ravel(), np.asarray(maturities, float).ravel()
    grid_strikes, grid_maturities = np.unique(strikes), np.unique(maturities)
    rows, columns = np.searchsorted(grid_maturities, maturities), np.searchsorted(grid_strikes, strikes)
    values = np.full((grid_maturities.size, grid_strikes.size), np.nan)
    values[rows, columns] = np.asarray(volatility, float).ravel()
    if np.isnan(values).any():
        raise ValueError("the options do not fill a grid of maturities x strikes")
    model = dupire_call_prices(surface(grid_maturities, grid_strikes, values), float(spot), grid_strikes,
                               grid_maturities, concentration=float(spot) / 20)
    residual = np.asarray(prices, float).ravel() - model[rows, columns]
    return float(np.sum(norm.logpdf(residual, 0.0, float(sigma_c))))
