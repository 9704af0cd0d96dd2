"""Option prices under a latent local volatility (Tegner et al. 2018, Sec. 4.2), as the spec sheet reads it.

T dates equally spaced over one year; the underlying a geometric Brownian motion from S_1 = 1000 (drift 0.04,
volatility 0.2, steps of 1/(T-1) years); at each date 5 maturities ``linspace(0.1, 1, 5)`` years and 15
strikes ``S_t * linspace(1.3, 0.7, 15)`` (descending), ordered in groups of five with a common strike. One draw
of f over all (date, maturity, strike) points from the GP with the squared-exponential kernel of
``(l_T, l_K, l_t, sigma_f) = (0.5, 0.3, 0.5, 0.75)`` on inputs scaled to [0, 1] (the strike as moneyness
``K / S_t``); volatility ``softplus(f - 1.5)``; prices from the Crank-Nicolson Dupire solver with r = 0
(:func:`gpdsl.testing.external_likelihoods.dupire_call_prices`), plus
Gaussian noise of s.d. 0.05. The data hold each option's strike and maturity (``strike``, ``maturity``, for the
NumPy pricer) and each date's distinct strikes with the common maturities (``strikes``, ``maturities``, for the
JAX pricer, whose options are strike-major on that grid).
"""

from __future__ import annotations

import numpy as np

from gpdsl.testing.external_likelihoods import dupire_call_prices, surface

LENGTHSCALES = (0.5, 0.3, 0.5)
SIGMA_F, MU_F, SIGMA_C = 0.75, -1.5, 0.05
MATURITIES = np.linspace(0.1, 1.0, 5)
MONEYNESS = np.linspace(1.3, 0.7, 15)


def simulate_options(steps: int = 12, seed: int = 2018) -> tuple[dict, dict]:
    """Data for ``local_volatility.gpm`` and the truth (``f``, ``volatility``, ``prices`` without noise, ``spot``)."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0.0, 1.0, steps)
    dt = 1.0 / max(steps - 1, 1)
    spot = 1000.0 * np.exp(np.concatenate([[0.0], np.cumsum((0.04 - 0.5 * 0.2 ** 2) * dt
                                                             + 0.2 * np.sqrt(dt) * rng.normal(size=steps - 1))]))
    moneyness = np.repeat(MONEYNESS, MATURITIES.size)
    maturity = np.tile(MATURITIES, MONEYNESS.size)
    X = np.stack([(maturity - 0.1) / 0.9, (moneyness - 0.7) / 0.6], axis=1)
    points = np.concatenate([np.repeat(t, X.shape[0])[:, None], np.tile(X, (steps, 1))], axis=1)
    scales = np.array([LENGTHSCALES[2], LENGTHSCALES[0], LENGTHSCALES[1]])
    distance = (((points[:, None, :] - points[None]) / scales) ** 2).sum(-1)
    K = SIGMA_F ** 2 * np.exp(-0.5 * distance) + 1e-8 * np.eye(len(points))
    f = (np.linalg.cholesky(K) @ rng.normal(size=len(points))).reshape(steps, -1)
    volatility = np.log1p(np.exp(f + MU_F))
    prices, strikes = [], []
    for step in range(steps):
        strike = spot[step] * moneyness
        grid = surface(MATURITIES, spot[step] * MONEYNESS, volatility[step].reshape(MONEYNESS.size, -1).T)
        model = dupire_call_prices(grid, spot[step], spot[step] * MONEYNESS, MATURITIES,
                                   concentration=spot[step] / 20)
        prices.append(model.T.ravel())
        strikes.append(strike)
    prices = np.asarray(prices)
    data = {"T": steps, "N": X.shape[0], "t": t, "X": np.broadcast_to(X, (steps,) + X.shape).copy(),
            "c": prices + SIGMA_C * rng.normal(size=prices.shape), "strike": np.asarray(strikes),
            "maturity": np.broadcast_to(maturity, prices.shape).copy(), "spot": spot,
            "K": MONEYNESS.size, "M": MATURITIES.size, "strikes": np.asarray(strikes)[:, ::MATURITIES.size],
            "maturities": MATURITIES}
    truth = {"f": f, "volatility": volatility, "prices": prices, "spot": spot}
    return data, truth
