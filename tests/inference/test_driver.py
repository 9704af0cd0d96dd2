"""The chain driver: shapes, warmup, adaptation, determinism, checkpoints and resuming."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gpdsl.errors import GpdslError
from gpdsl.inference.driver import Interrupted, run_chains

NUM_CHAINS, NUM_WARMUP, NUM_DRAWS = 3, 20, 45


class ToyState(NamedTuple):
    position: jax.Array
    log_scale: jax.Array


class ToyInfo(NamedTuple):
    acceptance_rate: jax.Array
    accepted: jax.Array


def toy_step(rng_key, state, adapting):
    """Random-walk MH on N(0, I_2) adapting its scale towards 25% acceptance during warmup."""
    key_move, key_accept = jax.random.split(rng_key)
    proposal = state.position + jnp.exp(state.log_scale) * jax.random.normal(key_move, state.position.shape)
    log_ratio = 0.5 * (jnp.sum(state.position**2) - jnp.sum(proposal**2))
    accepted = jnp.log(jax.random.uniform(key_accept)) < log_ratio
    rate = jnp.minimum(1.0, jnp.exp(log_ratio))
    log_scale = jnp.where(adapting, state.log_scale + 0.5 * (rate - 0.25), state.log_scale)
    return ToyState(jnp.where(accepted, proposal, state.position), log_scale), ToyInfo(rate, accepted)


def starts():
    return ToyState(jnp.zeros((NUM_CHAINS, 2)), jnp.zeros(NUM_CHAINS))


def run(**options):
    settings = dict(segment_size=10, progress=False)
    settings.update(options)
    return run_chains(toy_step, starts(), jax.random.key(5), NUM_WARMUP, NUM_DRAWS, **settings)


def test_shapes_and_warmup_excluded():
    result = run(extract=lambda state: {"x": state.position, "log_scale": state.log_scale}, keep_warmup=True)
    assert result.draws["x"].shape == (NUM_CHAINS, NUM_DRAWS, 2)
    assert result.infos.acceptance_rate.shape == (NUM_CHAINS, NUM_DRAWS)
    assert result.infos.accepted.dtype == bool
    assert result.warmup_draws["x"].shape == (NUM_CHAINS, NUM_WARMUP, 2)
    assert result.final_state.position.shape == (NUM_CHAINS, 2)
    np.testing.assert_array_equal(result.final_state.position, result.draws["x"][:, -1])
    assert set(result.timings) >= {"total", "compile", "warmup", "sampling"}
    assert result.timings["sampling"] <= result.timings["total"]
    assert result.num_chains == NUM_CHAINS and result.draws_per_second() > 0
    assert run().warmup_draws is None


def test_scale_adapts_during_warmup_only():
    result = run(extract=lambda state: state.log_scale, keep_warmup=True)
    warmup, sampling = result.warmup_draws, result.draws
    assert np.all(np.abs(np.diff(warmup, axis=1)).sum(axis=1) > 0)
    np.testing.assert_array_equal(sampling, np.broadcast_to(warmup[:, -1:], sampling.shape))


def test_deterministic_given_the_key_and_independent_of_segment_size():
    first, second, other_segments = run(), run(), run(segment_size=7)
    np.testing.assert_array_equal(first.draws, second.draws)
    np.testing.assert_array_equal(first.draws, other_segments.draws)
    different = run_chains(toy_step, starts(), jax.random.key(6), NUM_WARMUP, NUM_DRAWS, progress=False)
    assert not np.array_equal(first.draws, different.draws)
    assert not np.array_equal(first.draws[0], first.draws[1]), "chains must use different keys"


def test_checkpoint_is_written_atomically_and_resumable(tmp_path):
    path = tmp_path / "run.npz"
    full = run(checkpoint_path=path)
    assert path.exists() and [p.name for p in tmp_path.iterdir()] == ["run.npz"]
    with np.load(path) as stored:
        assert stored["draws_draw_0"].shape == (NUM_CHAINS, NUM_DRAWS, 2)

    partial_path = tmp_path / "partial.npz"

    def stop_midway(iteration, phase):
        if phase == "sampling" and iteration >= NUM_WARMUP + 20:
            raise Interrupted("stopped by the test")

    with pytest.raises(Interrupted):
        run(checkpoint_path=partial_path, on_segment=stop_midway)
    with np.load(partial_path) as stored:
        assert stored["draws_draw_0"].shape == (NUM_CHAINS, 20, 2)
    resumed = run(checkpoint_path=partial_path, resume=True, segment_size=8)
    assert resumed.timings["resumed_at"] == NUM_WARMUP + 20
    assert resumed.draws.shape == (NUM_CHAINS, NUM_DRAWS, 2)
    np.testing.assert_array_equal(resumed.draws, full.draws)
    np.testing.assert_array_equal(resumed.infos.acceptance_rate, full.infos.acceptance_rate)

    finished = run(checkpoint_path=path, resume=True)
    np.testing.assert_array_equal(finished.draws, full.draws)


def test_checkpoint_of_another_run_is_refused(tmp_path):
    path = tmp_path / "run.npz"
    run(checkpoint_path=path)
    with pytest.raises(GpdslError, match="different run"):
        run_chains(toy_step, starts(), jax.random.key(9), NUM_WARMUP, NUM_DRAWS, progress=False,
                   checkpoint_path=path, resume=True)


def test_no_draws_gives_empty_arrays():
    result = run_chains(toy_step, starts(), jax.random.key(1), 5, 0, progress=False)
    assert result.draws.shape == (NUM_CHAINS, 0, 2)
    assert result.infos.accepted.shape == (NUM_CHAINS, 0)


def test_thinning_keeps_every_thin_th_draw_of_the_same_chain():
    thin = 3
    kept = run_chains(toy_step, starts(), jax.random.key(5), NUM_WARMUP, 15, progress=False, thin=thin,
                      segment_size=7)
    every = run_chains(toy_step, starts(), jax.random.key(5), NUM_WARMUP, 15 * thin, progress=False)
    assert kept.draws.shape == (NUM_CHAINS, 15, 2) and kept.num_draws == 15
    np.testing.assert_array_equal(kept.draws, every.draws[:, ::thin])
    np.testing.assert_array_equal(kept.infos.acceptance_rate, every.infos.acceptance_rate[:, ::thin])
    np.testing.assert_array_equal(kept.final_state.position, every.final_state.position)


def test_a_thinned_run_resumes_to_the_same_draws_and_refuses_another_thin(tmp_path):
    path = tmp_path / "thinned.npz"
    options = dict(progress=False, thin=4, segment_size=9, checkpoint_path=path)
    full = run_chains(toy_step, starts(), jax.random.key(5), NUM_WARMUP, 10, thin=4, progress=False)

    def stop_midway(iteration, phase):
        if phase == "sampling" and iteration >= NUM_WARMUP + 18:
            raise Interrupted("stopped by the test")

    with pytest.raises(Interrupted):
        run_chains(toy_step, starts(), jax.random.key(5), NUM_WARMUP, 10, on_segment=stop_midway, **options)
    with np.load(path) as stored:
        assert stored["draws_draw_0"].shape[1] == -(-(38 - NUM_WARMUP) // 4)  # segments end at 9, 18, 20, 29, 38
    with pytest.raises(GpdslError, match="its thin is 4, this run's is 2"):
        run_chains(toy_step, starts(), jax.random.key(5), NUM_WARMUP, 10, resume=True,
                   **{**options, "thin": 2})
    resumed = run_chains(toy_step, starts(), jax.random.key(5), NUM_WARMUP, 10, resume=True, **options)
    np.testing.assert_array_equal(resumed.draws, full.draws)
