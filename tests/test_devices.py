"""``--device auto|cpu|gpu``: chosen before the run, said and recorded; a seeded CPU run's draws unchanged by it.

The reference digests are those of the same runs made by the code before ``--device`` existed (commit a0cc308),
with jax 0.10.2 on x86-64 with two host devices (the two chains then run one per device, through the sharded
path of the driver); they are compared where those hold.
"""

from __future__ import annotations

import hashlib
import json
import platform
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gpdsl
from gpdsl.numerics import devices, linalg
from gpdsl.numerics.devices import DeviceError, resolve_device
from tests.command_line import run_in_process as cli

MODEL = "models/gp_classification.gpm"
SEEDED = {"chains": 2, "warmup": 10, "draws": 10, "seed": 5}
REFERENCE = {
    "gibbs": {"d5a5b0e8bb1d873c873a93934c235dfa289c5dd9020a5794dbf1385334c0072d",
              "59fc81d8967142f05787a6063ddfc9f535867f9bf1205250bf501bf9328e678c",
              "111e484bdb293efc8f44167e9cb57ffd428af5e698513cbb9b9186c645748ecd"},
    "pm": {"ded32406e5321ee50c9a2d6508df6f7e1fc8226e7f4c11860dadb64bd032e0fb",
           "b85508250cdae9501f6d775445a81cd2a44d318347ec7bef890501f574c89608"},
}
"""sha256 of the posterior draws of :func:`seeded_run` made before ``--device`` (see the module's note): XLA compiles
for the host's CPU, and a0cc308's gibbs draws differ in their last bits between the two x86-64 machines it ran on (the
second, an AMD EPYC, gives the second digest, a0cc308 and this code alike; a third, an AMD EPYC with AVX-512 (family
25, model 17), the third, and pm's second, a0cc308 and this code alike)."""
SETTINGS = {"gibbs": {}, "pm": {"num_importance": 2}}
NO_GPU = not devices.gpu_devices()


def classification_data() -> dict:
    rng = np.random.default_rng(3)
    X = rng.normal(size=(16, 2))
    y = (X[:, 0] + 0.3 * rng.normal(size=16) > 0).astype(int)
    return {"N": 16, "D": 2, "X": X, "y": y}


def seeded_run(method: str, **keywords):
    return gpdsl.sample(MODEL, classification_data(), method, **SEEDED, **SETTINGS[method], **keywords)


def digest(results) -> str:
    posterior = results.posterior
    hashed = hashlib.sha256()
    for name in sorted(posterior.data_vars):
        hashed.update(name.encode())
        hashed.update(np.ascontiguousarray(posterior[name].values).tobytes())
    return hashed.hexdigest()


def reference_holds() -> str | None:
    """Why the reference digests do not apply here, or None when they do."""
    if jax.__version__ != "0.10.2" or platform.machine() != "x86_64":
        return f"the reference draws were made with jax 0.10.2 on x86-64, not jax {jax.__version__} on " \
               f"{platform.machine()}"
    if len(jax.devices("cpu")) < 2:
        return "the reference draws were made with two host devices (one chain each)"
    return None


@pytest.mark.skipif(not NO_GPU, reason="a GPU is present: auto picks it")
def test_auto_picks_the_cpu_without_a_gpu():
    assert resolve_device("auto") == "cpu"
    assert resolve_device("cpu") == "cpu"


def test_gpu_without_one_is_refused_saying_what_jax_sees_and_how_to_install(monkeypatch, capsys):
    monkeypatch.setattr(devices, "gpu_devices", lambda: [])
    with pytest.raises(DeviceError) as refused:
        resolve_device("gpu")
    assert "JAX sees no GPU" in refused.value.message and "cpu device" in refused.value.message
    assert "pip install 'gpdsl[cuda]'" in refused.value.hint
    status, _, err, seconds = cli(["sample", MODEL, "--data", "absent.json", "--method", "gibbs", "--device", "gpu",
                                   "--out", "never.nc"], capsys)
    assert status == 1 and "device error: device gpu: JAX sees no GPU" in err and "gpdsl[cuda]" in err
    assert "Traceback" not in err


def test_unknown_device_and_gpu_for_stan_are_refused(capsys):
    with pytest.raises(DeviceError, match="one of auto, cpu, gpu; got 'tpu'"):
        gpdsl.sample(MODEL, classification_data(), "gibbs", device="tpu")
    with pytest.raises(DeviceError, match="nuts runs in Stan, on the CPU"):
        gpdsl.sample(MODEL, classification_data(), "nuts", device="gpu")
    status, _, err, _ = cli(["fit", MODEL, "--data", "d.json", "--device", "tpu", "--out", "o.nc"], capsys)
    assert status == 1 and "argument --device: invalid choice: 'tpu'" in err


def test_seeded_cpu_draws_are_those_of_before_and_the_device_is_said_and_recorded(capsys):
    results = seeded_run("gibbs", device="cpu", progress=True)
    err = capsys.readouterr().err
    assert f"device: cpu ({len(jax.devices('cpu'))} host devices" in err
    assert results.attrs["device"] == "cpu" and results.attrs["device_name"] == jax.devices("cpu")[0].device_kind
    why = reference_holds()
    if why is not None:
        pytest.skip(why)
    assert digest(results) in REFERENCE["gibbs"]


@pytest.mark.slow
@pytest.mark.skipif(not NO_GPU, reason="a GPU is present: auto picks it, whose draws differ in their last bits")
@pytest.mark.parametrize("method", ["gibbs", "pm"])
def test_default_device_draws_equal_the_cpu_ones_and_those_of_before(method):
    chosen, default = seeded_run(method, device="cpu"), seeded_run(method)
    assert digest(chosen) == digest(default)
    assert default.attrs["device"] == "cpu"
    why = reference_holds()
    if why is not None:
        pytest.skip(why)
    assert digest(default) in REFERENCE[method]


def test_the_gpu_path_of_the_linear_algebra_is_the_batched_one_with_the_same_answers(monkeypatch):
    """Off the CPU, the vmapped factorisations and solves are JAX's batched ones (no ``lax.map``, which is a ``scan``), and agree with
    NumPy, derivatives included; checked here by making the platform read as a GPU's."""
    rng = np.random.default_rng(0)
    A = rng.normal(size=(3, 5, 5))
    K = A @ np.swapaxes(A, 1, 2) + 5 * np.eye(5)
    b = rng.normal(size=(3, 5, 2))

    def solved(K, b):
        L = linalg.cholesky(K)
        return linalg.cho_solve((L, True), b), linalg.eigh(K)[0]

    def loss(K):
        return jnp.sum(jax.vmap(lambda K, b: linalg.cho_solve((linalg.cholesky(K), True), b))(K, b) ** 2)

    on_cpu = jax.make_jaxpr(jax.vmap(solved))(K, b)
    expected_x, expected_w = jax.vmap(solved)(K, b)
    expected_gradient = jax.grad(loss)(K)
    monkeypatch.setattr(linalg, "run_platform", lambda: "gpu")
    batched = jax.make_jaxpr(jax.vmap(solved))(K, b)
    x, w = jax.vmap(solved)(K, b)
    assert "scan" in str(on_cpu) and "scan" not in str(batched)
    np.testing.assert_allclose(x, np.linalg.solve(K, b), rtol=1e-10)
    np.testing.assert_allclose(w, np.linalg.eigvalsh(K), rtol=1e-10)
    np.testing.assert_allclose(x, expected_x, rtol=1e-12)
    np.testing.assert_allclose(w, expected_w, rtol=1e-12)
    np.testing.assert_allclose(jax.grad(loss)(K), expected_gradient, rtol=1e-9)


def test_a_run_file_takes_the_device_for_its_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(devices, "gpu_devices", lambda: [])
    (tmp_path / "data.json").write_text(json.dumps(
        {name: np.asarray(value).tolist() for name, value in classification_data().items()}))
    path = tmp_path / "runs.toml"
    path.write_text(f'model = "{Path(MODEL).resolve()}"\ndata = "data.json"\nseed = 3\n'
                    '[[run]]\nmethod = "gibbs"\nout = "gibbs.nc"\n')
    status, out, _, _ = cli(["run", path, "--dry-run", "--device", "cpu"], capsys)
    assert status == 0 and "1 run checked" in out
    status, _, err, _ = cli(["run", path, "--dry-run", "--device", "gpu"], capsys)
    assert status == 1 and "device error: run 1: device gpu: JAX sees no GPU" in err
