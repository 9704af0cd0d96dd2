"""Chains that cannot start or do not move are stopped or named with their values, never written as frozen draws.

Each model below breaks the sampler in one way: a kernel that is not positive definite at any value, a kernel of
NaN, a kernel positive definite only within 3e-5 of ``sigma = 1`` (a chain started there rejects every proposal).
"""

from __future__ import annotations

import json
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gpdsl.cli import main
from gpdsl.inference.chain_health import ChainStartError, StuckChainsError
from gpdsl.inference.driver import run_chains

BASE = """data {
  int N;
  int D;
  matrix[N, D] X;
  array[N] int<lower=0, upper=1> y;
}
parameters {
  real<lower=0> sigma ~ gamma(1.2, 0.2);
  vector<lower=0>[D] tau ~ gamma(1, 1);
}
model {
  f ~ gp(X, SCALE * rbf(lengthscale = tau));
  y ~ bernoulli_probit(f);
}
"""
FAULTS = {"negative_kernel": "(0 - sigma)", "nan_kernel": "(sigma * 0 / 0)",
          "narrow_band": "(1e-9 - (sigma - 1) * (sigma - 1))"}
RUN = ["--chains", "2", "--warmup", "50", "--draws", "20", "--segment-size", "10", "--seed", "3", "--quiet"]


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    work = tmp_path_factory.mktemp("faults")
    rng = np.random.default_rng(1)
    X = rng.normal(size=(12, 2))
    y = (X[:, 0] > 0).astype(int)
    (work / "data.json").write_text(json.dumps({"N": 12, "D": 2, "X": X.tolist(), "y": y.tolist()}))
    for name, scale in FAULTS.items():
        (work / f"{name}.gpm").write_text(BASE.replace("SCALE", scale))
    return work


def _sample(work, model, method, *extra):
    out = work / f"{model}_{method}_{abs(hash(tuple(extra)))}.nc"
    status = main(["sample", str(work / f"{model}.gpm"), "--data", str(work / "data.json"), "--method", method,
                   *RUN, *extra, "--out", str(out)])
    return status, out


@pytest.mark.parametrize("model, method", [("negative_kernel", "gibbs"), ("negative_kernel", "pm"),
                                           ("negative_kernel", "mcmc-ep"), ("nan_kernel", "gibbs"),
                                           ("nan_kernel", "pm")])
def test_chains_that_cannot_start_stop_the_run_naming_chains_and_values(work, capsys, model, method):
    status, out = _sample(work, model, method)
    err = capsys.readouterr().err
    assert status == 1 and not out.exists()
    assert "2 of 2 chains cannot start" in err and "-inf or NaN" in err
    assert "chain 1 (sigma = " in err and "chain 2 (sigma = " in err and "tau = [" in err
    assert "--init-value" in err and "priors" in err and "Traceback" not in err


@pytest.mark.parametrize("method, extra", [("gibbs", ["--theta-update", "sa"]), ("pm", [])])
def test_chains_stuck_through_warmup_stop_before_sampling(work, capsys, method, extra):
    status, out = _sample(work, "narrow_band", method, "--init-value", "sigma=1", *extra)
    err = capsys.readouterr().err
    assert status == 1 and not out.exists()
    assert "2 of 2 chains did not move in warmup" in err and "stopped before sampling" in err
    assert "chain 1 (sigma = 1." in err and "chain 2 (sigma = 1." in err and "Traceback" not in err


def test_stuck_chains_of_a_run_that_finishes_are_named_on_stderr_in_the_results_and_by_summary(work, capsys):
    """Chain groups are judged one group at a time, so a run in groups of one chain finishes whatever they did."""
    status, out = _sample(work, "narrow_band", "gibbs", "--init-value", "sigma=1", "--theta-update", "sa",
                          "--chain-groups", "2")
    err = capsys.readouterr().err
    assert status == 3 and out.exists()
    assert "warning: 2 of 2 chains did not move in warmup" in err and "chain 2 (sigma = 1." in err
    from gpdsl.results.io import read_netcdf
    from gpdsl.results.method_output import results_json

    assert results_json(read_netcdf(out), "report")["stuck_chains"] == [1, 2]
    assert main(["summary", str(out)]) == 0
    assert "2 of 2 chains did not move in warmup" in capsys.readouterr().out


def test_a_negative_surrogate_variance_is_refused_before_the_run(work, capsys):
    status, out = _sample(work, "narrow_band", "gibbs", "--surrogate-variance", "-1")
    err = capsys.readouterr().err
    assert status == 1 and not out.exists() and "--surrogate-variance" in err and "-1" in err


class _Info(NamedTuple):
    accepted: jax.Array


def _toy_step(key, state, adapting):
    """A random walk, except in chains whose ``frozen`` flag is set: those reject every proposal."""
    moved = jnp.logical_not(state["frozen"])
    x = jnp.where(moved, state["x"] + jax.random.normal(key), state["x"])
    return {"x": x, "frozen": state["frozen"]}, _Info(accepted=moved.astype(jnp.float64))


def _describe(state):
    return {"x": state["x"]}


def test_one_stuck_chain_among_several_is_named_and_the_run_finishes():
    states = {"x": jnp.arange(3.0), "frozen": jnp.asarray([False, True, False])}
    result = run_chains(_toy_step, states, jax.random.PRNGKey(0), 50, 10, extract=lambda s: s["x"], progress=False,
                        segment_size=7, describe=_describe)
    assert result.stuck_chains == [1]
    assert result.stuck_message.startswith("1 of 3 chains did not move in warmup") and "chain 2 (x = 1.)" in \
        result.stuck_message
    assert np.all(result.draws[1] == 1.0) and result.draws.shape == (3, 10)


def test_stuck_chains_are_found_from_the_draws_when_the_infos_say_nothing():
    step = lambda key, state, adapting: (_toy_step(key, state, adapting)[0], {})  # noqa: E731
    states = {"x": jnp.zeros(2), "frozen": jnp.asarray([True, False])}
    result = run_chains(step, states, jax.random.PRNGKey(0), 50, 5, extract=lambda s: s["x"], progress=False,
                        describe=_describe)
    assert result.stuck_chains == [0]


def test_a_warmup_too_short_to_judge_names_no_chain():
    states = {"x": jnp.zeros(2), "frozen": jnp.asarray([True, False])}
    result = run_chains(_toy_step, states, jax.random.PRNGKey(0), 49, 5, extract=lambda s: s["x"], progress=False)
    assert result.stuck_chains == [] and result.stuck_message is None


def test_every_chain_stuck_stops_before_sampling_with_the_checkpoint_kept(tmp_path):
    states = {"x": jnp.asarray([0.5, 2.0]), "frozen": jnp.asarray([True, True])}
    checkpoint = tmp_path / "stuck.npz"
    with pytest.raises(StuckChainsError, match=r"2 of 2 chains did not move.*chain 1 \(x = 0\.5\); chain 2 \(x = 2\.\)"):
        run_chains(_toy_step, states, jax.random.PRNGKey(0), 50, 5, extract=lambda s: s["x"], progress=False,
                   describe=_describe, checkpoint_path=checkpoint, segment_size=20)
    assert checkpoint.exists()
    with pytest.raises(StuckChainsError):
        run_chains(_toy_step, states, jax.random.PRNGKey(0), 50, 5, extract=lambda s: s["x"], progress=False,
                   checkpoint_path=checkpoint, resume=True)


def test_a_non_finite_initial_state_names_the_chain():
    states = {"x": jnp.asarray([0.0, jnp.nan, 1.0]), "frozen": jnp.asarray([False, False, False])}
    with pytest.raises(ChainStartError, match=r"1 of 3 chains cannot start.*chain 2 \(x = nan\)"):
        run_chains(_toy_step, states, jax.random.PRNGKey(0), 10, 5, extract=lambda s: s["x"], progress=False,
                   describe=_describe)
