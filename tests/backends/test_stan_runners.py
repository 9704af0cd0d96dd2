"""Tests for the Stan runners: stanc checks, PyStan (and, where installed, CmdStanPy) sampling, log_prob.

Every compiling test uses the one program below, so httpstan builds it once (about 50 s) and then
serves it from its cache.
"""

import math
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np
import pytest

from gpdsl.backends.stan import cmdstan_runner, runners
from gpdsl.backends.stan.cmdstan_runner import find_cmdstan, sample_cmdstanpy
from gpdsl.backends.stan.runners import (
    StanFit,
    log_prob_grad_pystan,
    log_prob_pystan,
    parameter_layout_pystan,
    sample_pystan,
    sample_stan,
    unconstrain_pystan,
)
from gpdsl.backends.stan.stanc import check_program, find_stanc, stanc_version
from gpdsl.errors import BackendError
from gpdsl.testing.imports import loaded_by
from tests.stan_available import PYSTAN_UNAVAILABLE, needs_pystan

PROGRAM = """\
data {
  int<lower=0> N;
  vector[N] y;
  real<lower=0> sigma;
}
parameters {
  real mu;
  real<lower=0> tau;
}
transformed parameters {
  matrix[2, 3] M;
  for (i in 1:2) {
    for (j in 1:3) {
      M[i, j] = 10 * i + j + mu;
    }
  }
}
model {
  target += normal_lpdf(mu | 0, 10);
  target += exponential_lpdf(tau | 1);
  target += normal_lpdf(y | mu, sigma);
}
generated quantities {
  array[2] vector[3] G;
  for (k in 1:2) {
    for (j in 1:3) {
      G[k][j] = 100 * k + j;
    }
  }
}
"""

BROKEN_PROGRAM = """\
parameters {
  real x;
}
model {
  x ~ normal(0, 1)
}
"""

Y = np.array([0.3, -1.2, 2.1, 0.8, 1.5, -0.4, 0.9, 1.1, 0.2, 1.7])
DATA = {"N": len(Y), "y": Y, "sigma": 1.0}
PRIOR_SD = 10.0
CHAINS, DRAWS = 4, 1000
CMDSTAN_MISSING = "CmdStan not installed: set CMDSTAN or run cmdstanpy.install_cmdstan()"
needs_cmdstan = pytest.mark.skipif(find_cmdstan() is None, reason=CMDSTAN_MISSING)
INITIALIZATION_FAILURE = (
    "Initialization failed: Stan rejected every initial value it tried (100 drawn uniformly from (-2, 2) on the "
    "unconstrained scale):\n"
    "  normal_lpdf: Scale parameter is 0, but must be positive! (line 21, column 2 to column 39 of the Stan program)"
)


def normal_logpdf(x, mean, sd):
    return -0.5 * ((x - mean) / sd) ** 2 - math.log(sd) - 0.5 * math.log(2 * math.pi)


def log_density(mu, tau, jacobian):
    """The program's target at constrained (mu, tau), plus log tau for the exp transform if asked."""
    value = normal_logpdf(mu, 0.0, PRIOR_SD) - tau + sum(normal_logpdf(y, mu, 1.0) for y in Y)
    return value + (math.log(tau) if jacobian else 0.0)


def conservative_mcse(values):
    return values.std() / math.sqrt(values.size / 4)


@pytest.fixture(scope="module", params=["pystan", "cmdstanpy"])
def fit(request) -> StanFit:
    if request.param == "cmdstanpy" and find_cmdstan() is None:
        pytest.skip(CMDSTAN_MISSING)
    if request.param == "pystan" and PYSTAN_UNAVAILABLE is not None:
        pytest.skip(PYSTAN_UNAVAILABLE)
    sampler = sample_pystan if request.param == "pystan" else sample_cmdstanpy
    return sampler(PROGRAM, DATA, chains=CHAINS, warmup=1000, draws=DRAWS, seed=20240607, progress=False)


def test_find_stanc_and_version():
    assert find_stanc().is_file()
    assert stanc_version().startswith("stanc3 v")


def test_check_program_accepts_valid_program():
    check_program(PROGRAM)


def test_check_program_rejects_broken_program_with_line_number():
    with pytest.raises(BackendError) as caught:
        check_program(BROKEN_PROGRAM, name="broken.stan")
    assert "'broken.stan', line 6" in caught.value.message
    assert "Ill-formed" in caught.value.message


def test_sample_reports_stanc_error_before_building():
    with pytest.raises(BackendError, match="line 6"):
        sample_pystan(BROKEN_PROGRAM, {}, progress=False)


def test_posterior_mean_matches_conjugate_result(fit):
    precision = 1 / PRIOR_SD**2 + len(Y)
    exact_mean = Y.sum() / precision
    mu = fit.draws["mu"]
    assert abs(mu.mean() - exact_mean) < 4 * conservative_mcse(mu)
    assert abs(mu.std() - precision**-0.5) < 0.1 * precision**-0.5
    tau = fit.draws["tau"]
    assert abs(tau.mean() - 1.0) < 4 * conservative_mcse(tau)


def test_draws_are_chain_draw_then_stan_shape(fit):
    assert set(fit.draws) == {"mu", "tau", "M", "G"}
    assert fit.draws["mu"].shape == (CHAINS, DRAWS)
    assert fit.draws["M"].shape == (CHAINS, DRAWS, 2, 3)
    assert fit.draws["G"].shape == (CHAINS, DRAWS, 2, 3)
    assert (fit.num_chains, fit.num_draws) == (CHAINS, DRAWS)


def test_matrix_and_array_elements_keep_their_indices(fit):
    i, j = np.meshgrid(np.arange(1, 3), np.arange(1, 4), indexing="ij")
    expected_m = 10 * i + j + fit.draws["mu"][..., None, None]
    np.testing.assert_allclose(fit.draws["M"], expected_m, rtol=1e-12, atol=1e-9)
    np.testing.assert_array_equal(fit.draws["G"], np.broadcast_to(100 * i + j, fit.draws["G"].shape))


def test_sample_stats_have_arviz_names_shapes_and_types(fit):
    expected = {"lp", "acceptance_rate", "step_size", "tree_depth", "n_steps", "diverging", "energy"}
    assert set(fit.sample_stats) == expected
    for values in fit.sample_stats.values():
        assert values.shape == (CHAINS, DRAWS)
    assert fit.sample_stats["diverging"].dtype == bool
    assert np.issubdtype(fit.sample_stats["tree_depth"].dtype, np.integer)
    assert np.all((fit.sample_stats["acceptance_rate"] >= 0) & (fit.sample_stats["acceptance_rate"] <= 1))


def test_chains_are_not_interleaved(fit):
    step_size = fit.sample_stats["step_size"]
    assert np.all(step_size == step_size[:, :1]), "the adapted step size is constant within a chain"
    assert len(np.unique(step_size[:, 0])) == CHAINS


def test_draws_keep_full_precision(fit):
    """CmdStan writes 6 significant digits unless told otherwise; PyStan passes doubles."""
    mu = fit.draws["mu"].ravel()
    rounded = np.array([float(f"{value:.6g}") for value in mu])
    assert np.mean(mu != rounded) > 0.99


def test_lp_matches_draws_at_every_iteration(fit):
    mu, tau = fit.draws["mu"], fit.draws["tau"]
    expected = np.vectorize(log_density)(mu, tau, True)
    np.testing.assert_allclose(fit.sample_stats["lp"], expected, rtol=1e-6)


def test_fit_records_settings_and_versions(fit):
    assert fit.settings["chains"] == CHAINS and fit.settings["draws"] == DRAWS
    assert fit.settings["adapt_delta"] == 0.8 and fit.settings["max_depth"] == 10
    assert fit.versions["stanc"].startswith("stanc3")
    assert fit.backend in fit.versions
    assert fit.wall_time >= fit.sampling_time > 0


@needs_pystan
def test_log_prob_with_and_without_jacobian():
    points = np.array([[0.3, math.log(0.7)], [-1.1, math.log(2.5)]])
    for jacobian in (True, False):
        values = log_prob_pystan(PROGRAM, DATA, points, jacobian=jacobian)
        expected = [log_density(mu, math.exp(log_tau), jacobian) for mu, log_tau in points]
        assert values.shape == (2,)
        np.testing.assert_allclose(values, expected, rtol=0, atol=1e-8)


@needs_pystan
def test_log_prob_gradient():
    mu, log_tau = 0.3, math.log(0.7)
    values, gradient = log_prob_grad_pystan(PROGRAM, DATA, np.array([[mu, log_tau]]), jacobian=True)
    expected_gradient = [-mu / PRIOR_SD**2 + (Y - mu).sum(), -math.exp(log_tau) + 1]
    np.testing.assert_allclose(values, [log_density(mu, math.exp(log_tau), True)], atol=1e-8)
    np.testing.assert_allclose(gradient, [expected_gradient], atol=1e-8)


def test_log_prob_rejects_points_that_are_not_a_matrix():
    with pytest.raises(BackendError, match=r"\(K, P\)"):
        log_prob_pystan(PROGRAM, DATA, np.zeros(2))


@needs_pystan
def test_unconstrain_and_parameter_layout():
    unconstrained = unconstrain_pystan(PROGRAM, DATA, {"mu": 0.3, "tau": 2.0})
    np.testing.assert_allclose(unconstrained, [0.3, math.log(2.0)], rtol=1e-14)
    layout = parameter_layout_pystan(PROGRAM, DATA)
    assert layout.names == ("mu", "tau", "M", "G")
    assert layout.dims == ((), (), (2, 3), (2, 3))
    assert layout.constrained_names[2:5] == ("M.1.1", "M.2.1", "M.1.2")


@pytest.mark.parametrize(
    "backend", [pytest.param("pystan", marks=needs_pystan), pytest.param("cmdstanpy", marks=needs_cmdstan)]
)
def test_an_initialization_failure_names_stans_reason_in_a_few_lines(backend):
    sampler = sample_pystan if backend == "pystan" else sample_cmdstanpy
    with pytest.raises(BackendError) as caught:
        sampler(PROGRAM, dict(DATA, sigma=0.0), chains=2, warmup=50, draws=50, progress=False)
    assert caught.value.message == INITIALIZATION_FAILURE
    assert "check the data" in caught.value.hint


@needs_pystan
def test_bad_data_is_a_backend_error():
    with pytest.raises(BackendError, match="PyStan failed"):
        sample_pystan(PROGRAM, dict(DATA, N=9), chains=1, warmup=10, draws=10, progress=False)


@needs_pystan
def test_progress_callback_receives_worker_lines():
    lines = []
    sample_pystan(PROGRAM, DATA, chains=1, warmup=20, draws=20, progress=lines.append)
    assert any("Sampling" in line for line in lines)


def test_invalid_settings_are_rejected_without_running():
    with pytest.raises(BackendError, match="adapt_delta"):
        sample_pystan(PROGRAM, DATA, adapt_delta=1.5)
    with pytest.raises(BackendError, match="init has 1 entries"):
        sample_pystan(PROGRAM, DATA, chains=2, init=[{"mu": 0.0, "tau": 1.0}])


@pytest.mark.parametrize("backend", ["pystan", "cmdstanpy"])
def test_thin_keeps_every_thin_th_iteration_of_the_same_chain(backend):
    if backend == "cmdstanpy" and find_cmdstan() is None:
        pytest.skip(CMDSTAN_MISSING)
    if backend == "pystan" and PYSTAN_UNAVAILABLE is not None:
        pytest.skip(PYSTAN_UNAVAILABLE)
    sampler = sample_pystan if backend == "pystan" else sample_cmdstanpy
    settings = dict(chains=2, warmup=50, seed=11, progress=False)
    thinned = sampler(PROGRAM, DATA, draws=7, thin=3, **settings)
    every = sampler(PROGRAM, DATA, draws=21, **settings)
    assert thinned.draws["mu"].shape == (2, 7) and thinned.settings["thin"] == 3
    np.testing.assert_array_equal(thinned.draws["mu"], every.draws["mu"][:, ::3])


def test_thin_must_be_a_positive_integer():
    with pytest.raises(BackendError, match="thin must be a positive integer, got 0"):
        sample_pystan(PROGRAM, DATA, thin=0)


@needs_pystan
def test_user_init_is_passed_per_chain():
    fit = sample_pystan(
        PROGRAM, DATA, chains=2, warmup=0, draws=1, init={"mu": 0.5, "tau": 1.0}, seed=7, progress=False
    )
    assert fit.draws["mu"].shape == (2, 1)


def test_worker_does_not_import_jax():
    assert loaded_by(["gpdsl.backends.stan.pystan_worker"]) == []


def test_sample_stan_auto_uses_pystan_without_cmdstan(monkeypatch):
    calls = []
    monkeypatch.setattr(cmdstan_runner, "find_cmdstan", lambda: None)
    monkeypatch.setattr(runners, "sample_pystan", lambda *a, **kwargs: calls.append(kwargs) or "pystan-fit")
    assert sample_stan(PROGRAM, DATA, chains=2, backend="auto") == "pystan-fit"
    assert calls[0]["chains"] == 2


def test_sample_stan_rejects_unknown_backend():
    with pytest.raises(BackendError, match="unknown Stan backend"):
        sample_stan(PROGRAM, DATA, backend="stanpy")


def test_find_cmdstan_honours_cmdstan_variable(monkeypatch, tmp_path):
    pytest.importorskip("cmdstanpy")
    (tmp_path / "makefile").write_text("CMDSTAN_VERSION := 2.36.0\n")
    monkeypatch.setenv("CMDSTAN", str(tmp_path))
    assert find_cmdstan() == tmp_path
    monkeypatch.setenv("CMDSTAN", str(tmp_path / "missing"))
    assert find_cmdstan() is None


def test_sample_cmdstanpy_without_cmdstan_is_a_backend_error(monkeypatch, tmp_path):
    monkeypatch.setenv("CMDSTAN", str(tmp_path / "missing"))
    with pytest.raises(BackendError, match="cmdstan"):
        sample_cmdstanpy(PROGRAM, DATA)


@needs_cmdstan
def test_cmdstanpy_shows_the_initial_values_it_was_given_when_stan_rejects_them():
    with pytest.raises(BackendError) as caught:
        sample_cmdstanpy(PROGRAM, DATA, chains=2, warmup=10, draws=10, init={"mu": 0.0, "tau": -1.0}, progress=False)
    lines = caught.value.message.splitlines()
    assert lines[0] == "Initialization failed: Stan rejected the initial values given (mu=0, tau=-1):"
    assert lines[1:] == [("  lb_free: Lower bounded variable is -1, but must be greater than or equal to 0.000000 "
                          "(line 8, column 2 to column 20 of the Stan program)")]


class _RecordedModels:
    """Stands in for ``cmdstanpy.CmdStanModel`` and records the executable of every model made."""

    def __init__(self, model_class):
        self.model_class, self.executables = model_class, []

    def __call__(self, *args, **kwargs):
        model = self.model_class(*args, **kwargs)
        self.executables.append(Path(model.exe_file))
        return model


LOADER_FAILURE = ("#!/bin/sh\necho \"model: error while loading shared libraries: libtbb.so.2: cannot open shared "
                  "object file: No such file or directory\" >&2\nexit 127\n")


@needs_cmdstan
def test_a_cached_cmdstan_executable_that_no_longer_runs_is_built_again(monkeypatch):
    import cmdstanpy

    recorded = _RecordedModels(cmdstanpy.CmdStanModel)
    monkeypatch.setattr(cmdstanpy, "CmdStanModel", recorded)
    sample_cmdstanpy(PROGRAM, DATA, chains=1, warmup=10, draws=10, progress=False)
    executable = recorded.executables[-1]
    backup = executable.with_name("model.gpdsl-test-backup")
    executable.replace(backup)
    try:
        executable.write_text(LOADER_FAILURE)
        executable.chmod(0o755)
        fit = sample_cmdstanpy(PROGRAM, DATA, chains=2, warmup=20, draws=20, progress=False)
        assert fit.draws["mu"].shape == (2, 20)
        assert subprocess.run([str(recorded.executables[-1]), "info"], check=False, capture_output=True).returncode == 0
    finally:
        if executable.read_bytes().startswith(b"#!/bin/sh"):
            backup.replace(executable)
        backup.unlink(missing_ok=True)


@needs_cmdstan
@pytest.mark.slow
def test_an_executable_built_by_another_cmdstan_is_not_reused(monkeypatch, tmp_path):
    """Built under a second CmdStan that is then removed, the cached executable no longer loads its TBB
    library (exit status 127); the first CmdStan must build its own."""
    cmdstan = find_cmdstan()
    other = tmp_path / "other-cmdstan"
    subprocess.run(["cp", "-as", str(cmdstan.resolve()), str(other)], check=True)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("CMDSTAN", str(other))
    sample_cmdstanpy(PROGRAM, DATA, chains=1, warmup=10, draws=10, progress=False)
    subprocess.run(["rm", "-rf", str(other)], check=True)
    monkeypatch.setenv("CMDSTAN", str(cmdstan))
    fit = sample_cmdstanpy(PROGRAM, DATA, chains=2, warmup=20, draws=20, progress=False)
    assert fit.draws["mu"].shape == (2, 20)


def _makefile_cmdstan(directory: Path, version: str) -> Path:
    directory.mkdir(parents=True)
    (directory / "makefile").write_text(f"help:\nCMDSTAN_VERSION := {version}\n")
    return directory


def test_the_executable_cache_is_keyed_on_the_program_and_the_cmdstan_path_and_version(tmp_path):
    first = _makefile_cmdstan(tmp_path / "a", "2.35.0")
    second = _makefile_cmdstan(tmp_path / "b", "2.35.0")
    key = cmdstan_runner.executable_key
    assert key(PROGRAM, first, "2.35.0") == key(PROGRAM, first, "2.35.0")
    assert len({key(PROGRAM, first, "2.35.0"), key(PROGRAM, second, "2.35.0"), key(PROGRAM, first, "2.36.0"),
                key(BROKEN_PROGRAM, first, "2.35.0")}) == 4
    (tmp_path / "link").symlink_to(first)
    assert key(PROGRAM, tmp_path / "link", "2.35.0") == key(PROGRAM, first, "2.35.0")


def test_cached_stan_files_of_two_cmdstans_lie_apart(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    files = {cmdstan_runner.cached_stan_file(PROGRAM, _makefile_cmdstan(tmp_path / name, version))
             for name, version in [("a", "2.35.0"), ("b", "2.35.0"), ("c", "2.36.0")]}
    assert len(files) == 3 and all(Path(file).read_text() == PROGRAM for file in files)


def test_cmdstan_version_is_read_from_its_makefile(tmp_path):
    assert cmdstan_runner.cmdstan_version(_makefile_cmdstan(tmp_path / "a", "2.35.0")) == "2.35.0"
    assert cmdstan_runner.cmdstan_version(tmp_path / "missing") == "unknown"


class _FakeCmdStanPy:
    """A cmdstanpy whose ``CmdStanModel`` hands out the executables in ``builds``, one per construction."""

    def __init__(self, builds):
        self.builds, self.force_compiles = list(builds), []

    def CmdStanModel(self, stan_file, force_compile=False):
        self.force_compiles.append(force_compile)
        return types.SimpleNamespace(exe_file=str(self.builds.pop(0)))


def _script(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o755)
    return path


def test_a_cached_executable_that_does_not_run_is_rebuilt_once(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    broken = _script(tmp_path / "broken", LOADER_FAILURE)
    working = _script(tmp_path / "working", "#!/bin/sh\necho 'stan_version_major = 2'\n")
    fake = _FakeCmdStanPy([broken, working])
    model = cmdstan_runner.compiled_model(fake, PROGRAM, _makefile_cmdstan(tmp_path / "cmdstan", "2.35.0"))
    assert model.exe_file == str(working)
    assert fake.force_compiles == [False, True]


def test_an_executable_that_does_not_run_after_a_rebuild_is_a_clear_backend_error(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    broken = _script(tmp_path / "broken", LOADER_FAILURE)
    cmdstan = _makefile_cmdstan(tmp_path / "cmdstan", "2.35.0")
    with pytest.raises(BackendError) as caught:
        cmdstan_runner.compiled_model(_FakeCmdStanPy([broken, broken]), PROGRAM, cmdstan)
    assert "does not run: exit status 127" in caught.value.message
    assert "libtbb.so.2: cannot open shared object file" in caught.value.message
    assert str(cmdstan) in caught.value.hint


def test_cmdstanpy_draws_are_split_by_chain():
    class ChainStackedFit:
        """CmdStanPy's documented layout: chain 1's draws first, then chain 2's."""

        chains, num_draws_sampling = 2, 3

        def stan_variables(self):
            chain_draw = np.arange(6.0).reshape(6, 1, 1) * 1000
            return {"s": np.arange(6.0), "M": chain_draw + np.array([[11.0, 12.0, 13.0], [21.0, 22.0, 23.0]])}

    draws = cmdstan_runner._draws_by_chain(ChainStackedFit())
    assert draws["s"].shape == (2, 3) and draws["s"][1, 0] == 3.0
    assert draws["M"].shape == (2, 3, 2, 3)
    assert draws["M"][1, 2, 1, 0] == 5 * 1000 + 21.0


@needs_pystan
def test_a_seeded_pystan_call_samples_again_and_leaves_no_cached_fit():
    first = sample_pystan(PROGRAM, DATA, chains=1, warmup=30, draws=30, seed=11, progress=False)
    second = sample_pystan(PROGRAM, DATA, chains=1, warmup=30, draws=30, seed=11, progress=False)
    np.testing.assert_array_equal(first.draws["mu"], second.draws["mu"])
    import httpstan.cache
    import httpstan.models

    fits = httpstan.cache.model_directory(httpstan.models.calculate_model_name(PROGRAM)) / "fits"
    assert list(fits.glob("*.jsonlines.gz")) == []


def test_cached_fits_are_kept_while_another_worker_samples_the_model(tmp_path):
    import fcntl

    from gpdsl.backends.stan.pystan_worker import remove_fits_if_alone, sampling_in

    fits = tmp_path / "fits"
    with sampling_in(fits):
        (fits / "a.jsonlines.gz").write_bytes(b"")
        with open(fits / ".gpdsl-sampling.lock", "a") as other:
            assert not remove_fits_if_alone(other, fits)
        assert (fits / "a.jsonlines.gz").exists()
    assert not (fits / "a.jsonlines.gz").exists()

    (fits / "b.jsonlines.gz").write_bytes(b"")
    with open(fits / ".gpdsl-sampling.lock", "a") as other:
        fcntl.flock(other, fcntl.LOCK_SH)
        with sampling_in(fits):
            pass
        assert (fits / "b.jsonlines.gz").exists()
        fcntl.flock(other, fcntl.LOCK_UN)
        assert remove_fits_if_alone(other, fits) and not (fits / "b.jsonlines.gz").exists()


def _children(pid: int) -> list[int]:
    import pathlib

    found = []
    for status in pathlib.Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":\t", 1) for line in status.read_text().splitlines() if ":\t" in line)
        except OSError:
            continue
        if fields.get("PPid", "").strip() == str(pid):
            found.append(int(status.parent.name))
    return found


@needs_pystan
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_pystan_worker_stops_when_its_parent_is_killed():
    import json
    import os
    import signal

    script = ("import json, sys; from gpdsl.backends.stan.runners import sample_pystan; "
              "sample_pystan(sys.argv[1], json.loads(sys.argv[2]), chains=1, warmup=200000, draws=200000, "
              "progress=False)")
    parent = subprocess.Popen([sys.executable, "-c", script, PROGRAM, json.dumps({k: np.asarray(v).tolist()
                                                                                 for k, v in DATA.items()})])
    try:
        deadline = time.time() + 120
        workers = []
        while time.time() < deadline and not workers:
            time.sleep(1)
            workers = _children(parent.pid)
        assert workers, "the sampler process did not start"
        time.sleep(5)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        time.sleep(8)
        alive = [pid for pid in workers if os.path.exists(f"/proc/{pid}")
                 and "Z" not in open(f"/proc/{pid}/stat").read().split()[2]]
        assert alive == []
    finally:
        if parent.poll() is None:
            parent.kill()


def test_the_pystan_worker_lifts_aiohttp_s_five_minute_limit_on_each_request():
    """A long run's draws are read back from httpstan in one request; aiohttp's default limit of 300 s per
    request made such runs fail with a bare TimeoutError after sampling (seen on a loaded machine)."""
    script = ("import stan.common, aiohttp, asyncio\n"
              "from gpdsl.backends.stan.pystan_worker import _without_request_timeouts\n"
              "async def limit():\n"
              "    async with aiohttp.ClientSession() as session:\n"
              "        return session.timeout.total\n"
              "before = asyncio.run(limit())\n"
              "_without_request_timeouts()\n"
              "print(before, asyncio.run(limit()))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["300", "None"]


def test_a_build_killed_before_httpstan_wrote_its_log_is_removed_so_the_program_builds_again(tmp_path):
    """httpstan takes a cache entry with a compiled module as built; without the compiler log it then fails
    every request for the program ("500 Internal Server Error", reported by PyStan as a JSON TAPE_ERROR)."""
    from importlib.machinery import EXTENSION_SUFFIXES

    from gpdsl.backends.stan.pystan_worker import BROKEN_BUILD_AGE_SECONDS, remove_broken_build

    def entry(name, files):
        directory = tmp_path / name
        directory.mkdir()
        for file in files:
            (directory / file).write_text("")
        return directory

    module = "stan_services_model_x" + EXTENSION_SUFFIXES[0]
    later = time.time() + BROKEN_BUILD_AGE_SECONDS + 1
    broken = entry("broken", ["model_x.cpp", "stanc.log", module])
    built = entry("built", ["model_x.cpp", "stanc.log", module, "stderr.log"])
    compiling = entry("compiling", ["model_x.cpp", "stanc.log"])
    assert not remove_broken_build(broken)  # a build may still be writing it
    assert remove_broken_build(broken, now=later) and not broken.exists()
    assert not remove_broken_build(built, now=later) and built.exists()
    assert not remove_broken_build(compiling, now=later) and compiling.exists()
    assert not remove_broken_build(tmp_path / "absent", now=later)


def test_a_second_build_of_the_same_program_waits_for_the_first(tmp_path):
    import fcntl

    from gpdsl.backends.stan.pystan_worker import building

    entry = tmp_path / "4.13.0" / "models" / "abcdefgh"
    lock_file = tmp_path / "4.13.0" / "gpdsl-build-locks" / "abcdefgh.lock"
    with building(entry):
        with open(lock_file, "a") as other, pytest.raises(BlockingIOError):
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert not entry.parent.exists()  # nothing written among httpstan's models
    with open(lock_file, "a") as other:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_a_build_is_announced_even_when_progress_is_hidden(tmp_path, capsys):
    """The worker marks the start of an uncached build as a notice, which ``--quiet`` does not hide."""
    from importlib.machinery import EXTENSION_SUFFIXES

    from gpdsl.backends.stan.pystan_process import relay
    from gpdsl.backends.stan.pystan_worker import NOTICE, is_built

    entry = tmp_path / "models" / "abc"
    assert not is_built(entry)
    entry.mkdir(parents=True)
    (entry / f"model{EXTENSION_SUFFIXES[0]}").write_bytes(b"")
    assert not is_built(entry)  # a build still writing (no compiler log yet)
    (entry / "stderr.log").write_text("")
    assert is_built(entry)
    shown = []
    relay(f"{NOTICE}building the Stan program (abc)", shown.append)
    relay("Sampling: 10%", shown.append)
    assert shown == ["Sampling: 10%"]
    assert capsys.readouterr().err == "gpdsl: building the Stan program (abc)\n"
