"""The JAX Dupire pricer (:mod:`gpdsl.testing.local_volatility`) against the NumPy one it replaces in the Tegner et
al. (2018) case study, and against Black-Scholes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gpdsl.testing import external_likelihoods as numpy_pricer
from gpdsl.testing import local_volatility

SPOT = 1000.0
STRIKES = SPOT * np.linspace(0.7, 1.3, 15)
MATURITIES = np.linspace(0.1, 1.0, 5)


def numpy_steps(maturities, dt=0.005):
    """The NumPy pricer's steps between maturities (the largest step ``dt``)."""
    return tuple(max(int(np.ceil((end - start) / dt)), 1) for start, end in zip(np.r_[0.0, maturities[:-1]], maturities))


def random_surface(seed):
    rng = np.random.default_rng(seed)
    return 0.1 + 0.2 * rng.random((MATURITIES.size, STRIKES.size))


@pytest.mark.parametrize("seed", [0, 1])
def test_the_jax_pricer_is_the_numpy_pricer_on_its_time_grid(seed):
    values = random_surface(seed)
    expected = numpy_pricer.dupire_call_prices(numpy_pricer.surface(MATURITIES, STRIKES, values), SPOT, STRIKES,
                                               MATURITIES, concentration=SPOT / 20)
    prices = local_volatility.dupire_call_prices(values, SPOT, STRIKES, MATURITIES, steps=numpy_steps(MATURITIES))
    assert np.max(np.abs(np.asarray(prices) - expected)) < 1e-9 * SPOT


def test_constant_volatility_gives_black_scholes_prices():
    exact = numpy_pricer.black_scholes_call(SPOT, STRIKES[None], MATURITIES[:, None], 0.2)
    prices = local_volatility.dupire_call_prices(np.full((5, 15), 0.2), SPOT, STRIKES, MATURITIES)
    assert np.max(np.abs(np.asarray(prices) - exact)) < 1e-5 * SPOT


def test_the_likelihood_reads_a_strike_major_grid_in_any_strike_order():
    values = random_surface(2)
    sigma = numpy_pricer.surface(MATURITIES, STRIKES, values)
    prices = numpy_pricer.dupire_call_prices(sigma, SPOT, STRIKES, MATURITIES, concentration=SPOT / 20)
    noisy = prices + 0.05 * np.random.default_rng(3).normal(size=prices.shape)
    descending = slice(None, None, -1)
    strike_major = lambda grid: grid[:, descending].T.ravel()  # noqa: E731 - the case study's order
    expected = numpy_pricer.call_price_log_likelihood(
        strike_major(noisy), strike_major(values), 0.05, SPOT, np.repeat(STRIKES[descending], 5), np.tile(MATURITIES, 15))
    found = local_volatility.call_price_log_likelihood(
        strike_major(noisy), strike_major(values), 0.05, SPOT, STRIKES[descending], MATURITIES,
        steps=numpy_steps(MATURITIES))
    assert abs(float(found) - expected) < 1e-6
    default_steps = local_volatility.call_price_log_likelihood(
        strike_major(noisy), strike_major(values), 0.05, SPOT, STRIKES[descending], MATURITIES)
    assert abs(float(default_steps) - expected) < 0.3


def test_the_likelihood_is_traceable_batched_and_differentiable():
    values = jnp.asarray(np.stack([random_surface(4), random_surface(5)]))
    prices = jnp.asarray(local_volatility.dupire_call_prices(values[0], SPOT, STRIKES, MATURITIES)).T.ravel()

    def log_likelihood(grid):
        return local_volatility.call_price_log_likelihood(prices, grid.T.ravel(), 0.05, SPOT, STRIKES, MATURITIES)

    batched = jax.jit(jax.vmap(log_likelihood))(values)
    one_by_one = [float(log_likelihood(grid)) for grid in values]
    assert np.allclose(np.asarray(batched), one_by_one, rtol=1e-12)
    assert one_by_one[0] == pytest.approx(75 * float(jax.scipy.stats.norm.logpdf(0.0, 0.0, 0.05)), abs=1e-8)
    gradient = jax.grad(log_likelihood)(values[0] + 0.01)
    step = np.zeros((5, 15))
    step[2, 7] = 1e-6
    numeric = (float(log_likelihood(values[0] + 0.01 + step)) - float(log_likelihood(values[0] + 0.01 - step))) / 2e-6
    assert float(gradient[2, 7]) == pytest.approx(numeric, rel=1e-4)
