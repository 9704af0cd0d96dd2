"""The sequential sampler (Tegner et al. 2018, Alg. 1) against exact answers, its checkpoints and refusals."""

import arviz as az
import numpy as np
import pytest

from gpdsl import api
from gpdsl.errors import MethodError

FIXED = """
data { int T; int N; vector[T] t; array[T] matrix[N, 1] X; array[T] vector[N] y; }
model {
  f ~ gp((t, X), rbf(t, lengthscale = 0.8) * rbf(X, lengthscale = 0.5));
  for (i in 1:T) {
    y[i] ~ normal(f[i], 0.4);
  }
}
"""
NOISE = 0.4


def rbf(a, b, lengthscale):
    return np.exp(-0.5 * (a[:, None] - b[None]) ** 2 / lengthscale ** 2)


@pytest.fixture(scope="module")
def fixed_data():
    rng = np.random.default_rng(5)
    X = rng.uniform(0, 1, size=(2, 3, 1))
    return {"T": 2, "N": 3, "t": np.array([0.0, 0.5]), "X": X, "y": rng.normal(size=(2, 3))}


def scheme_law(data, window):
    """The exact law of (f_1, ..., f_T) under the scheme at fixed hyperparameters: f_1 ~ p(f_1 | y_1), then
    f_t ~ p(f_t | f_{t-window:t-1}, y_t) given the same state's earlier values (linear-Gaussian recursion)."""
    t, X, y = data["t"], data["X"][..., 0], data["y"]
    steps, n = y.shape
    points_t, points_x = np.repeat(t, n), X.reshape(-1)
    K = rbf(points_t, points_t, 0.8) * rbf(points_x, points_x, 0.5) + 1e-6 * np.eye(steps * n)
    noise = NOISE ** 2 * np.eye(n)
    gain = K[:n, :n] @ np.linalg.inv(K[:n, :n] + noise)
    mean, cov = gain @ y[0], K[:n, :n] - gain @ K[:n, :n]
    for step in range(1, steps):
        given = np.arange(max(0, step - window) * n, step * n)
        current = np.arange(step * n, (step + 1) * n)
        G = np.zeros((n, step * n))
        G[:, given] = K[np.ix_(current, given)] @ np.linalg.inv(K[np.ix_(given, given)])
        Q = K[np.ix_(current, current)] - G[:, given] @ K[np.ix_(given, current)]
        C = np.linalg.inv(np.linalg.inv(Q) + np.linalg.inv(noise))
        B = C @ np.linalg.inv(Q) @ G
        mean = np.concatenate([mean, B @ mean + C @ np.linalg.inv(noise) @ y[step]])
        cov = np.block([[cov, cov @ B.T], [B @ cov, C + B @ cov @ B.T]])
    return mean, cov


def assert_matches(draws, mean, cov):
    for j in range(draws.shape[-1]):
        values, squared = draws[..., j], (draws[..., j] - mean[j]) ** 2
        assert abs(values.mean() - mean[j]) < 4 * float(az.mcse(values)), (j, values.mean(), mean[j])
        assert abs(squared.mean() - cov[j, j]) < 4 * float(az.mcse(squared)), (j, squared.mean(), cov[j, j])


@pytest.mark.parametrize("pass_chains", [1, 2])
def test_f2_matches_the_exact_conditional_at_fixed_hyperparameters(fixed_data, pass_chains):
    fit = api.sample(FIXED, fixed_data, "sequential", seed=4, states=3000, burn_in=200, thin=2, initial_repeat_f=2,
                     repeat_f=40, surrogate_variance=NOISE ** 2, pass_chains=pass_chains)
    mean, cov = scheme_law(fixed_data, window=1)
    assert_matches(fit.posterior["f"].values[:, :, 1, :], mean[3:], cov[3:, 3:])


@pytest.mark.parametrize("window", [1, 2])
def test_f3_follows_each_state_s_own_trajectory_through_the_window(window):
    rng = np.random.default_rng(9)
    data = {"T": 3, "N": 2, "t": np.array([0.0, 0.3, 0.6]), "X": rng.uniform(0, 1, size=(3, 2, 1)),
            "y": rng.normal(size=(3, 2))}
    fit = api.sample(FIXED, data, "sequential", seed=window, states=3000, burn_in=200, thin=2, initial_repeat_f=2,
                     repeat_f=40, window=window, surrogate_variance=NOISE ** 2)
    mean, cov = scheme_law(data, window)
    assert_matches(fit.posterior["f"].values[:, :, 2, :], mean[4:], cov[4:, 4:])


NOISY = FIXED.replace("data { int T; int N; vector[T] t; array[T] matrix[N, 1] X; array[T] vector[N] y; }",
                      "data { int T; int N; vector[T] t; array[T] matrix[N, 1] X; array[T] vector[N] y; }\n"
                      "parameters { real s ~ scaled_sigmoid_normal(0.1, 1); real ell ~ scaled_sigmoid_normal(0.1, 2); }")
NOISY = NOISY.replace("normal(f[i], 0.4)", "normal(f[i], s)").replace("rbf(X, lengthscale = 0.5)",
                                                                       "rbf(X, lengthscale = ell)")
SMALL = {"states": 20, "burn_in": 10, "thin": 1, "repeat_f": 2, "surrogate_variance": 0.16}


@pytest.fixture(scope="module")
def three_steps():
    rng = np.random.default_rng(6)
    return {"T": 3, "N": 3, "t": np.array([0.0, 0.5, 1.0]), "X": rng.uniform(0, 1, size=(3, 3, 1)),
            "y": rng.normal(size=(3, 3))}


def settings(**changes):
    from gpdsl.settings import SequentialSettings

    return SequentialSettings(**{**SMALL, **changes})


def test_results_have_the_time_dim_and_resume_from_a_step_checkpoint(tmp_path, three_steps):
    checkpoint = tmp_path / "run.npz"
    whole = api.run(NOISY, three_steps, "sequential", settings(), seed=2, checkpoint=checkpoint)
    assert whole.posterior["s"].dims == ("chain", "draw", "T") and whole.posterior["f"].shape == (1, 20, 3, 3)
    stored = dict(np.load(checkpoint))
    import json

    meta = json.loads(str(stored["meta"]))
    assert meta["steps_done"] == 3
    meta.update(steps_done=2, seconds=meta["seconds"][:2])
    np.savez(checkpoint, meta=np.asarray(json.dumps(meta)), thetas=stored["thetas"][:2], fs=stored["fs"][:2])
    resumed = api.run(NOISY, three_steps, "sequential", settings(), seed=2, checkpoint=checkpoint)
    for name in ("s", "ell", "f"):
        np.testing.assert_array_equal(resumed.posterior[name].values, whole.posterior[name].values)


@pytest.mark.slow
def test_the_full_scheme_shares_step_one_and_a_window_of_two_runs(three_steps):
    sequential = api.run(NOISY, three_steps, "sequential", settings(window=2), seed=3)
    full = api.run(NOISY, three_steps, "sequential", settings(scheme="full"), seed=3)
    np.testing.assert_array_equal(full.posterior["s"].values[:, :, 0], sequential.posterior["s"].values[:, :, 0])
    assert np.isfinite(full.posterior["f"].values).all() and np.isfinite(sequential.posterior["f"].values).all()
    assert not np.array_equal(full.posterior["s"].values[:, :, 2], sequential.posterior["s"].values[:, :, 2])


def test_one_step_of_the_full_baseline_is_the_step_chain_under_the_step_s_key(three_steps):
    import jax

    from gpdsl import load_data
    from gpdsl.backends.jax.lowering import constrain_blocks
    from gpdsl.inference.families.sequential import sequential_view
    from gpdsl.inference.mcmc.z_space import z_prior
    from gpdsl.inference.methods.sequential import step_chain
    from gpdsl.ir.families import SEQUENTIAL_LATENT_GP, classify

    full = api.run(NOISY, three_steps, "sequential", settings(scheme="full"), seed=4)
    model, _ = api.check(NOISY)
    values, _ = load_data(three_steps, model)
    view = sequential_view(model, values, classify(model).facts[SEQUENTIAL_LATENT_GP])
    thetas, fs = step_chain(view, 2, settings(scheme="full"), jax.random.fold_in(jax.random.PRNGKey(4), 2),
                            z_prior(view, "sequential"))
    constrained = jax.vmap(lambda theta: constrain_blocks(theta, view.theta_blocks)[0])(thetas)
    for name in ("s", "ell"):
        np.testing.assert_array_equal(np.asarray(constrained[name]), full.posterior[name].values[0, :, 1])
    np.testing.assert_array_equal(np.asarray(fs), full.posterior["f"].values[0, :, 1])


def test_a_failing_external_likelihood_is_named_with_its_step(tmp_path, three_steps):
    text = NOISY.replace("y[i] ~ normal(f[i], s);",
                         'y[i] ~ external("gpdsl.testing.external_likelihoods:normal_numpy_checked", f[i], s);')
    data = {**three_steps, "y": three_steps["y"].copy()}
    data["y"][1, 0] = 1000.0
    checkpoint = tmp_path / "run.npz"
    with pytest.raises(MethodError, match=r"step 2 of 3 failed .*external likelihood "
                                          r"gpdsl.testing.external_likelihoods:normal_numpy_checked failed.*"
                                          r"observation out of range") as error:
        api.run(text, data, "sequential", settings(), seed=2, checkpoint=checkpoint, allow_external=True)
    assert "steps 1..1 are in the checkpoint" in str(error.value)
    assert np.load(checkpoint)["thetas"].shape == (1, 20, 2)


def test_methods_say_which_statement_they_cannot_run(three_steps):
    with pytest.raises(MethodError, match=r"gibbs needs .*'f' is array\[T\] vector\[N\]") as error:
        api.sample(NOISY, three_steps, "gibbs", seed=1)
    assert "f ~ gp((t, X)" in error.value.render()
    not_looped = NOISY.replace("for (i in 1:T) {\n    y[i] ~ normal(f[i], s);\n  }", "y[1] ~ normal(f[1], s);")
    with pytest.raises(MethodError, match="sequential needs"):
        api.sample(not_looped, three_steps, "sequential", seed=1, **SMALL)
    half_normal = NOISY.replace("real s ~ scaled_sigmoid_normal(0.1, 1);", "real<lower=0> s ~ half_normal(1);")
    with pytest.raises(MethodError, match="'s' has half_normal") as error:
        api.sample(half_normal, three_steps, "sequential", seed=1, **SMALL)
    assert error.value.span is not None


def _write_problem(directory, data):
    import json

    (directory / "model.gpm").write_text(NOISY)
    (directory / "data.json").write_text(json.dumps({k: np.asarray(v).tolist() for k, v in data.items()}))


COMMAND = ["sample", "model.gpm", "--data", "data.json", "--method", "sequential", "--window", "1", "--states", "20",
           "--burn-in", "10", "--thin", "1", "--repeat-f", "2", "--surrogate-variance", "0.16", "--seed", "5",
           "--quiet"]


def test_the_command_line_runs_it(tmp_path, three_steps, monkeypatch):
    import xarray as xr

    from gpdsl.cli import main

    _write_problem(tmp_path, three_steps)
    monkeypatch.chdir(tmp_path)
    assert main([*COMMAND, "--out", "fit.nc"]) == 0
    posterior = xr.open_dataset("fit.nc", group="posterior")
    assert posterior["s"].sizes["T"] == 3 and posterior["f"].shape == (1, 20, 3, 3)


@pytest.mark.slow
def test_a_killed_run_resumes_at_the_next_step(tmp_path, three_steps, monkeypatch):
    import os
    import select
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    import xarray as xr

    from gpdsl.storage.atomic import PAUSE_VARIABLE
    from gpdsl.cli import main

    _write_problem(tmp_path, three_steps)
    monkeypatch.chdir(tmp_path)
    assert main([*COMMAND, "--out", "whole.nc"]) == 0
    root = Path(__file__).resolve().parents[3]
    command = [sys.executable, "-m", "gpdsl.cli", *COMMAND, "--out", "resumed.nc", "--checkpoint", "run.npz"]
    environment = {**os.environ, "PYTHONPATH": str(root), PAUSE_VARIABLE: "2:after"}
    process = subprocess.Popen(command, cwd=tmp_path, env=environment, stderr=subprocess.PIPE, text=True)
    said, deadline = "", time.monotonic() + 240
    while "gpdsl test: paused" not in said:
        assert process.poll() is None and time.monotonic() < deadline, said
        if select.select([process.stderr], [], [], 5)[0]:
            said += process.stderr.readline()
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    import json

    assert json.loads(str(np.load(tmp_path / "run.npz")["meta"]))["steps_done"] == 2
    resumed = subprocess.run(command[:-2] + ["--checkpoint", "run.npz"], cwd=tmp_path, capture_output=True, text=True,
                             env={**os.environ, "PYTHONPATH": str(root)})
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming from checkpoint" in resumed.stderr
    whole = xr.open_dataset(tmp_path / "whole.nc", group="posterior")
    again = xr.open_dataset(tmp_path / "resumed.nc", group="posterior")
    for name in ("s", "ell", "f"):
        np.testing.assert_array_equal(again[name].values, whole[name].values)


def test_predictions_at_new_inputs_match_the_exact_law_at_fixed_hyperparameters(fixed_data):
    X_new = np.array([[[0.2], [0.9]], [[0.35], [0.8]]])
    fit = api.sample(FIXED, fixed_data, "sequential", seed=8, states=3000, burn_in=200, thin=2, initial_repeat_f=2,
                     repeat_f=40, surrogate_variance=NOISE ** 2, new_inputs=X_new)
    draws = fit.predictions["f_new"].values
    assert draws.shape == (1, 3000, 2, 2) and fit.predictions["f_new"].dims == ("chain", "draw", "T", "N_new")
    t, X, y = fixed_data["t"], fixed_data["X"][..., 0], fixed_data["y"]
    # the scheme's joint law of (f_1, f_2), then f* at step 2 given both under the same GP
    points_t = np.concatenate([np.repeat(t, 3), np.full(2, t[1])])
    points_x = np.concatenate([X.reshape(-1), X_new[1, :, 0]])
    K = rbf(points_t, points_t, 0.8) * rbf(points_x, points_x, 0.5) + 1e-6 * np.eye(8)
    K11 = K[:3, :3]
    gain1 = K11 @ np.linalg.inv(K11 + NOISE ** 2 * np.eye(3))
    mean1, cov1 = gain1 @ y[0], K11 - gain1 @ K11
    G = K[3:6, :3] @ np.linalg.inv(K11)
    Q = K[3:6, 3:6] - G @ K[:3, 3:6]
    C = np.linalg.inv(np.linalg.inv(Q) + np.eye(3) / NOISE ** 2)
    B = C @ np.linalg.inv(Q) @ G
    joint_mean = np.concatenate([mean1, B @ mean1 + C @ y[1] / NOISE ** 2])
    joint_cov = np.block([[cov1, cov1 @ B.T], [B @ cov1, C + B @ cov1 @ B.T]])
    A = K[6:, :6] @ np.linalg.inv(K[:6, :6])
    mean = A @ joint_mean
    cov = A @ joint_cov @ A.T + K[6:, 6:] - A @ K[:6, 6:]
    for j in range(2):
        values = draws[:, :, 1, j]
        squared = (values - mean[j]) ** 2
        assert abs(values.mean() - mean[j]) < 4 * float(az.mcse(values)), (j, values.mean(), mean[j])
        assert abs(squared.mean() - cov[j, j]) < 4 * float(az.mcse(squared)), (j, squared.mean(), cov[j, j])


@pytest.mark.parametrize("kappa_update", ["fixed_nu", "sdss", "sdss_diagonal"])
def test_the_step_kappa_updates_leave_the_step_target_invariant(fixed_data, kappa_update):
    """Updates 1 and 2 at step 2 given one f_1: p(f_2, z | f_1, y_2) ~ p(y_2 | f_2) N(f_2; m_z, K_z) q(z), whose
    z-marginal is known by quadrature (f_2 integrated out). ``sdss_diagonal``: SDSS with a surrogate S that
    differs from element to element (as the curvature surrogate gives)."""
    import jax
    import jax.numpy as jnp

    from gpdsl.inference.families.sequential import sequential_view
    from gpdsl.inference.mcmc.ess import ess_step
    from gpdsl.inference.mcmc.z_space import ZPrior, fixed_nu_update, sdss_mean_update, split
    from gpdsl.ir.families import SEQUENTIAL_LATENT_GP, classify

    text = FIXED.replace("data {", "data {").replace("model {", "parameters { real ell ~ scaled_sigmoid_normal("
                                                                  "0.1, 2, 0.2, 1.2); }\nmodel {")
    text = text.replace("rbf(X, lengthscale = 0.5)", "rbf(X, lengthscale = ell)")
    model, _ = api.check(text)
    view = sequential_view(model, fixed_data, classify(model).facts[SEQUENTIAL_LATENT_GP])
    functions, kappa = view.functions(1), split(view).kappa
    data = {name: jnp.asarray(value) for name, value in view.window(0, 2).items()}
    previous = jnp.array([0.3, -0.2, 0.5])
    q = ZPrior(jnp.array([0.2]), jnp.array([[1.44]]))
    smooth, _ = functions.prior(jnp.array([0.0]), data, previous)  # y_2 near the conditional mean at ell = 1.05
    data["y"] = data["y"].at[1].set(smooth + jnp.array([0.1, -0.15, 0.05]))

    def prior_of(theta):
        return functions.prior(theta, data, previous)

    def log_likelihood(f, theta):
        return functions.log_likelihood(f, theta, data, previous)

    surrogate = NOISE ** 2 if kappa_update == "sdss" else jnp.array([0.05, 0.3, 1.0])
    update = fixed_nu_update if kappa_update == "fixed_nu" else \
        lambda *a: sdss_mean_update(*a, surrogate_variance=surrogate)

    def step(carry, key):
        theta, f = carry
        keys = jax.random.split(key, 3)
        mean, chol = prior_of(theta)
        loglik = log_likelihood(f, theta)
        for k in keys[:2]:
            f, loglik, _ = ess_step(k, f, loglik, chol, lambda v: log_likelihood(v, theta), mean=mean)
        theta, f, *_ = update(keys[2], theta, f, mean, chol, loglik, prior_of, log_likelihood, q, kappa)
        return (theta, f), theta[0]

    def chain(key):
        return jax.lax.scan(step, (jnp.zeros(1), jnp.zeros(3)), jax.random.split(key, 3000))[1][500:]

    z = np.asarray(jax.jit(jax.vmap(chain))(jax.random.split(jax.random.PRNGKey(3), 4)))
    grid = jnp.linspace(-7, 7, 1401)

    def marginal(value):
        mean, chol = prior_of(jnp.array([value]))
        cov = chol @ chol.T + NOISE ** 2 * jnp.eye(3)
        return jax.scipy.stats.multivariate_normal.logpdf(data["y"][1], mean, cov)

    log_p = np.asarray(jax.vmap(marginal)(grid)) + stats_norm_logpdf(np.asarray(grid), 0.2, 1.2)
    weights = np.exp(log_p - log_p.max())
    exact = float(np.sum(weights * np.asarray(grid)) / weights.sum())
    assert abs(z.mean() - exact) < 4 * float(az.mcse(z)), (z.mean(), exact, float(az.mcse(z)))


def stats_norm_logpdf(x, mu, sigma):
    return -0.5 * ((x - mu) / sigma) ** 2 - np.log(sigma * np.sqrt(2 * np.pi))


def test_pass_chains_split_the_states_and_must_divide_them(three_steps):
    one = api.sample(NOISY, three_steps, "sequential", seed=3, **SMALL)
    two = api.sample(NOISY, three_steps, "sequential", seed=3, **SMALL, pass_chains=2)
    assert two.posterior["s"].shape == one.posterior["s"].shape
    np.testing.assert_array_equal(two.posterior["s"].values[:, :, 0], one.posterior["s"].values[:, :, 0])
    assert not np.array_equal(two.posterior["s"].values[:, :, 1:], one.posterior["s"].values[:, :, 1:])
    with pytest.raises(MethodError, match="pass_chains = 3 does not divide states = 20"):
        settings(pass_chains=3)


def test_predictions_are_refused_for_the_full_scheme_and_for_inputs_of_the_wrong_shape(three_steps):
    with pytest.raises(MethodError, match="--scheme full keeps only f_t"):
        api.run(NOISY, three_steps, "sequential", settings(scheme="full"), seed=1, new_inputs=np.zeros((3, 2, 1)))
    from gpdsl.errors import DataError

    with pytest.raises(DataError, match=r"of shape \(3, m, 1\)"):
        api.run(NOISY, three_steps, "sequential", settings(), seed=1, new_inputs=np.zeros((2, 2, 1)))
