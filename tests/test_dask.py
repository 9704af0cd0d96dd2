"""Chains and run-file grids on a Dask scheduler: the same results files, bit for bit, as the local runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from gpdsl.api import run
from gpdsl.cli import main
from gpdsl.cli.options import settings_from_mapping
from gpdsl.inference.chain_groups import chain_blocks
from gpdsl.registry import get_method
from gpdsl.results import arviz_compat
from gpdsl.results.io import read_netcdf

distributed = pytest.importorskip("distributed")

ROOT = Path(__file__).resolve().parents[1]
REGRESSION = ROOT / "models" / "gp_regression.gpm"
CLASSIFICATION = ROOT / "models" / "gp_classification.gpm"


@pytest.fixture(scope="module")
def client():
    import jax  # noqa: F401  (imported before the workers start: a fork would carry it into them)

    from gpdsl.scale_out import local_cluster

    with local_cluster(workers=2) as cluster, distributed.Client(cluster) as connected:
        yield connected


@pytest.fixture(scope="module")
def regression():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 2))
    return {"N": 12, "D": 2, "X": X, "y": np.sin(X[:, 0]) + 0.1 * rng.normal(size=12)}


@pytest.fixture(scope="module")
def classification():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(12, 2))
    return {"N": 12, "D": 2, "X": X, "y": (X[:, 0] + 0.5 * rng.normal(size=12) > 0).astype(int)}


def variables(path) -> dict:
    """Every variable of every group of a results file, as numpy arrays by (group, name)."""
    found = {}
    for name, dataset in arviz_compat.groups(read_netcdf(path)).items():
        for variable in dataset.data_vars:
            found[(name, variable)] = np.asarray(dataset[variable])
    return found


def assert_bitwise_equal(path_a, path_b):
    a, b = variables(path_a), variables(path_b)
    assert sorted(a) == sorted(b)
    for key in a:
        assert a[key].dtype == b[key].dtype and a[key].shape == b[key].shape, key
        assert np.array_equal(a[key], b[key], equal_nan=True), key


def test_chain_blocks_cover_the_chains_in_order():
    assert chain_blocks(4, 1) == [(0, 4)]
    assert chain_blocks(4, 2) == [(0, 2), (2, 4)]
    assert chain_blocks(5, 3) == [(0, 2), (2, 4), (4, 5)]
    assert chain_blocks(3, 3) == [(0, 1), (1, 2), (2, 3)]
    with pytest.raises(ValueError):
        chain_blocks(2, 3)


def test_workers_start_by_spawn_not_fork(client):
    def how_started():
        with open("/proc/self/cmdline", "rb") as stream:
            return b"spawn_main" in stream.read()

    assert list(client.run(how_started).values()) == [True, True]


def test_gibbs_chains_on_workers_equal_the_local_run_with_the_same_groups(client, regression, tmp_path):
    settings = settings_from_mapping(get_method("gibbs"), {"chains": 4, "warmup": 20, "draws": 20})
    on_workers = run(REGRESSION, regression, "gibbs", settings, seed=5, scheduler=client, out=tmp_path / "dask.nc")
    here = run(REGRESSION, regression, "gibbs", settings, seed=5, chain_groups=4, out=tmp_path / "local.nc")
    assert on_workers.attrs["chain_groups"] == here.attrs["chain_groups"] == 4
    assert_bitwise_equal(tmp_path / "dask.nc", tmp_path / "local.nc")
    draws = variables(tmp_path / "dask.nc")[("posterior", "variance")]
    assert draws.shape == (4, 20) and len({row.tobytes() for row in draws}) == 4


def test_pm_chains_on_workers_equal_the_local_run_with_the_same_groups(client, classification, tmp_path):
    settings = settings_from_mapping(get_method("pm"), {"chains": 4, "warmup": 20, "draws": 20, "num_importance": 4,
                                                        "sample_latent": True})
    run(CLASSIFICATION, classification, "pm", settings, seed=7, scheduler=client, chain_groups=2,
        out=tmp_path / "dask.nc")
    run(CLASSIFICATION, classification, "pm", settings, seed=7, chain_groups=2, out=tmp_path / "local.nc")
    assert_bitwise_equal(tmp_path / "dask.nc", tmp_path / "local.nc")
    found = variables(tmp_path / "dask.nc")
    assert {("log_likelihood", "y"), ("posterior_predictive", "y"), ("posterior", "f")} <= set(found)
    report = json.loads(read_netcdf(tmp_path / "dask.nc").attrs["report"])
    assert np.shape(report["proposal_covariance"])[0] == 4


def test_the_cli_runs_chains_on_a_scheduler_address(client, classification, tmp_path, capsys):
    data = tmp_path / "data.json"
    data.write_text(json.dumps({k: np.asarray(v).tolist() for k, v in classification.items()}))
    common = ["sample", str(CLASSIFICATION), "--data", str(data), "--method", "mcmc-ep", "--chains", "2",
              "--warmup", "20", "--draws", "20", "--seed", "3", "--quiet"]
    assert main([*common, "--scheduler", client.scheduler.address, "--out", str(tmp_path / "dask.nc")]) == 0
    assert main([*common, "--chain-groups", "2", "--out", str(tmp_path / "local.nc")]) == 0
    assert_bitwise_equal(tmp_path / "dask.nc", tmp_path / "local.nc")


def test_a_run_file_grid_on_a_scheduler_equals_the_local_runs(client, regression, tmp_path):
    (tmp_path / "data.json").write_text(json.dumps({k: np.asarray(v).tolist() for k, v in regression.items()}))
    runs = (f'model = "{REGRESSION}"\ndata = "data.json"\nseed = 2\n\n'
            '[[run]]\nmethod = "gibbs"\nsettings = { chains = 2, warmup = 15, draws = 15 }\n'
            'out = "{where}_{theta_update}.nc"\ngrid = { theta_update = ["surr", "aa"] }\n'
            '[[run]]\nmethod = "ml"\nout = "{where}_ml.nc"\n')
    (tmp_path / "local.toml").write_text(runs.replace("{where}", "local"))
    (tmp_path / "dask.toml").write_text(f'scheduler = "{client.scheduler.address}"\n' + runs.replace("{where}", "dask"))
    assert main(["run", str(tmp_path / "local.toml"), "--quiet"]) == 0
    assert main(["run", str(tmp_path / "dask.toml"), "--quiet"]) == 0
    for run_name in ("surr", "aa", "ml"):
        assert_bitwise_equal(tmp_path / f"dask_{run_name}.nc", tmp_path / f"local_{run_name}.nc")
    assert "chain_groups" not in read_netcdf(tmp_path / "dask_aa.nc").attrs


@pytest.mark.parametrize("command", ["sample", "run"])
def test_without_dask_the_scheduler_is_refused_in_one_line_before_anything_runs(command, monkeypatch, tmp_path,
                                                                                capsys):
    monkeypatch.setitem(sys.modules, "distributed", None)
    out = tmp_path / "fit.nc"
    if command == "sample":
        argv = ["sample", str(REGRESSION), "--data", str(tmp_path / "missing.json"), "--method", "gibbs",
                "--scheduler", "local", "--out", str(out)]
    else:
        (tmp_path / "runs.toml").write_text(f'scheduler = "local"\nmodel = "{REGRESSION}"\ndata = "missing.json"\n'
                                            'method = "gibbs"\nout = "fit.nc"\n')
        argv = ["run", str(tmp_path / "runs.toml")]
    assert main(argv) == 1
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "install gpdsl[dask]" in error
    assert not out.exists()


def test_chain_groups_are_refused_where_they_cannot_hold(regression, tmp_path):
    from gpdsl.api import prepare
    from gpdsl.errors import MethodError

    with pytest.raises(MethodError, match="no chains gpdsl can group"):
        prepare(REGRESSION, regression, "nuts", chain_groups=2)
    with pytest.raises(MethodError, match="from 1 to the 4 chains"):
        prepare(REGRESSION, regression, "gibbs", chain_groups=5)
    with pytest.raises(MethodError, match="cannot be combined with --scheduler"):
        prepare(REGRESSION, regression, "gibbs", scheduler="local", checkpoint=tmp_path / "c.npz")
    assert prepare(REGRESSION, regression, "gibbs", scheduler="local").context.chain_groups == 4
    assert prepare(REGRESSION, regression, "gibbs").context.chain_groups is None


TINY_GPLVM = """
data {
  int N; int Q; int D;
  matrix[N, 1] X;
  matrix[N, D] Y;
}
parameters {
  real<lower=0> s1 ~ gamma(4, 8);
}
latent {
  matrix[N, Q] Z;
}
model {
  Z ~ gp(X, rbf(variance = 1, inv_ls2 = s1) + white(1e-6));
  F ~ gp(Z, rbf(variance = 1, inv_ls2 = 1));
  Y ~ normal(F, 0.5);
}
"""


@pytest.mark.slow
def test_pm_gplvm_from_model_text_on_workers_equals_the_local_run_with_the_same_groups(client, tmp_path):
    """Each worker repeats the variational start before advancing its group (about 2 min on 2 busy cores)."""
    x = np.linspace(0.0, 3.0, 6)
    data = {"N": 6, "Q": 1, "D": 1, "X": x[:, None], "Y": np.sin(np.sin(x))[:, None]}
    settings = settings_from_mapping(get_method("pm-gplvm"), {
        "chains": 4, "warmup": 20, "draws": 20, "num_importance": 20, "num_inducing": 6, "latent_sweeps": 2})
    run(TINY_GPLVM, data, "pm-gplvm", settings, seed=2, scheduler=client, chain_groups=2, out=tmp_path / "dask.nc")
    run(TINY_GPLVM, data, "pm-gplvm", settings, seed=2, chain_groups=2, out=tmp_path / "local.nc")
    assert_bitwise_equal(tmp_path / "dask.nc", tmp_path / "local.nc")


@pytest.mark.slow
def test_nuts_on_a_scheduler_is_one_task_equal_to_the_local_run(client, classification, tmp_path):
    settings = settings_from_mapping(get_method("nuts"), {"chains": 2, "warmup": 100, "draws": 100})
    run(CLASSIFICATION, classification, "nuts", settings, seed=4, scheduler=client, out=tmp_path / "dask.nc")
    run(CLASSIFICATION, classification, "nuts", settings, seed=4, out=tmp_path / "local.nc")
    assert_bitwise_equal(tmp_path / "dask.nc", tmp_path / "local.nc")
