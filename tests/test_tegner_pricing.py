"""The Crank-Nicolson Dupire pricer of the Tegner et al. (2018) case study (gpdsl's example external likelihood,
:mod:`gpdsl.testing.external_likelihoods`) against Black-Scholes."""

import numpy as np

from gpdsl.testing.external_likelihoods import (black_scholes_call, call_price_log_likelihood, dupire_call_prices,
                                                surface)

SPOT = 1000.0
STRIKES = SPOT * np.linspace(1.3, 0.7, 15)
MATURITIES = np.linspace(0.1, 1.0, 5)


def test_constant_volatility_gives_black_scholes_prices():
    exact = black_scholes_call(SPOT, STRIKES[None], MATURITIES[:, None], 0.2)
    prices = dupire_call_prices(lambda T, K: np.full_like(K, 0.2), SPOT, STRIKES, MATURITIES, nodes=600, dt=0.002,
                                concentration=SPOT / 20)
    quoted = exact > 0.01 * SPOT
    assert quoted.mean() > 0.75
    assert np.max(np.abs(prices - exact)[quoted] / exact[quoted]) < 1e-4
    assert np.max(np.abs(prices - exact)) < 1e-4 * SPOT * 0.02
    coarse = dupire_call_prices(lambda T, K: np.full_like(K, 0.2), SPOT, STRIKES, MATURITIES,
                                concentration=SPOT / 20)
    assert np.max(np.abs(coarse - exact)) < 1e-5 * SPOT


def test_the_surface_interpolates_and_the_likelihood_peaks_at_the_truth():
    values = np.outer(np.linspace(0.3, 0.2, 5), np.ones(15)) + 0.1 * np.linspace(0, 1, 15)
    sigma = surface(MATURITIES, STRIKES, values)
    assert np.isclose(sigma(MATURITIES[2], STRIKES[4:5])[0], values[2, 4])
    assert np.isclose(sigma(5.0, np.array([0.0]))[0], values[-1, -1])
    prices = dupire_call_prices(sigma, SPOT, STRIKES, MATURITIES, concentration=SPOT / 20)
    at_truth = call_price_log_likelihood(prices.ravel(), values.ravel(), 0.05, SPOT, np.tile(STRIKES, 5),
                                         np.repeat(MATURITIES, 15))
    shifted = call_price_log_likelihood(prices.ravel(), values.ravel() + 0.01, 0.05, SPOT, np.tile(STRIKES, 5),
                                        np.repeat(MATURITIES, 15))
    assert at_truth > shifted
