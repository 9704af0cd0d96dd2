"""GP-NARX: the lag embedding, the ``ml`` fit, free simulation (naive and with uncertainty propagation), the CLI."""

import json
import subprocess
import sys

import numpy as np
import pytest
import scipy.optimize
import scipy.stats

from gpdsl.api import check_file, run
from gpdsl.cli import main
from gpdsl.errors import DataError, MethodError
from gpdsl.inference.forecast import ForecastSettings, forecast, narx_data
from gpdsl.settings import MLSettings
from gpdsl.inference.predict.free_simulation import lag_matrix, simulate
from gpdsl.inference.predict.gp_regression import predict, predict_gaussian
from gpdsl.inference.predict.uncertain_inputs import predict_gaussian_inputs
from gpdsl.kernels import build_kernel
from gpdsl.kernels.psi import PsiMethod
from gpdsl.numerics import GP_JITTER
from gpdsl.results.arviz_compat import groups, root_attrs
from gpdsl.results.io import read_netcdf

NARX = "models/gp_narx.gpm"


def recursion(n, omega=0.5):
    """A deterministic lag-2 recursion, ``y[t+1] = 2 cos(omega) y[t] - y[t-1]``: ``sin(omega t)``, never repeating."""
    y = [0.0, np.sin(omega)]
    while len(y) < n:
        y.append(2 * np.cos(omega) * y[-1] - y[-2])
    return np.array(y)


def exact_mean(kernel, X, y, noise, x):
    K = np.asarray(kernel(X)) + noise * np.eye(len(X))
    return (np.asarray(kernel.cross(x[None], X)) @ np.linalg.solve(K, y)).item()


# ---- the embedding --------------------------------------------------------------------------------
def test_lag_matrix_puts_the_newest_lag_first():
    X, y = lag_matrix(np.arange(6.0), 3)
    np.testing.assert_array_equal(X, [[2, 1, 0], [3, 2, 1], [4, 3, 2]])
    np.testing.assert_array_equal(y, [3, 4, 5])
    with pytest.raises(DataError, match="no lag vector of length 6"):
        lag_matrix(np.arange(6.0), 6)
    with pytest.raises(DataError, match="positive integer"):
        lag_matrix(np.arange(6.0), 0)
    with pytest.raises(DataError, match="finite vector"):
        lag_matrix([1.0, np.nan, 2.0, 3.0], 1)


def test_narx_data_standardises_by_the_training_targets():
    series = np.arange(10.0) ** 2
    narx = narx_data(series, 2, train=5)
    _, y = lag_matrix(series, 2)
    assert narx.offset == pytest.approx(np.mean(y[:5])) and narx.scale == pytest.approx(np.std(y[:5]))
    np.testing.assert_allclose(narx.X[0] * narx.scale + narx.offset, [1.0, 0.0])
    with pytest.raises(DataError, match="cannot train on 9"):
        narx_data(series, 2, train=9)


# ---- free simulation ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def deterministic():
    series = recursion(40)
    X, y = lag_matrix(series, 2)
    kernel = build_kernel("rbf", variance=1.0, lengthscale=np.array([0.5, 0.5]))
    return series, X, y, kernel


def test_naive_free_simulation_is_the_recursion_of_the_fitted_mean(deterministic):
    _, X, y, kernel = deterministic
    noise = 1e-3
    run_ = simulate(kernel, noise, X[:20], y[:20], X[0], 30, feedback="mean")
    window, expected = X[0].copy(), []
    for _ in range(30):
        value = exact_mean(kernel, X[:20], y[:20], noise + GP_JITTER, window)
        expected.append(value)
        window = np.concatenate([[value], window[:-1]])
    np.testing.assert_allclose(run_.mean, expected, rtol=1e-9, atol=1e-12)
    assert np.all(run_.variance > noise)


def test_without_noise_free_simulation_reproduces_the_deterministic_series(deterministic):
    series, X, y, kernel = deterministic
    run_ = simulate(kernel, 1e-10, X, y, X[0], len(y), feedback="mean")
    np.testing.assert_allclose(run_.mean, series[2:], atol=1e-4)
    shifted = simulate(kernel, 1e-10, X, y, X[5], 10, feedback="mean")
    np.testing.assert_allclose(shifted.mean, series[7:17], atol=1e-4)
    noise = 1e-4
    naive = simulate(kernel, noise, X, y, X[0], 3, feedback="mean")
    uncertain = simulate(kernel, noise, X, y, X[0], 3, feedback="gaussian", psi=PsiMethod("analytic"),
                         window_variance=0.0, training_variance=0.0)
    assert uncertain.mean[0] == pytest.approx(naive.mean[0], abs=1e-5)  # certain inputs: the exact GP
    assert uncertain.variance[0] == pytest.approx(naive.variance[0], rel=1e-2)
    assert uncertain.variance[2] > naive.variance[2]  # from the second step on, the inputs are uncertain


@pytest.mark.parametrize("psi", [PsiMethod("unscented"), PsiMethod("analytic"), PsiMethod("gauss_hermite", nodes=3)])
def test_gaussian_free_simulation_is_a_loop_of_uncertain_predictions(deterministic, psi):
    _, X, y, kernel = deterministic
    noise, training_variance = 0.01, 0.005
    run_ = simulate(kernel, noise, X[:25], y[:25], X[0], 12, psi=psi, window_variance=noise,
                    training_variance=training_variance)
    mean, variance, expected = X[0].copy(), np.full(2, noise), []
    for _ in range(12):
        step = predict_gaussian_inputs(kernel, noise, X[:25], X[:25], np.full((25, 2), training_variance), y[:25],
                                       mean[None], variance[None], psi)
        expected.append((step.mean[0, 0], step.variance[0, 0]))
        mean = np.concatenate([step.mean[0], mean[:-1]])
        variance = np.concatenate([step.variance[0], variance[:-1]])
    np.testing.assert_allclose(np.column_stack([run_.mean, run_.variance]), expected, rtol=1e-9)
    naive = simulate(kernel, noise, X[:25], y[:25], X[0], 12, feedback="mean")
    assert np.all(run_.variance[3:] > naive.variance[3:])


def test_monte_carlo_free_simulation_is_seeded(deterministic):
    _, X, y, kernel = deterministic
    options = {"psi": PsiMethod("monte_carlo", samples=64), "training_variance": 0.01}
    first = simulate(kernel, 0.01, X[:25], y[:25], X[0], 10, seed=1, **options)
    again = simulate(kernel, 0.01, X[:25], y[:25], X[0], 10, seed=1, **options)
    other = simulate(kernel, 0.01, X[:25], y[:25], X[0], 10, seed=2, **options)
    redrawn = simulate(kernel, 0.01, X[:25], y[:25], X[0], 10, seed=1, resample_training=True, **options)
    np.testing.assert_array_equal(first.mean, again.mean)
    assert not np.allclose(first.mean, other.mean) and not np.allclose(first.mean, redrawn.mean)


def test_free_simulation_refuses_bad_options(deterministic):
    _, X, y, kernel = deterministic
    with pytest.raises(MethodError, match="unknown feedback"):
        simulate(kernel, 0.01, X, y, X[0], 5, feedback="median")
    with pytest.raises(MethodError, match="positive integer"):
        simulate(kernel, 0.01, X, y, X[0], 0)
    with pytest.raises(DataError, match="a window"):
        simulate(kernel, 0.01, X, y, X[0, :1], 5)
    with pytest.raises(DataError, match="window_variance must be finite and non-negative"):
        simulate(kernel, 0.01, X, y, X[0], 5, window_variance=-1.0)


# ---- the ml method --------------------------------------------------------------------------------
def regression_data(n=25, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, size=(n, 2))
    y = np.sin(X[:, 0]) + 0.2 * X[:, 1] + 0.15 * rng.normal(size=n)
    return {"N": n, "D": 2, "X": X, "y": y}


def matern52(X, variance, lengthscale):
    r = np.sqrt(np.sum(((X[:, None, :] - X[None, :, :]) / lengthscale) ** 2, axis=-1))
    s = np.sqrt(5.0) * r
    return variance * (1 + s + s ** 2 / 3) * np.exp(-s)


def test_ml_is_the_map_estimate_of_the_exact_marginal_likelihood():
    """``models/gp_regression.gpm`` has priors, so ``ml`` maximises marginal likelihood plus log prior."""
    model, _ = check_file("models/gp_regression.gpm")
    data = regression_data()
    X, y = data["X"], data["y"]

    def negative_log_posterior(log_params):
        variance, ell1, ell2, sigma = np.exp(log_params)
        K = matern52(X, variance, np.array([ell1, ell2])) + (sigma ** 2 + 1e-8) * np.eye(len(y))
        log_marginal = scipy.stats.multivariate_normal(np.zeros(len(y)), K).logpdf(y)
        log_prior = (scipy.stats.lognorm(1.0).logpdf(variance) + scipy.stats.invgamma(5, scale=5).logpdf(ell1)
                     + scipy.stats.invgamma(5, scale=5).logpdf(ell2) + scipy.stats.halfnorm().logpdf(sigma))
        return -(log_marginal + log_prior)

    reference = scipy.optimize.minimize(negative_log_posterior, np.zeros(4), method="Nelder-Mead",
                                        options={"xatol": 1e-9, "fatol": 1e-12, "maxiter": 20000})
    results, fit = run(model, data, "ml", MLSettings(), seed=0, keep_state=True)
    values = fit.hyperparameters()
    ours = np.log([values["variance"], *values["lengthscale"], values["noise"]])
    assert fit.log_posterior == pytest.approx(-reference.fun, abs=1e-6)
    np.testing.assert_allclose(ours, reference.x, atol=2e-3)
    assert float(groups(results)["sample_stats"]["lp"][0, 0]) == pytest.approx(fit.log_posterior)


def test_ml_without_priors_is_type_2_maximum_likelihood_and_predicts():
    model, _ = check_file(NARX)
    series = recursion(50) + 0.05 * np.random.default_rng(3).normal(size=50)
    X, y = lag_matrix(series, 3)
    data = {"N": 30, "L": 3, "X": X[:30], "y": y[:30]}
    results, fit = run(model, data, "ml", MLSettings(), seed=0, keep_state=True, new_inputs=X[30:])
    prediction = predict(fit, X[30:])
    stored = groups(results)["predictions"]
    np.testing.assert_allclose(np.asarray(stored["y_mean"])[0, 0], prediction.mean)
    np.testing.assert_allclose(np.asarray(stored["y_variance"])[0, 0] - np.asarray(stored["f_variance"])[0, 0],
                               fit.noise_variance())
    assert np.sqrt(np.mean((prediction.mean - y[30:]) ** 2)) < 0.3 * np.std(y)
    gaussian = predict_gaussian(fit, X[30:], np.zeros_like(X[30:]), PsiMethod("analytic"), jitter=1e-8)
    np.testing.assert_allclose(gaussian.mean[:, 0], prediction.mean, atol=1e-6)
    np.testing.assert_allclose(gaussian.variance[:, 0], prediction.variance, rtol=1e-6)

    def negative_log_marginal(log_params):
        s2, ell, noise = np.exp(log_params[0]), np.exp(log_params[1:4]), np.exp(log_params[-1])
        v = np.exp(log_params[4:7])
        Xt = X[:30]
        r2 = np.sum(((Xt[:, None, :] - Xt[None, :, :]) / ell) ** 2, axis=-1)
        K = s2 * np.exp(-0.5 * r2) + (Xt * v) @ Xt.T + (noise + 1e-8) * np.eye(30)
        return -scipy.stats.multivariate_normal(np.zeros(30), K).logpdf(y[:30])

    values = fit.hyperparameters()
    at_ours = np.log(np.concatenate([[values["rbf_variance"]], values["rbf_lengthscale"],
                                     values["linear_variance"], [values["noise"]]]))
    assert -negative_log_marginal(at_ours) == pytest.approx(fit.log_marginal, abs=1e-4)
    polished = scipy.optimize.minimize(negative_log_marginal, at_ours, method="L-BFGS-B",
                                       bounds=[(np.log(1e-6), None)] * len(at_ours))  # the model's lower bounds
    assert -polished.fun - fit.log_marginal < 1e-3  # no better optimum next to ours


def test_ml_settings_are_validated():
    with pytest.raises(MethodError, match="max_iterations must be an integer >= 1"):
        MLSettings(max_iterations=0)
    with pytest.raises(MethodError, match="not a parameter of the model"):
        run(check_file(NARX)[0], {"N": 3, "L": 1, "X": [[0.0], [1.0], [2.0]], "y": [0.0, 1.0, 0.5]}, "ml",
            MLSettings(initial_values={"nosie": 0.1}), seed=0)


# ---- forecast: Python and the command line --------------------------------------------------------
@pytest.fixture(scope="module")
def series_file(tmp_path_factory):
    t = np.arange(60)
    series = 10 + 0.1 * t + np.sin(2 * np.pi * t / 6) + 0.05 * np.random.default_rng(0).normal(size=60)
    path = tmp_path_factory.mktemp("series") / "series.json"
    path.write_text(json.dumps({"passengers": series.tolist()}))
    return path, series


def test_forecast_from_the_command_line(series_file, tmp_path, capsys):
    path, series = series_file
    out = tmp_path / "forecast.nc"
    assert main(["forecast", NARX, "--data", str(path), "--lag", "6", "--train", "30", "--psi", "unscented",
                 "--seed", "0", "--out", str(out), "--quiet"]) == 0
    assert "held-out RMSE" in capsys.readouterr().out
    results = read_netcdf(out)
    predictions = groups(results)["predictions"]
    mean = np.asarray(predictions["y_mean"])[0, 0]
    assert mean.shape == (54,) and predictions["y_mean"].dims == ("chain", "draw", "step")
    np.testing.assert_array_equal(np.asarray(predictions["series_index"])[0, 0], np.arange(6, 60))
    np.testing.assert_array_equal(np.asarray(predictions["y_observed"])[0, 0], series[6:])
    settings = ForecastSettings(lag=6, train=30, psi="unscented")
    _, expected, _ = forecast(check_file(NARX)[0], series, settings, seed=0)
    np.testing.assert_allclose(mean, expected.mean, rtol=1e-8)
    report = json.loads(root_attrs(results)["report"])
    held_out = slice(30, None)
    rmse = np.sqrt(np.mean((mean[held_out] - series[36:]) ** 2))
    assert report["forecast"]["count"] == 24 and report["forecast"]["rmse"] == pytest.approx(rmse)
    assert json.loads(root_attrs(results)["forecast"])["lag"] == 6


def test_forecast_mean_feedback_matches_the_exact_gp_recursion(series_file):
    _, series = series_file
    _, result, fit = forecast(check_file(NARX)[0], series, ForecastSettings(lag=6, train=30, feedback="mean",
                                                                             steps=70), seed=0)
    narx = narx_data(series, 6, 30)
    X, y = narx.X[:30], narx.y[:30]
    window, expected = narx.X[0].copy(), []
    for _ in range(70):
        value = exact_mean(fit.kernel(), X, y, fit.noise_variance() + GP_JITTER, window)
        expected.append(value * narx.scale + narx.offset)
        window = np.concatenate([[value], window[:-1]])
    np.testing.assert_allclose(result.mean, expected, rtol=1e-9)
    assert np.isnan(result.observed[54:]).all() and result.index[-1] == 75


@pytest.mark.parametrize("flags, message", [
    (["--lag", "0"], "lag must be an integer >= 1"),
    (["--lag", "6", "--psi", "simpson"], "invalid choice: 'simpson'"),
    (["--lag", "6", "--train", "500"], "cannot train on 500"),
    (["--lag", "6", "--training-variance", "lots"], "--training-variance takes 'noise' or a number"),
    (["--lag", "6", "--training-variance", "-1"], "training_variance must be 'noise' or a finite number >= 0"),
    (["--lag", "6", "--steps", "0"], "steps must be an integer >= 1"),
    (["--lag", "6", "--series", "y"], "has no variable 'y'"),
    (["--lag", "6", "--init-value", "nosie=1"], "not a parameter of the model"),
    (["--train", "20"], "the lag (--lag) is required"),
])
def test_forecast_refuses_bad_options_with_exit_1(series_file, tmp_path, capsys, flags, message):
    path, _ = series_file
    out = tmp_path / "never.nc"
    assert exit_status(["forecast", NARX, "--data", str(path), "--out", str(out), "--quiet", *flags]) == 1
    captured = capsys.readouterr()
    assert message in captured.err and "Traceback" not in captured.err
    assert not out.exists()


def test_forecast_refuses_a_model_that_is_not_gp_narx(series_file, tmp_path):
    path, _ = series_file
    result = subprocess.run([sys.executable, "-m", "gpdsl.cli", "forecast", "models/gp_classification.gpm", "--data",
                             str(path), "--lag", "3", "--out", str(tmp_path / "x.nc")], capture_output=True, text=True)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "forecast needs GP regression" in result.stderr
    result = subprocess.run([sys.executable, "-m", "gpdsl.cli", "forecast", NARX, "--data", str(path), "--lag", "3",
                             "--psi", "simpson", "--out", str(tmp_path / "x.nc")], capture_output=True, text=True)
    assert result.returncode == 1 and "invalid choice" in result.stderr


def exit_status(argv) -> int:
    """``main``'s status, also when argparse ends the program (usage errors)."""
    try:
        return main(argv)
    except SystemExit as stop:
        return stop.code
