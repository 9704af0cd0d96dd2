"""Options that size arrays (issue 40): the largest value each accepts (2^31 - 1) of every option that multiplies
what a run holds per iteration is refused before the run, naming the option and the memory it would take (not
XLA's RESOURCE_EXHAUSTED after the compile, nor an abort of the process); an allocation that still fails is one
line; ``forecast --steps`` is bounded, and a simulation that stops being finite says at which step, at once."""

import time

import numpy as np
import pytest

from gpdsl.settings import LARGEST_INT
from tests.reliability.helpers import QUICK, make_work, no_internal_error, refused, write_json

RUNS = {"gibbs": ["sample", "gp_classification.gpm", "cls.json"],
        "ep-ml": ["sample", "gp_classification.gpm", "cls.json"],
        "pm-gplvm": ["sample", "supervised_gplvm.gpm", "sup.json"],
        "sequential": ["sample", "sequential_latent_gp.gpm", "seq.json"]}
SIZING = [("gibbs", "--repeat-f"), ("gibbs", "--repeat-theta"), ("ep-ml", "--starts"), ("pm-gplvm", "--laplace-starts"),
          ("pm-gplvm", "--latent-sweeps"),
          ("sequential", "--states"), ("sequential", "--thin"), ("sequential", "--burn-in"),
          ("sequential", "--repeat-f"), ("sequential", "--initial-repeat-f"), ("sequential", "--final-repeat-f")]


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    root = make_work(tmp_path_factory.mktemp("option_sizes"))
    write_json(root / "series.json", {"y": np.sin(np.arange(60) / 5) + 0.3 * np.random.default_rng(0).normal(size=60)})
    return root


@pytest.fixture
def memory(monkeypatch):
    """16 GiB of memory available, on any machine (so that no test starts a run that a larger one would accept)."""
    import gpdsl.data.preflight

    monkeypatch.setattr(gpdsl.data.preflight, "available_memory", lambda: 16 * 2**30)


@pytest.mark.parametrize("method, flag", SIZING, ids=[f"{m} {f}" for m, f in SIZING])
def test_the_largest_value_of_an_option_that_sizes_arrays_is_refused_before_the_run(work, capsys, memory, method,
                                                                                     flag):
    command, model, data = RUNS[method]
    out = work / "sizes.nc"
    err = refused([command, work / model, "--data", work / data, "--method", method, "--seed", 1, "--out", out, flag,
                   LARGEST_INT], capsys, f"{flag} {LARGEST_INT}", out, one_line=True)
    assert "would take" in err and "of memory is available" in err


@pytest.mark.parametrize("method, flag", SIZING, ids=[f"{m} {f}" for m, f in SIZING])
def test_the_memory_check_counts_each_sizing_option(work, memory, method, flag):
    """The option alone, at its largest, is what the check refuses: the others at their defaults pass it."""
    from gpdsl.api import check_file
    from gpdsl.data.io import load_data
    from gpdsl.data.preflight import verify_memory
    from gpdsl.errors import MethodError
    from gpdsl.registry import methods
    from gpdsl.settings import cli_fields, flag_of

    entry = methods()[method]
    field = next(f for f in cli_fields(entry.settings) if flag_of(f) == flag)
    _, model, data = RUNS[method]
    model, _ = check_file(work / model)
    values, _ = load_data(work / data, model)
    verify_memory(model, values, entry.settings().run_plan())
    with pytest.raises(MethodError, match=f"{flag} {LARGEST_INT}"):
        verify_memory(model, values, entry.settings(**{field.name: LARGEST_INT}).run_plan())


def test_an_allocation_that_fails_in_xla_is_one_line(work, capsys, monkeypatch):
    import gpdsl.api
    from jax.errors import JaxRuntimeError

    def exhausted(*args, **kwargs):
        raise JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory allocating 966367641600 bytes.")

    monkeypatch.setattr(gpdsl.api, "execute", exhausted)
    out = work / "exhausted.nc"
    err = refused(["fit", work / "gp_regression.gpm", "--data", work / "reg.json", "--method", "ml", "--seed", 1,
                   "--out", out], capsys, "the run ran out of memory (RESOURCE_EXHAUSTED: Out of memory allocating "
                                          "966367641600 bytes.)", out)
    assert "hint: lower the sizes" in err


@pytest.mark.parametrize("steps", [1_000_001, LARGEST_INT])
def test_forecast_steps_are_bounded(work, capsys, steps):
    out = work / "forecast.nc"
    refused(["forecast", work / "gp_narx.gpm", "--data", work / "series.json", "--lag", 3, "--seed", 1, "--out", out,
             "--steps", steps], capsys, f"steps must be an integer in [1, 1000000]; got {steps}", out, one_line=True)


def test_a_free_simulation_that_stops_being_finite_names_its_step_at_once():
    from gpdsl.errors import NumericalError
    from gpdsl.inference.predict.free_simulation import CHUNK, simulate
    from gpdsl.kernels.stationary import RBF

    X = np.array([[0.0], [1.0], [2.0]])
    started = time.perf_counter()
    with pytest.raises(NumericalError, match=r"not finite from step 1 of 100000"):
        simulate(RBF(variance=1e200, lengthscale=1.0), 1e-6, X, np.array([1.0, -1.0, 1.0]), [0.0], 100_000)
    assert CHUNK < 100_000 and time.perf_counter() - started < QUICK


def test_a_forecast_runs_in_chunks_to_the_same_predictions(work, capsys):
    from gpdsl.inference.predict import free_simulation
    from gpdsl.kernels.stationary import RBF

    rng = np.random.default_rng(3)
    X, y = rng.normal(size=(20, 2)), rng.normal(size=20)
    kernel = RBF(variance=1.0, lengthscale=1.0)
    whole = free_simulation.simulate(kernel, 0.1, X, y, X[0], 25, feedback="gaussian")
    chunk = free_simulation.CHUNK
    try:
        free_simulation.CHUNK = 7
        pieces = free_simulation.simulate(kernel, 0.1, X, y, X[0], 25, feedback="gaussian")
    finally:
        free_simulation.CHUNK = chunk
    assert np.allclose(whole.mean, pieces.mean, rtol=1e-12) and np.allclose(whole.variance, pieces.variance,
                                                                             rtol=1e-12)
    no_internal_error(["forecast", work / "gp_narx.gpm", "--data", work / "series.json", "--lag", 2, "--seed", 1,
                       "--quiet", "--steps", 3000, "--feedback", "mean", "--out", work / "long.nc"], capsys)


@pytest.mark.parametrize("name", ["d.csv", "d.nc", "d.txt", "d"])
def test_gpdsl_data_refuses_an_output_that_is_not_json(work, capsys, name):
    refused(["data", "pima_tr", "-o", work / name], capsys, f"-o {work / name}: gpdsl data writes JSON", work / name,
            one_line=True)


@pytest.mark.parametrize("steps, rows", [(10**9, 10**9), (20, 10**6)])
def test_a_simulated_dataset_too_large_to_draw_is_refused(work, capsys, steps, rows):
    out = work / "simulated.json"
    refused(["data", "tegner_sequential", "--steps", steps, "--rows", rows, "-o", out], capsys,
            f"--steps {steps} x --rows {rows} points would take", out, one_line=True)


def test_an_allocation_that_fails_inside_an_xla_computation_is_one_line(work, capsys, monkeypatch):
    import gpdsl.api
    from jax.errors import JaxRuntimeError

    def exhausted(*args, **kwargs):
        raise JaxRuntimeError("INTERNAL: Error dispatching computation: Out of memory allocating 8000000000 bytes.")

    monkeypatch.setattr(gpdsl.api, "execute", exhausted)
    out = work / "internal.nc"
    refused(["fit", work / "gp_regression.gpm", "--data", work / "reg.json", "--method", "ml", "--seed", 1, "--out",
             out], capsys, "the run ran out of memory (INTERNAL: Error dispatching computation: Out of memory", out)


CHAIN_METHODS = {"nuts": ("gp_classification.gpm", "cls.json"), "pm": ("gp_classification.gpm", "cls.json"),
                 "mcmc-ep": ("gp_classification.gpm", "cls.json"), "gibbs": ("gp_classification.gpm", "cls.json"),
                 "pm-gplvm": ("supervised_gplvm.gpm", "sup.json")}


@pytest.mark.parametrize("method", CHAIN_METHODS)
@pytest.mark.parametrize("warmup, draws, thin", [(LARGEST_INT, 1, 1), (LARGEST_INT - 10, 11, 1),
                                                 (1000, 2 ** 20, 2 ** 11)])
def test_iterations_beyond_32_bits_are_refused(work, capsys, method, warmup, draws, thin):
    """Stan failed with 'pop from empty list' at --warmup 2^31 - 1; thinned chains run draws x thin iterations."""
    model, data = CHAIN_METHODS[method]
    out = work / "iterations.nc"
    refused(["sample", work / model, "--data", work / data, "--method", method, "--seed", 1, "--chains", 1,
             "--warmup", warmup, "--draws", draws, "--thin", thin, "--out", out], capsys,
            f"--warmup + draws x thin must be at most {LARGEST_INT}", out, one_line=True)
