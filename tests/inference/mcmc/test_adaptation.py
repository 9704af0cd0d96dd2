"""Proposal adaptation: Robbins-Monro on the log scale, running moments and Haario's adaptive Metropolis."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gpdsl.inference.mcmc.adaptation import (
    haario_covariance,
    moments_init,
    moments_update,
    sample_covariance,
    scale_init,
    scale_update,
)


@pytest.fixture(scope="module")
def history():
    rng = np.random.default_rng(4)
    return rng.normal(size=(57, 3)) @ np.asarray([[1.0, 0.3, 0.0], [0.0, 2.0, -0.5], [0.0, 0.0, 0.2]]) + [1, -4, 9]


def _moments_of(draws, collect=None):
    collect = np.ones(len(draws), bool) if collect is None else collect

    def one(state, inputs):
        x, keep = inputs
        return moments_update(state, x, keep), None

    state, _ = jax.lax.scan(one, moments_init(draws.shape[1]), (jnp.asarray(draws), jnp.asarray(collect)))
    return state


def test_running_moments_equal_numpy_on_the_history(history):
    state = _moments_of(history)
    assert int(state.count) == len(history)
    np.testing.assert_allclose(state.mean, history.mean(axis=0), rtol=1e-13)
    np.testing.assert_allclose(sample_covariance(state), np.cov(history.T), rtol=1e-12, atol=1e-14)


def test_draws_not_collected_leave_the_moments_alone(history):
    keep = np.arange(len(history)) % 3 == 0
    state = _moments_of(history, keep)
    assert int(state.count) == keep.sum()
    np.testing.assert_allclose(sample_covariance(state), np.cov(history[keep].T), rtol=1e-12, atol=1e-14)


def test_haario_proposal_is_scaled_covariance_plus_epsilon_after_g0_draws(history):
    d, epsilon, g0 = history.shape[1], 1e-4, 20
    initial = 0.1 * np.eye(d)
    for n in (g0 - 1, g0, len(history)):
        proposal = haario_covariance(_moments_of(history[:n]), initial, g0, epsilon)
        if n < g0:
            np.testing.assert_array_equal(proposal, initial)
        else:
            expected = 2.38**2 / d * (np.cov(history[:n].T) + epsilon * np.eye(d))
            np.testing.assert_allclose(proposal, expected, rtol=1e-12, atol=1e-15)


def test_robbins_monro_gain_and_direction():
    state = scale_init(0.5, (2,))
    assert state.log_scale.shape == (2,) and int(state.count) == 0
    up = scale_update(state, 0.9, 0.25, True, rate=2.0, decay=0.6, t0=1.0)
    np.testing.assert_allclose(up.log_scale, np.log(0.5) + 2.0 * 0.65, rtol=1e-15)
    assert int(up.count) == 1
    down = scale_update(up, 0.0, 0.25, True, rate=2.0, decay=0.6, t0=1.0)
    np.testing.assert_allclose(down.log_scale, up.log_scale - 2.0 * 2.0**-0.6 * 0.25, rtol=1e-15)
    frozen = scale_update(down, 1.0, 0.25, False)
    np.testing.assert_array_equal(frozen.log_scale, down.log_scale)
    assert int(frozen.count) == 2


def test_robbins_monro_reaches_the_target_acceptance_of_a_gaussian_random_walk():
    """For x ~ N(0, 1) and steps N(0, s^2) the stationary acceptance rate is (2 / pi) arctan(2 / s).

    After t = 20000 updates the gain is t ** -0.6 = 0.0026; with the rate's slope 0.31 in log s and the
    acceptance probability's variance below 0.25, the final rate has standard deviation below 0.01.
    """
    target = 0.44

    def step(carry, key):
        x, state = carry
        key_move, key_accept = jax.random.split(key)
        proposal = x + jnp.exp(state.log_scale) * jax.random.normal(key_move)
        ratio = 0.5 * (x**2 - proposal**2)
        x = jnp.where(jnp.log(jax.random.uniform(key_accept)) < ratio, proposal, x)
        return (x, scale_update(state, jnp.minimum(1.0, jnp.exp(ratio)), target, True)), None

    (_, state), _ = jax.lax.scan(step, (jnp.asarray(0.0), scale_init(0.1)), jax.random.split(jax.random.key(2), 20000))
    rate = 2 / np.pi * np.arctan(2 / np.exp(float(state.log_scale)))
    assert abs(rate - target) < 0.03
