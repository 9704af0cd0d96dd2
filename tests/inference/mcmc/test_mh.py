"""The Metropolis-Hastings core: accept/reject, NaN safety, kept target values, the random walk."""

from typing import NamedTuple

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.inference.driver import run_chains
from gpdsl.inference.mcmc.mh import MHState, accept_reject, log_ratio, random_walk


def test_accepts_exactly_when_the_log_uniform_is_below_the_ratio():
    current = MHState({"a": jnp.asarray(0.0), "b": jnp.zeros(2)}, jnp.asarray(-1.0))
    proposal = MHState({"a": jnp.asarray(1.0), "b": jnp.ones(2)}, jnp.asarray(-1.5))
    for log_uniform, accepted in ((-0.6, True), (-0.4, False)):
        state, info = accept_reject(jnp.asarray(log_uniform), current, proposal)
        assert bool(info.accepted) == accepted
        assert float(info.acceptance_rate) == np.exp(-0.5)
        chosen = proposal if accepted else current
        jax.tree.map(np.testing.assert_array_equal, state, chosen)


def test_uphill_moves_have_rate_one_and_nan_targets_are_rejected():
    current = MHState(jnp.zeros(1), jnp.asarray(-3.0))
    _, info = accept_reject(jnp.asarray(-1e-12), current, MHState(jnp.ones(1), jnp.asarray(2.0)))
    assert bool(info.accepted) and float(info.acceptance_rate) == 1.0
    state, info = accept_reject(jnp.asarray(-1e300), current, MHState(jnp.ones(1), jnp.asarray(jnp.nan)))
    assert not bool(info.accepted) and float(info.acceptance_rate) == 0.0
    np.testing.assert_array_equal(state.position, current.position)


def test_a_rejection_keeps_every_term_of_the_current_target():
    estimate, prior = jnp.asarray(-10.25), jnp.asarray(-1.5)
    current = MHState(jnp.zeros(2), (estimate, prior))
    proposal = MHState(jnp.ones(2), (jnp.asarray(-30.0), jnp.asarray(-2.0)))
    assert float(log_ratio(current, proposal)) == -30.0 - 2.0 + 10.25 + 1.5
    state, info = accept_reject(jnp.asarray(-0.1), current, proposal)
    assert not bool(info.accepted)
    assert float(state.log_density[0]) == float(estimate) and float(state.log_density[1]) == float(prior)


def test_random_walk_steps():
    position, normals = jnp.asarray([1.0, -2.0]), jnp.asarray([0.5, 2.0])
    np.testing.assert_array_equal(random_walk(position, normals, jnp.asarray([0.1, 3.0])), [1.05, 4.0])
    factor = jnp.asarray([[1.0, 0.0], [0.5, 2.0]])
    np.testing.assert_allclose(random_walk(position, normals, 2.0, factor), position + 2.0 * factor @ normals,
                               rtol=1e-15)


class _State(NamedTuple):
    mh: MHState


def test_a_random_walk_chain_on_the_core_recovers_a_correlated_gaussian():
    mean = np.asarray([1.0, -2.0])
    covariance = np.asarray([[1.0, 0.6], [0.6, 2.0]])
    precision = np.linalg.inv(covariance)
    factor = np.linalg.cholesky(covariance)

    def log_density(x):
        return -0.5 * (x - mean) @ precision @ (x - mean)

    def init(rng_key, x):
        del rng_key
        return _State(MHState(x, log_density(x)))

    def step(rng_key, state, adapting=False):
        key_move, key_accept = jax.random.split(rng_key)
        x = random_walk(state.mh.position, jax.random.normal(key_move, (2,)), 2.38 / np.sqrt(2), factor)
        mh, info = accept_reject(jnp.log(jax.random.uniform(key_accept)), state.mh, MHState(x, log_density(x)))
        return _State(mh), info

    chains, draws = 4, 5000
    states = jax.vmap(init)(jax.random.split(jax.random.key(0), chains), jnp.zeros((chains, 2)))
    result = run_chains(step, states, jax.random.key(1), 500, draws, extract=lambda s: s.mh.position,
                        progress=False, segment_size=draws)
    x = np.asarray(result.draws)
    for i in range(2):
        assert abs(x[..., i].mean() - mean[i]) < 4 * float(az.mcse(x[..., i]))
        squared = (x[..., i] - mean[i]) ** 2
        assert abs(squared.mean() - covariance[i, i]) < 4 * float(az.mcse(squared))
    cross = (x[..., 0] - mean[0]) * (x[..., 1] - mean[1])
    assert abs(cross.mean() - covariance[0, 1]) < 4 * float(az.mcse(cross))
    accepted = np.asarray(result.infos.accepted, dtype=float)
    rates = np.asarray(result.infos.acceptance_rate)
    assert abs(accepted.mean() - rates.mean()) < 4 * float(az.mcse(accepted - rates))
