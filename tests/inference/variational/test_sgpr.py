"""Sparse GP regression (Titsias 2009): exact with Z = X, GPy's bound, the fit and the command line."""

import json
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gpdsl.errors import MethodError
from gpdsl.settings import SGPRSettings
from gpdsl.inference.variational.inducing_inputs import initial_inducing_inputs
from gpdsl.inference.variational import sgpr
from gpdsl.kernels import RBF, Linear, Matern32, Matern52, Periodic
from gpdsl.settings import SettingError

sgpr_bound = jax.jit(sgpr.sgpr_bound, static_argnames="jitter")
sgpr_posterior = jax.jit(sgpr.sgpr_posterior, static_argnames="jitter")
sgpr_moments = jax.jit(sgpr.sgpr_moments, static_argnames="include_noise")

KERNELS = {
    "rbf_ard": lambda: 1.3 * RBF(lengthscale=jnp.array([0.7, 1.2])),
    "matern32": lambda: Matern32(variance=0.8, lengthscale=0.9),
    "periodic_plus_linear": lambda: Periodic(variance=1.0, lengthscale=1.1, period=2.0) + Linear(variance=0.3),
    "matern52_times_rbf": lambda: Matern52(variance=1.5, lengthscale=1.4) * RBF(lengthscale=2.0),
    "rbf_plus_constant": lambda: RBF(lengthscale=0.8) + 0.4,
}


def regression_data(n=25, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, size=(n, 2))
    y = np.sin(X[:, 0]) + 0.3 * X[:, 1] + 0.1 * rng.normal(size=n)
    return X, y


def exact_gp(kernel, X, y, noise_variance, X_new):
    """Log marginal and predictive (f and y) of the exact GP, in NumPy."""
    C = np.asarray(kernel(X)) + noise_variance * np.eye(len(y))
    sign, logdet = np.linalg.slogdet(C)
    log_marginal = -0.5 * y @ np.linalg.solve(C, y) - 0.5 * logdet - 0.5 * len(y) * np.log(2 * np.pi)
    K_star = np.asarray(kernel.cross(X, X_new))
    mean = K_star.T @ np.linalg.solve(C, y)
    variance = np.asarray(kernel.diag(X_new)) - np.sum(K_star * np.linalg.solve(C, K_star), axis=0)
    return log_marginal, mean, variance


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_inducing_inputs_at_the_training_inputs_give_the_exact_gp(name):
    """Exact for any kernel without same-index terms (a white-noise term is in K(Z) but not in K(X, Z), as GPy)."""
    kernel = KERNELS[name]()
    X, y = regression_data()
    X_new = np.random.default_rng(1).uniform(-3, 3, size=(7, 2))
    noise_variance = 0.05
    log_marginal, mean, variance = exact_gp(kernel, X, y, noise_variance, X_new)

    bound = float(sgpr_bound(kernel, X, y, X, noise_variance, jitter=0.0))
    assert abs(bound - log_marginal) < 1e-8

    posterior = sgpr_posterior(kernel, X, y, X, noise_variance, jitter=0.0)
    f_mean, f_variance = sgpr_moments(posterior, kernel, X, X_new, include_noise=False)
    y_mean, y_variance = sgpr_moments(posterior, kernel, X, X_new)
    np.testing.assert_allclose(f_mean, mean, rtol=0, atol=1e-8)
    np.testing.assert_allclose(y_mean, mean, rtol=0, atol=1e-8)
    np.testing.assert_allclose(f_variance, variance, rtol=0, atol=1e-8)
    np.testing.assert_allclose(y_variance, variance + noise_variance, rtol=0, atol=1e-8)


def test_fewer_inducing_inputs_bound_the_log_marginal_from_below():
    kernel = KERNELS["rbf_ard"]()
    X, y = regression_data(60)
    exact = exact_gp(kernel, X, y, 0.05, X[:1])[0]
    bounds = [float(sgpr_bound(kernel, X, y, X[:m], 0.05)) for m in (5, 20, 60)]
    assert bounds[0] < bounds[1] < exact and abs(bounds[2] - exact) < 1e-4


@pytest.mark.parametrize("kernel_name", ["RBF", "Matern32"])
def test_bound_equals_gpys_sparse_gp_regression(kernel_name):
    GPy = pytest.importorskip("GPy")
    rng = np.random.default_rng(2)
    X = rng.uniform(-3, 3, size=(200, 2))
    y = np.sin(X[:, 0]) * np.cos(X[:, 1]) + 0.1 * rng.normal(size=200)
    Z = rng.uniform(-3, 3, size=(15, 2))
    variance, lengthscale, noise_variance = 1.3, np.array([0.7, 1.2]), 0.05
    theirs = getattr(GPy.kern, kernel_name)(2, variance=variance, lengthscale=lengthscale, ARD=True)
    model = GPy.models.SparseGPRegression(X, y[:, None], kernel=theirs, Z=Z)
    model.likelihood.variance = noise_variance
    ours = {"RBF": RBF, "Matern32": Matern32}[kernel_name](variance=variance, lengthscale=jnp.asarray(lengthscale))
    # GPy's VarDTC adds 1e-8 to K(Z), the default jitter here
    assert abs(float(sgpr_bound(ours, X, y, Z, noise_variance)) - np.asarray(model.log_likelihood()).item()) < 1e-6


def test_kmeans_finds_separated_clusters_and_repeats_with_its_seed():
    rng = np.random.default_rng(3)
    centres = np.array([[-5.0, 0.0], [0.0, 5.0], [5.0, 0.0]])
    X = np.concatenate([c + 0.1 * rng.normal(size=(50, 2)) for c in centres])
    found = initial_inducing_inputs(X, 3, "kmeans", seed=4)
    order = np.argsort(found[:, 0])
    np.testing.assert_allclose(found[order], centres, atol=0.05)
    np.testing.assert_array_equal(found, initial_inducing_inputs(X, 3, "kmeans", seed=4))
    subset = initial_inducing_inputs(X, 10, "random", seed=4)
    assert len({tuple(row) for row in subset}) == 10 and all(any((row == X).all(1)) for row in subset)
    with pytest.raises(MethodError, match="num_inducing must be between 1 and N = 150"):
        initial_inducing_inputs(X, 151)


def test_kmeans_beyond_its_row_limit_clusters_a_seeded_subset_and_still_finds_the_clusters(monkeypatch):
    from gpdsl.inference.variational import inducing_inputs

    rng = np.random.default_rng(5)
    centres = np.array([[-5.0, 0.0], [0.0, 5.0], [5.0, 0.0], [0.0, -5.0]])
    X = np.concatenate([c + 0.1 * rng.normal(size=(400, 2)) for c in centres])
    monkeypatch.setattr(inducing_inputs, "KMEANS_ROWS", 200)
    found = initial_inducing_inputs(X, 4, "kmeans", seed=2)
    distances = np.linalg.norm(found[:, None, :] - centres[None, :, :], axis=-1)
    assert sorted(np.argmin(distances, axis=1)) == [0, 1, 2, 3] and distances.min(axis=1).max() < 0.05
    np.testing.assert_array_equal(found, initial_inducing_inputs(X, 4, "kmeans", seed=2))
    monkeypatch.setattr(inducing_inputs, "KMEANS_ROWS", 20_000)
    assert not np.array_equal(found, initial_inducing_inputs(X, 4, "kmeans", seed=2)), "the whole data's centres differ"


@pytest.mark.parametrize("field, value, message", [
    ("num_inducing", 0, "num_inducing must be an integer >= 1"),
    ("learning_rate", 0.0, "learning_rate must be in (0"),
    ("jitter", -1e-6, "jitter must be in [0"),
    ("noise_fixed_steps", -1, "noise_fixed_steps must be an integer >= 0"),
])
def test_settings_are_refused_naming_the_setting(field, value, message):
    with pytest.raises(SettingError) as refused:
        SGPRSettings(**{field: value})
    assert refused.value.setting == field and message in str(refused.value)


@pytest.fixture(scope="module")
def gp_regression_problem():
    from gpdsl.api import check_file
    from gpdsl.data.io import load_data
    from gpdsl.inference.families.gp_regression import gp_regression

    model, _ = check_file("models/gp_regression.gpm")
    X, y = regression_data(30)
    data, _ = load_data({"N": 30, "D": 2, "X": X, "y": y}, model)
    return gp_regression(model, data)


def test_fit_with_every_training_input_as_inducing_input_is_the_ml_fit(gp_regression_problem):
    from gpdsl.inference.optimise.marginal_likelihood import fit_marginal_likelihood
    from gpdsl.inference.variational.sgpr_fit import fit_sgpr

    problem = gp_regression_problem
    settings = SGPRSettings(num_inducing=30, inducing_init="random", fix_inducing=True, jitter=0.0)
    fit = fit_sgpr(problem, settings)
    np.testing.assert_array_equal(fit.inducing, np.asarray(problem.inputs(jnp.asarray(fit.theta))))
    reference = fit_marginal_likelihood(problem)
    # K(Z) = K(X) has condition number ~4e5 here: the last digits of the bound are noise, and L-BFGS ends on a failed
    # line search at the optimum (gradient ~1e-5)
    assert abs(fit.objective - reference.log_posterior) < 1e-6 and fit.report["gradient_norm"] < 1e-4
    for name, value in reference.hyperparameters().items():
        np.testing.assert_allclose(fit.hyperparameters()[name], value, rtol=1e-3)
    X_new = np.array([[0.0, 0.0], [1.0, -1.0]])
    from gpdsl.inference.predict.gp_regression import predict

    exact = predict(reference, X_new)
    np.testing.assert_allclose(fit.predict(X_new).mean, exact.mean, atol=1e-3)


def test_fit_raises_the_bound_from_its_start_and_moves_the_inducing_inputs(gp_regression_problem):
    from gpdsl.inference.variational.sgpr_fit import fit_sgpr

    fit = fit_sgpr(gp_regression_problem, SGPRSettings(num_inducing=6, seed=1))
    start = initial_inducing_inputs(np.asarray(gp_regression_problem.inputs(jnp.asarray(fit.theta))), 6, seed=1)
    assert fit.trace[-1] > fit.trace[0] and np.all(np.diff(fit.trace) >= -1e-9)
    assert not np.allclose(fit.inducing, start)
    assert fit.bound <= fit_ml_log_marginal(gp_regression_problem, fit.theta) + 1e-9


def fit_ml_log_marginal(problem, theta):
    return float(problem.log_marginal(jnp.asarray(theta)))


def test_too_many_inducing_inputs_are_refused_naming_the_flag(gp_regression_problem):
    from gpdsl.inference.variational.sgpr_fit import fit_sgpr

    with pytest.raises(MethodError, match="--num-inducing 31 is more than the 30 training points"):
        fit_sgpr(gp_regression_problem, SGPRSettings(num_inducing=31))


def test_fit_sgpr_from_the_command_line_with_predictions(tmp_path):
    X, y = regression_data(40)
    data, new, out = tmp_path / "d.json", tmp_path / "new.json", tmp_path / "fit.nc"
    data.write_text(json.dumps({"N": 40, "D": 2, "X": X.tolist(), "y": y.tolist()}))
    new.write_text(json.dumps({"X": [[0.0, 0.0], [1.0, -1.0], [1.5, 0.5]]}))
    result = subprocess.run([sys.executable, "-m", "gpdsl.cli", "fit", "models/gp_regression.gpm", "--data", str(data),
                             "--method", "sgpr", "--num-inducing", "8", "--predict", str(new), "--seed", "0",
                             "--out", str(out)], capture_output=True, text=True)
    assert result.returncode in (0, 3), result.stderr
    assert "sparse GP regression (Titsias bound, M = 8, lbfgs)" in result.stdout and "bound" in result.stdout

    from gpdsl.results import arviz_compat
    from gpdsl.results.io import read_netcdf

    results = read_netcdf(out)
    parts = arviz_compat.groups(results)
    assert arviz_compat.root_attrs(results)["method"] == "sgpr"
    assert parts["posterior"]["inducing_inputs"].dims == ("chain", "draw", "M", "D")
    assert parts["posterior"]["inducing_inputs"].shape == (1, 1, 8, 2)
    assert {"lp", "bound", "bound_trace"} <= set(parts["sample_stats"].data_vars)
    predictions = parts["predictions"]
    assert predictions["y_mean"].dims == ("chain", "draw", "N_new")
    mean = np.asarray(predictions["y_mean"])[0, 0]
    assert np.all(np.abs(mean - [0.0, np.sin(1.0) - 0.3, np.sin(1.5) + 0.15]) < 0.3)
    variance_y, variance_f = (np.asarray(predictions[name])[0, 0] for name in ("y_variance", "f_variance"))
    assert np.all(variance_y > variance_f) and np.all(variance_f > 0)


def test_adam_schedule_reaches_the_lbfgs_bound_and_holds_the_noise_first(gp_regression_problem, tmp_path):
    from gpdsl.inference.variational.sgpr_fit import fit_sgpr

    problem = gp_regression_problem
    lbfgs_fit = fit_sgpr(problem, SGPRSettings(num_inducing=6, seed=1))
    held = fit_sgpr(problem, SGPRSettings(num_inducing=6, seed=1, optimizer="adam", noise_fixed_steps=300, steps=1,
                                          learning_rate=0.05))
    # one free step of size <= learning rate in the softplus coordinate of the noise
    assert abs(held.hyperparameters()["noise"] - 1.0) < 0.05 * 1.01
    assert abs(held.hyperparameters()["variance"] - 1.0) > 0.1
    settings = SGPRSettings(num_inducing=6, seed=1, optimizer="adam", noise_fixed_steps=200, steps=2000,
                            learning_rate=0.05, chunk=500)
    fit = fit_sgpr(problem, settings, checkpoint=tmp_path / "adam.npz")
    assert fit.report["optimizer"] == "adam" and fit.report["iterations"] == 2200 and len(fit.trace) == 5
    # at least as high as L-BFGS's (which stops at a lower local optimum from this start: -24.2 against -21.4)
    assert fit.objective > lbfgs_fit.objective - 0.01 * abs(lbfgs_fit.objective)
    again = fit_sgpr(problem, settings, checkpoint=tmp_path / "adam.npz")  # resumes at the end: nothing to run
    np.testing.assert_array_equal(again.inducing, fit.inducing)
    with pytest.raises(MethodError, match="checkpoints with --optimizer adam only"):
        fit_sgpr(problem, SGPRSettings(num_inducing=6), checkpoint=tmp_path / "lbfgs.npz")
