"""Adaptive Metropolis over blocks with a global scale tuned towards a target acceptance (Andrieu & Thoms 2008,
Alg. 4): from a start covariance a million times too small the scale and the covariance recover in warmup, the frozen
chain has the target's moments (within 4 MCSE) and its acceptance rate is near the target's."""

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gpdsl.inference.driver import run_chains
from gpdsl.inference.mcmc.blocked_metropolis import make_blocked_metropolis, proposal_covariances

COVARIANCE = np.array([[1.0, 0.8, 0.0], [0.8, 1.0, 0.3], [0.0, 0.3, 2.0]])


def gaussian_chains(target_acceptance, start=1e-6, warmup=1000, draws=2000):
    precision = jnp.asarray(np.linalg.inv(COVARIANCE))

    def log_terms(key, theta, current):
        return (-0.5 * theta @ precision @ theta,), ()

    init, step = make_blocked_metropolis(log_terms, [range(3)], initial_covariance=start, g0=100,
                                         adapt_after_warmup=False, target_acceptance=target_acceptance)
    states = jax.vmap(init)(jax.random.split(jax.random.PRNGKey(0), 4), jnp.zeros((4, 3)))
    return run_chains(step, states, jax.random.PRNGKey(1), warmup, draws, progress=False,
                      extract=lambda s: s.position)


def test_the_scale_reaches_the_target_acceptance_and_the_chain_the_target():
    result = gaussian_chains(0.25)
    draws = np.asarray(result.draws)
    for i, sd in enumerate(np.sqrt(np.diag(COVARIANCE))):
        assert abs(draws[..., i].mean()) < 4 * float(az.mcse(draws[..., i]))
        assert abs(draws[..., i].std() - sd) < 4 * float(az.mcse(draws[..., i], method="sd"))
    assert 0.18 < float(np.asarray(result.infos.acceptance_rate).mean()) < 0.32
    state = result.final_state
    scaled = np.exp(2 * np.asarray(state.scales[0].log_scale))[:, None, None] * np.asarray(state.covariances[0])
    np.testing.assert_allclose(np.asarray(proposal_covariances(state)[0]), scaled)


def test_without_a_target_the_proposal_is_the_adapted_covariance():
    result = gaussian_chains(None, warmup=300, draws=100)
    assert result.final_state.scales == ()
    assert proposal_covariances(result.final_state) is result.final_state.covariances


@pytest.mark.parametrize("target", [0.1, 0.5])
def test_the_scale_follows_the_target_it_is_given(target):
    rate = float(np.asarray(gaussian_chains(target, start=1.0, warmup=1500, draws=1000).infos.acceptance_rate).mean())
    assert abs(rate - target) < 0.07
