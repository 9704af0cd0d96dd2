"""Predictions of GPLVMs with a GP prior on the latent inputs (forecasts at new times, partially observed
new rows), and independent sequences written with the `same` kernel."""

import json
from dataclasses import replace

import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

from gpdsl.api import check_text, load_model, run
from gpdsl.cli import main
from gpdsl.backends.stan.codegen import generate_stan
from gpdsl.backends.stan.stanc import check_program
from gpdsl.data.io import load_data
from gpdsl.errors import DataError, MethodError
from gpdsl.inference.families.gplvm import gplvm_problem
from gpdsl.inference.methods.vem import VEMSettings, fit_from_results
from gpdsl.inference.predict.gp_prior_latents import (
    forecast,
    predict_outputs,
    prior_points,
    project_with_prior,
)
from gpdsl.inference.variational.gp_prior_q import GPPriorGaussian, GPPriorQParams
from gpdsl.inference.variational.site_updates import make_site_updates
from gpdsl.inference.variational.vem import VariationalParams, fit_vem, make_objective
from gpdsl.kernels import RBF, Same
from gpdsl.numerics import GP_JITTER
from gpdsl.results.arviz_compat import groups
from gpdsl.results.io import read_netcdf
from tests.inference.variational.test_gp_prior_latents import simulated

SEQUENCES_MODEL = """
data {
  int N;
  int D;
  int Q;
  vector[N] t;
  array[N] int<lower=1> sequence;
  matrix[N, D] Y;
}
parameters {
  real<lower=0> ell ~ gamma(2, 0.5);
  real<lower=0> s2 ~ lognormal(0, 1);
  vector<lower=0>[Q] w ~ gamma(2, 2);
  real<lower=0> noise ~ inv_gamma(2, 0.1);
}
latent {
  matrix[N, Q] X;
}
model {
  X ~ gp((t, sequence), rbf(t, lengthscale = ell) * same(sequence) + white(1e-6));
  F ~ gp(X, rbf(variance = s2, inv_ls2 = w));
  Y ~ normal(F, sqrt(noise));
}
"""


@pytest.fixture(scope="module")
def dynamical_fit():
    """A converged fit of the dynamical GPLVM on 20 simulated frames (noise sd 0.3)."""
    model = load_model("models/dynamical_gplvm.gpm")
    values = simulated("dynamical", N=20, D=4, noise_sd=0.3)
    data, _ = load_data(values, model)
    fit = fit_vem(gplvm_problem(model, data), VEMSettings(num_inducing=8, seed=0, max_iterations=3000))
    assert "ftol" in fit.report["message"]
    return fit, values


def dense_forecast(fit, t_new):
    """q(x*) by the dense formula of Sec. 4.2 with explicit inverses."""
    theta = fit.params.theta
    values = fit.hyperparameters()
    kernel = RBF(lengthscale=values["ell"])
    t = fit.problem.latent_prior_inputs()
    K = np.asarray(fit.problem.latent_prior_covariance(theta))
    cross = np.asarray(kernel(t, t_new[:, None]))
    prior = 1.0 + 1e-6
    mu_bar, lam = np.asarray(fit.params.latent.mu_bar), np.asarray(fit.params.latent.lam)
    mean = cross.T @ mu_bar
    variance = np.stack([prior - np.einsum("ni,nm,mi->i", cross, np.linalg.inv(K + np.diag(1 / lam[:, q])), cross)
                         for q in range(lam.shape[1])], axis=1)
    return mean, variance


def at_optimal_q(fit):
    """The fit with q(X) at its optimum for the fit's hyperparameters and inducing inputs (as the joint
    optimisation of a projection finds it), so forecasts and projections share one q(X)."""
    params = fit.params
    refined = make_site_updates(fit.problem, fit.settings, max_iterations=3000)(params.latent, params.inducing,
                                                                                params.theta)
    return replace(fit, params=VariationalParams(refined.latent, params.inducing, params.theta))


def test_forecast_equals_the_dense_gp_conditional(dynamical_fit):
    fit, _ = dynamical_fit
    t_new = np.array([-0.2, 0.13, 0.5, 1.05, 1.6])
    prediction = forecast(fit, t_new)
    mean, variance = dense_forecast(fit, t_new)
    np.testing.assert_allclose(prediction.mean, mean, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(prediction.variance, variance, rtol=1e-6, atol=1e-9)
    assert np.isnan(prediction.log_density)


def test_forecast_at_the_training_times_gives_the_marginals_of_q(dynamical_fit):
    fit, values = dynamical_fit
    prediction = forecast(fit, {"t": values["t"]})
    # the prior's white(1e-6) term is in K but not in the cross-covariance, hence the tolerance
    np.testing.assert_allclose(prediction.mean, fit.mean, atol=1e-4)
    np.testing.assert_allclose(prediction.variance, fit.variance, atol=1e-5)


def test_joint_projection_starts_at_the_training_bound_and_without_outputs_ends_at_the_forecast(dynamical_fit):
    fit = at_optimal_q(dynamical_fit[0])
    t_new = np.array([0.31, 0.52, 1.1])
    projection = project_with_prior(fit, t_new, np.full((3, 4), np.nan))
    predicted = forecast(fit, t_new)
    # no new outputs: the joint optimum adds nothing to the bound (up to rounding, as a difference of two bounds:
    # -1e-12 with JAX 0.12) and q(X*) is the forecast
    assert -1e-9 <= projection.log_density < 1e-3
    np.testing.assert_allclose(projection.mean, predicted.mean, atol=5e-3)
    np.testing.assert_allclose(projection.variance, predicted.variance, rtol=1e-2)


@pytest.mark.slow
def test_partially_observed_rows_fit_their_observed_columns_and_reconstruct_the_others():
    model = load_model("models/dynamical_gplvm.gpm")
    values = simulated("dynamical", N=40, D=6, noise_sd=0.05, seed=3)
    held_out = np.arange(16, 24)  # a gap: the times alone say little there
    train = np.setdiff1d(np.arange(40), held_out)
    data, _ = load_data({**values, "N": len(train), "t": values["t"][train], "Y": values["Y"][train]}, model)
    fit = at_optimal_q(fit_vem(gplvm_problem(model, data), VEMSettings(num_inducing=10, seed=0, max_iterations=1500)))
    truth = values["Y"][held_out]
    Y_new = truth.copy()
    Y_new[:, 3:] = np.nan
    with_outputs = predict_outputs(fit, values["t"][held_out], Y_new)
    times_only = predict_outputs(fit, values["t"][held_out])

    def error(prediction, columns):
        return np.mean((prediction.mean[:, columns] - truth[:, columns]) ** 2)

    observed, missing = slice(0, 3), slice(3, 6)
    assert error(with_outputs, observed) < error(times_only, observed)
    assert error(with_outputs, missing) < 0.6 * np.mean((values["Y"][train, 3:].mean(axis=0) - truth[:, 3:]) ** 2)
    assert with_outputs.latent.report["converged"] and np.isfinite(with_outputs.latent.log_density)
    assert with_outputs.covariance.shape == (len(held_out), 6, 6)
    assert np.all(with_outputs.variance > fit.hyperparameters()["noise"])


def test_prediction_inputs_are_checked(dynamical_fit):
    fit, _ = dynamical_fit
    with pytest.raises(DataError, match="1 column"):
        prior_points(fit, np.zeros((3, 2)))
    with pytest.raises(DataError, match="lack t"):
        prior_points(fit, {"time": [1.0]})
    with pytest.raises(DataError, match=r"shape \(2, 4\)"):
        project_with_prior(fit, [0.1, 0.2], np.zeros((3, 4)))
    with pytest.raises(MethodError, match="need new inputs"):
        predict_outputs(fit, None, np.zeros((1, 4)))


# ---- independent sequences ---------------------------------------------------------------------------
def sequences_data(lengths=(12, 9, 15), D=3, Q=2, seed=0):
    rng = np.random.default_rng(seed)
    t = np.concatenate([np.linspace(0, 1, n) for n in lengths])
    sequence = np.repeat(np.arange(1, len(lengths) + 1), lengths)
    N = len(t)
    return {"N": N, "D": D, "Q": Q, "t": t, "sequence": sequence, "Y": rng.normal(size=(N, D))}


def test_same_kernel_is_the_indicator_of_equal_inputs():
    labels = jnp.asarray([[1.0], [2.0], [1.0], [3.0]])
    np.testing.assert_array_equal(np.asarray(Same()(labels)), np.asarray(labels == labels.T, dtype=float))
    points = jnp.asarray([[0.0, 1.0], [0.5, 1.0], [0.5, 2.0]])
    product = RBF(lengthscale=0.7, active_dims=(0,)) * Same(active_dims=(1,))
    expected = np.exp(-0.5 * (points[:, :1] - points[:, :1].T) ** 2 / 0.49) * (points[:, 1:] == points[:, 1:].T)
    np.testing.assert_allclose(np.asarray(product(points)), expected, rtol=1e-12)


def test_sequences_give_a_block_diagonal_prior_and_compile_to_valid_stan():
    model, _ = check_text(SEQUENCES_MODEL, "sequences.gpm")
    values = sequences_data()
    data, _ = load_data(values, model)
    problem = gplvm_problem(model, data)
    theta = problem.unconstrain_theta({"ell": 0.3, "s2": 1.0, "w": np.ones(2), "noise": 0.1})
    K = np.asarray(problem.latent_prior_covariance(theta))
    blocks = []
    for n in (12, 9, 15):
        t = np.linspace(0, 1, n)
        blocks.append(np.exp(-0.5 * (t[:, None] - t[None]) ** 2 / 0.09) + (1e-6 + GP_JITTER) * np.eye(n))
    np.testing.assert_allclose(K, scipy.linalg.block_diag(*blocks), rtol=1e-12, atol=1e-15)
    program = generate_stan(model)
    assert "same_kernel(" in program.code and "labels_as_points(sequence)" in program.code
    check_program(program.code, "sequences")


def test_sequences_fit_and_forecast_each_sequence_from_its_own_sites():
    model, _ = check_text(SEQUENCES_MODEL, "sequences.gpm")
    values = sequences_data()
    data, _ = load_data(values, model)
    fit = fit_vem(gplvm_problem(model, data), VEMSettings(num_inducing=6, seed=0, max_iterations=200))
    params = fit.params
    bound = make_objective(fit.problem, fit.settings)(VariationalParams(params.latent, params.inducing, params.theta))
    assert np.isfinite(float(bound))
    prediction = forecast(fit, {"t": np.array([0.5, 0.5]), "sequence": np.array([2, 4])})
    # a sequence the data do not have is predicted from the prior alone
    np.testing.assert_allclose(prediction.mean[1], 0.0, atol=1e-12)
    np.testing.assert_allclose(prediction.variance[1], 1.0 + 1e-6, rtol=1e-12)
    # a known sequence only from its own block and sites
    block = values["sequence"] == 2
    ell = fit.hyperparameters()["ell"]
    K = np.asarray(fit.problem.latent_prior_covariance(params.theta))[np.ix_(block, block)]
    cross = np.exp(-0.5 * (values["t"][block] - 0.5) ** 2 / ell ** 2)
    mu_bar, lam = np.asarray(params.latent.mu_bar)[block], np.asarray(params.latent.lam)[block]
    np.testing.assert_allclose(prediction.mean[0], cross @ mu_bar, rtol=1e-8)
    variance = [1.0 + 1e-6 - cross @ np.linalg.solve(K + np.diag(1 / lam[:, q]), cross) for q in range(2)]
    np.testing.assert_allclose(prediction.variance[0], variance, rtol=1e-6)


def test_sequences_are_factorised_block_by_block_with_the_dense_values():
    model, _ = check_text(SEQUENCES_MODEL, "sequences.gpm")
    values = sequences_data(lengths=(12, 9, 12, 15))
    data, _ = load_data(values, model)
    problem = gplvm_problem(model, data)
    blocks = problem.latent_prior_blocks()
    assert [list(b) for b in blocks] == [list(np.flatnonzero(values["sequence"] == g)) for g in (1, 2, 3, 4)]
    blocked, dense = problem.latent_q(), GPPriorGaussian(problem.latent_prior_covariance)
    assert [b.shape for b in blocked.blocks] == [(1, 9), (2, 12), (1, 15)]
    rng = np.random.default_rng(1)
    theta = problem.unconstrain_theta({"ell": 0.3, "s2": 1.0, "w": np.ones(2), "noise": 0.1})
    params = GPPriorQParams(jnp.asarray(rng.normal(size=(48, 2))), jnp.asarray(rng.uniform(0.1, 3.0, (48, 2))))
    for a, b in zip(blocked.moments(params, theta), dense.moments(params, theta)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(float(blocked.kl(params, theta)), float(dense.kl(params, theta)), rtol=1e-10)
    # a kernel that is not split by `same` in every term keeps one dense block
    coupled = SEQUENCES_MODEL.replace("* same(sequence) + white(1e-6)", "* same(sequence) + rbf(t)")
    model, _ = check_text(coupled, "coupled.gpm")
    data, _ = load_data(values, model)
    assert gplvm_problem(model, data).latent_prior_blocks() is None


def test_fit_with_predict_writes_a_predictions_group(tmp_path):
    model = load_model("models/dynamical_gplvm.gpm")
    values = simulated("dynamical", N=20, D=4, noise_sd=0.3)
    results = run(model, values, "vem", VEMSettings(num_inducing=6, max_iterations=200), seed=0,
                  new_inputs={"t": np.array([0.25, 1.2]), "Y": np.array([[0.1, np.nan, 0.3, np.nan],
                                                                       [np.nan] * 4])}, out=tmp_path / "fit.nc")
    predictions = groups(read_netcdf(tmp_path / "fit.nc"))["predictions"]
    assert predictions["Y_new"].dims == ("chain", "draw", "N_new", "D")
    assert predictions["X_new_variance"].shape == (1, 1, 2, 2)
    assert np.isfinite(float(np.asarray(predictions["log_density"])[0, 0])) and np.all(np.asarray(predictions["Y_new_variance"]) > 0)
    _, fit = fit_from_results(results)
    expected = predict_outputs(fit, {"t": np.array([0.25, 1.2])}, np.array([[0.1, np.nan, 0.3, np.nan], [np.nan] * 4]))
    np.testing.assert_allclose(np.asarray(predictions["Y_new"])[0, 0], expected.mean, rtol=1e-6)


def write_json(path, values):
    path.write_text(json.dumps({k: np.asarray(v).tolist() for k, v in values.items()}))


def test_cli_predicts_new_times_of_a_dynamical_gplvm(tmp_path):
    values = simulated("dynamical", N=20, D=4, noise_sd=0.3)
    write_json(tmp_path / "data.json", values)
    write_json(tmp_path / "new.json", {"t": [0.5, 1.5]})
    status = main(["fit", "models/dynamical_gplvm.gpm", "--data", str(tmp_path / "data.json"), "--method", "vem",
                   "--num-inducing", "6", "--max-iterations", "100", "--predict", str(tmp_path / "new.json"),
                   "--out", str(tmp_path / "fit.nc"), "--quiet", "--seed", "1"])
    assert status == 3  # results written; the fit stopped at --max-iterations 100
    predictions = groups(read_netcdf(tmp_path / "fit.nc"))["predictions"]
    assert predictions["Y_new"].shape == (1, 1, 2, 4) and "log_density" not in predictions
    bad = tmp_path / "bad.json"
    write_json(bad, {"time": [0.5]})
    status = main(["fit", "models/dynamical_gplvm.gpm", "--data", str(tmp_path / "data.json"), "--method", "vem",
                   "--max-iterations", "5", "--num-inducing", "6", "--predict", str(bad), "--out",
                   str(tmp_path / "fit2.nc"), "--quiet"])
    assert status == 1


def test_supervised_gplvm_predicts_at_new_observed_inputs():
    model = load_model("models/supervised_gplvm.gpm")
    values = simulated("supervised", N=20, D=3, noise_sd=0.2)
    data, _ = load_data(values, model)
    fit = at_optimal_q(fit_vem(gplvm_problem(model, data), VEMSettings(num_inducing=6, seed=0, max_iterations=300)))
    at_training = forecast(fit, {"X": values["X"]})
    np.testing.assert_allclose(at_training.mean, fit.mean, atol=1e-4)
    X_new = np.array([[0.05], [0.55]])
    Y_new = values["Y"][[1, 11]].copy()
    Y_new[:, 1:] = np.nan
    prediction = predict_outputs(fit, {"X": X_new}, Y_new)
    assert prediction.mean.shape == (2, 3) and prediction.latent.report["converged"]
    assert np.all(np.abs(prediction.mean[:, 0] - Y_new[:, 0]) < 3 * np.sqrt(prediction.variance[:, 0]))


@pytest.mark.slow
def test_several_starts_keep_the_fit_of_highest_bound():
    model = load_model("models/dynamical_gplvm.gpm")
    values = simulated("dynamical", N=20, D=4, noise_sd=0.3)
    settings = VEMSettings(num_inducing=6, max_iterations=150, starts=3)
    results, fit = run(model, values, "vem", settings, seed=5, keep_state=True)
    bounds = fit.report["start_bounds"]
    assert len(bounds) == 3 and fit.bound == max(bounds)
    data, _ = load_data(values, model)
    problem = gplvm_problem(model, data)
    one = [fit_vem(problem, replace(settings, seed=5 + k, init="pca" if k == 0 else "random")).bound for k in range(3)]
    np.testing.assert_allclose(bounds, one, rtol=1e-9)
    with pytest.raises(MethodError, match="starts must be an integer"):
        VEMSettings(starts=0)
