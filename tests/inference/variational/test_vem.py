"""Variational EM for the Bayesian GPLVM: model view, objective against GPy, fit, results, predictions, CLI."""

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gpdsl.api import check_file, load_model, run
from gpdsl.errors import MethodError
from gpdsl.inference.families.gplvm import gplvm_problem
from gpdsl.inference.methods.vem import fit_from_results
from gpdsl.inference.optimise import lbfgs
from gpdsl.inference.predict.gplvm import (
    Projection,
    latent_relevance,
    predict_latent_function,
    project_new,
    reconstruct,
)
from gpdsl.inference.variational.latent_q import FactorisedGaussian, GaussianQParams, kl_standard_normal, pca_means
from gpdsl.inference.variational.vem import (
    VariationalParams,
    VEMSettings,
    fit_vem,
    initial_params,
    make_objective,
    optimiser_space,
    scale_blocks,
)
from gpdsl.results import arviz_compat
from gpdsl.results.io import read_netcdf, write_netcdf

MODEL = "models/bayesian_gplvm.gpm"


def synthetic(N=40, D=6, seed=0):
    rng = np.random.default_rng(seed)
    t = rng.uniform(-2, 2, size=N)
    X = np.column_stack([np.sin(t), np.cos(t)])
    W = rng.normal(size=(2, D))
    Y = np.tanh(X @ W) + 0.05 * rng.normal(size=(N, D))
    labels = (t > 0).astype(int)
    return {"N": N, "D": D, "Q": 2, "Y": Y}, labels


@pytest.fixture(scope="module")
def model():
    return check_file(MODEL)[0]


@pytest.fixture(scope="module")
def fitted(model):
    data, labels = synthetic()
    results, fit = run(model, data, "vem", VEMSettings(num_inducing=10, max_iterations=300), seed=0, keep_state=True)
    return data, labels, results, fit


def random_params(problem, M, seed=1):
    rng = np.random.default_rng(seed)
    N, Q = problem.num_points, problem.latent_dim
    theta = problem.unconstrain_theta({"s2": 1.3, "w": rng.uniform(0.5, 2.0, size=Q), "noise": 0.2})
    return VariationalParams(jnp.asarray(rng.normal(size=(N, Q))), jnp.asarray(np.log(rng.uniform(0.05, 0.6, (N, Q)))),
                             jnp.asarray(rng.normal(size=(M, Q))), theta)


def test_the_bayesian_gplvm_model_is_recognised(model):
    data, _ = synthetic()
    problem = gplvm_problem(model, data)
    assert (problem.latent, problem.output, problem.latent_dim, problem.output_dim) == ("X", "Y", 2, 6)
    assert problem.theta_names == ["s2", "w", "noise"]
    assert problem.unpriored == ["s2", "w", "noise"]


@pytest.mark.parametrize("text, reason", [
    ("data { int N; vector[N] x; array[N] int<lower=0, upper=1> y; }\nparameters { real<lower=0> l ~ gamma(2, 2); }\n"
     "model { f ~ gp(x, rbf(lengthscale = l)); y ~ bernoulli_probit(f); }", "not observed directly"),
    ("data { int N; int D; int Q; matrix[N, D] Y; }\nparameters { real<lower=0> s; }\nlatent { matrix[N, Q] X; }\n"
     "model { X ~ normal(0, 2); F ~ gp(X, rbf(lengthscale = 1)); Y ~ normal(F, s); }", "X ~ normal(0, 1)"),
])
def test_other_models_are_refused_with_what_vem_needs(text, reason):
    model = load_model(text)
    rng = np.random.default_rng(0)
    if "bernoulli" in text:
        data = {"N": 5, "x": rng.normal(size=5), "y": np.array([0, 1, 0, 1, 1])}
    else:
        data = {"N": 5, "D": 2, "Q": 1, "Y": rng.normal(size=(5, 2))}
    with pytest.raises(MethodError, match="needs a Bayesian GPLVM") as error:
        gplvm_problem(model, data)
    assert reason in str(error.value)


def test_objective_equals_gpy_bayesian_gplvm(model):
    GPy = pytest.importorskip("GPy")
    data, _ = synthetic(N=15, D=4)
    problem = gplvm_problem(model, data)
    params = random_params(problem, M=5)
    ours = float(make_objective(problem, VEMSettings())(params))
    values = problem.theta_values(params.theta)
    kernel = GPy.kern.RBF(2, variance=float(values["s2"]), lengthscale=1 / np.sqrt(np.asarray(values["w"])), ARD=True)
    gpy = GPy.models.BayesianGPLVM(data["Y"], 2, X=np.asarray(params.mean), X_variance=np.exp(np.asarray(params.log_variance)),
                                   Z=np.asarray(params.inducing), kernel=kernel, num_inducing=5)
    gpy.likelihood.variance = float(values["noise"])
    assert ours == pytest.approx(float(np.squeeze(gpy.log_likelihood())), rel=1e-6)


def test_variational_params_hold_the_parameters_of_the_q_x_family():
    mean, log_variance, Z, theta = jnp.ones((4, 2)), jnp.zeros((4, 2)), jnp.ones((3, 2)), jnp.zeros(3)
    params = VariationalParams(mean, log_variance, Z, theta)
    assert params == VariationalParams(GaussianQParams(mean, log_variance), Z, theta)
    assert params.mean is mean and params.log_variance is log_variance
    leaves, tree = jax.tree_util.tree_flatten(params)
    assert len(leaves) == 4
    rebuilt = jax.tree_util.tree_unflatten(tree, leaves)
    assert type(rebuilt) is VariationalParams and type(rebuilt.latent) is GaussianQParams


class ScaledPrior(FactorisedGaussian):
    """A factorised Gaussian against N(0, scale^2 I): a new family changes only its own methods."""

    def __init__(self, scale):
        self.scale = scale

    def kl(self, params, theta, moments=None):
        moments = moments if moments is not None else self.moments(params, theta)
        return kl_standard_normal(moments.mean / self.scale, moments.variance / self.scale ** 2)


def test_the_bound_takes_its_kl_term_from_the_q_x_family(model):
    data, _ = synthetic(N=15, D=4)
    problem = gplvm_problem(model, data)
    params = random_params(problem, M=5)
    mean, variance = params.mean, jnp.exp(params.log_variance)
    standard = float(make_objective(problem, VEMSettings())(params))
    scaled = float(make_objective(problem, VEMSettings(), ScaledPrior(2.0))(params))
    change = float(kl_standard_normal(mean / 2.0, variance / 4.0) - kl_standard_normal(mean, variance))
    assert scaled == pytest.approx(standard - change, rel=1e-12)
    fit = fit_vem(problem, VEMSettings(num_inducing=5, max_iterations=5), latent_q=ScaledPrior(2.0))
    assert isinstance(fit.latent_q, ScaledPrior) and np.isfinite(fit.bound)
    np.testing.assert_array_equal(fit.variance, np.exp(np.asarray(fit.params.log_variance)))


def test_pca_initialisation_is_standardised_principal_components():
    data, _ = synthetic()
    X = pca_means(data["Y"], 3, np.random.default_rng(0))
    np.testing.assert_allclose(X.mean(axis=0), 0, atol=1e-12)
    np.testing.assert_allclose(X.std(axis=0), 1, atol=1e-12)
    centred = data["Y"] - data["Y"].mean(axis=0)
    first = centred @ np.linalg.svd(centred)[2][0]
    assert abs(np.corrcoef(first, X[:, 0])[0, 1]) == pytest.approx(1.0, abs=1e-12)


def test_ard_heuristic_sets_inverse_squared_ranges(model):
    data, _ = synthetic()
    problem = gplvm_problem(model, data)
    params = initial_params(problem, VEMSettings(num_inducing=7, init_variance=0.1))
    values = problem.theta_values(params.theta)
    span = np.ptp(np.asarray(params.mean), axis=0)
    np.testing.assert_allclose(values["w"], 1 / span ** 2, rtol=1e-10)
    np.testing.assert_allclose(np.exp(params.log_variance), 0.1)
    assert params.inducing.shape == (7, 2)
    assert float(values["noise"]) == pytest.approx(0.01 * np.mean(np.var(data["Y"], axis=0)), rel=1e-10)


def test_fit_converges_and_reports(fitted):
    _, _, _, fit = fitted
    report = fit.report
    assert report["iterations"] > 10 and report["evaluations"] >= report["iterations"]
    assert fit.trace[-1] == pytest.approx(fit.bound)
    assert fit.bound > fit.trace[0] + 10
    assert np.all(np.diff(fit.trace) > -1e-6)
    assert isinstance(report["message"], str) and report["gradient_norm"] >= 0
    assert fit.hyperparameters()["noise"] < 0.05


def test_results_file_round_trip(fitted, tmp_path):
    data, _, results, fit = fitted
    posterior = arviz_compat.groups(results)["posterior"]
    assert posterior["X"].dims == ("chain", "draw", "N", "Q")
    assert posterior["X_variance"].shape == (1, 1, 40, 2)
    assert posterior["inducing_inputs"].dims == ("chain", "draw", "M", "Q")
    stats = arviz_compat.groups(results)["sample_stats"]
    assert stats["bound_trace"].dims == ("chain", "draw", "iteration")
    path = write_netcdf(results, tmp_path / "fit.nc")
    _, loaded = fit_from_results(read_netcdf(path))
    objective = make_objective(loaded.problem, loaded.settings)
    assert float(objective(loaded.params)) == pytest.approx(fit.bound, rel=1e-10)
    assert json.loads(arviz_compat.root_attrs(results)["report"])["optimizer"]["iterations"] == fit.report["iterations"]


def test_missing_values_use_the_exact_bound(model):
    data, _ = synthetic(N=20, D=4)
    problem = gplvm_problem(model, data)
    params = random_params(problem, M=6)
    full = float(make_objective(problem, VEMSettings())(params))
    holed = dict(data, Y=data["Y"].copy())
    holed["Y"][3, 1] = np.nan
    holed["Y"][7, 2] = np.nan
    problem_holed = gplvm_problem(model, holed)
    with_missing = float(make_objective(problem_holed, VEMSettings())(params))
    assert np.isfinite(with_missing) and with_missing != pytest.approx(full, rel=1e-8)
    fit = fit_vem(problem_holed, VEMSettings(num_inducing=6, max_iterations=50))
    assert np.isfinite(fit.bound)


def test_projecting_a_training_row_recovers_its_latent_point(fitted):
    _, _, _, fit = fitted
    row = 5
    projection = project_new(fit, fit.problem.Y[row])
    assert np.linalg.norm(projection.mean[0] - np.asarray(fit.params.mean)[row]) < 0.15
    assert np.isfinite(projection.log_density)
    far = project_new(fit, fit.problem.Y[row] + 3.0)
    assert far.log_density < projection.log_density - 10


def test_reconstruction_matches_monte_carlo_over_q_x_star(fitted):
    _, _, _, fit = fitted
    projection = Projection(np.array([[0.3, -0.2]]), np.array([[0.05, 0.1]]), 0.0, {})
    columns = [1, 4]
    mean, cov = reconstruct(fit, projection, columns)
    rng = np.random.default_rng(0)
    x = projection.mean + np.sqrt(projection.variance) * rng.normal(size=(20000, 2))
    f_mean, f_var = predict_latent_function(fit, x, columns)
    noise = float(fit.hyperparameters()["noise"])
    standard_error = f_mean.std(axis=0) / np.sqrt(len(x))
    assert np.all(np.abs(mean[0] - f_mean.mean(axis=0)) < 4 * standard_error + 1e-6)
    centred = f_mean - f_mean.mean(axis=0)
    products = centred[:, :, None] * centred[:, None, :]
    total = products.mean(axis=0) + np.diag(f_var.mean(axis=0) + noise)
    standard_error = (products.std(axis=0) + np.diag(f_var.std(axis=0))) / np.sqrt(len(x))
    assert np.all(np.abs(cov[0] - total) < 4 * standard_error + 1e-9)


def test_reconstruction_of_hidden_columns_is_close_to_truth(fitted):
    data, _, _, fit = fitted
    Y_test = data["Y"][:5].copy()
    hidden = [0, 3]
    partial = Y_test.copy()
    partial[:, hidden] = np.nan
    projection = project_new(fit, partial)
    mean, cov = reconstruct(fit, projection, hidden)
    errors = mean - Y_test[:, hidden]
    sd = np.sqrt(np.einsum("njj->nj", cov))
    assert np.sqrt(np.mean(errors ** 2)) < 0.5 * np.std(data["Y"][:, hidden])
    assert np.all(np.abs(errors) < 5 * sd)


def test_latent_relevance_reads_the_ard_weights(fitted):
    _, _, _, fit = fitted
    np.testing.assert_allclose(latent_relevance(fit), fit.hyperparameters()["w"])


@pytest.mark.parametrize("psi", ["unscented", "gauss_hermite", "monte_carlo"])
def test_any_kernel_runs_with_the_approximate_psi_statistics(psi):
    text = open(MODEL).read().replace("rbf(variance = s2, inv_ls2 = w)",
                                      "matern32(variance = s2, lengthscale = w) + linear(variance = 0.1)")
    model = load_model(text)
    data, _ = synthetic(N=25, D=3)
    fit = fit_vem(gplvm_problem(model, data), VEMSettings(psi=psi, num_inducing=6, max_iterations=40, gh_nodes=3))
    assert np.isfinite(fit.bound) and fit.bound > fit.trace[0]


def test_analytic_psi_refuses_kernels_without_closed_form():
    text = open(MODEL).read().replace("rbf(variance = s2, inv_ls2 = w)", "matern32(variance = s2, lengthscale = w)")
    data, _ = synthetic(N=10, D=2)
    with pytest.raises(MethodError, match="unscented"):
        fit_vem(gplvm_problem(load_model(text), data), VEMSettings(num_inducing=4, max_iterations=5))


# ---- the optimiser's path -------------------------------------------------------------------------
def lengthscale_model(text):
    """The shipped model with its ARD weights read as length-scales (``w`` is then ``ell``)."""
    return load_model(text.replace("inv_ls2 = w", "lengthscale = w"))


def test_a_kernel_written_with_weights_follows_the_path_of_the_same_kernel_written_with_length_scales():
    data, _ = synthetic(N=30, D=4)
    text = open(MODEL).read()
    weights, scales = gplvm_problem(load_model(text), data), gplvm_problem(lengthscale_model(text), data)
    settings = VEMSettings(num_inducing=8, max_iterations=25)
    by_weights, by_scales = fit_vem(weights, settings), fit_vem(scales, settings)
    # the Sec. 5 heuristics start both at the same kernel (w = 1 / range^2, ell = range); the optimiser
    # moves both through the softplus of the length-scale, so only rounding separates the two paths
    np.testing.assert_allclose(by_weights.trace, by_scales.trace, rtol=1e-5)
    np.testing.assert_allclose(by_weights.hyperparameters()["w"], by_scales.hyperparameters()["w"] ** -2.0, rtol=1e-4)


def test_weights_move_as_the_softplus_of_their_length_scale(model):
    data, _ = synthetic(N=12, D=3)
    problem = gplvm_problem(model, data)
    params = initial_params(problem, VEMSettings(num_inducing=4, initial_values={"w": [4.0, 0.01]}))
    to_params, from_params = optimiser_space(problem)
    raw = from_params(params)
    ell = np.log1p(np.exp(raw.theta[1:3]))  # softplus of the coordinates of w
    np.testing.assert_allclose(ell, [0.5, 10.0], rtol=1e-12)
    np.testing.assert_allclose(np.asarray(to_params(raw).theta), np.asarray(params.theta), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("likelihood, noise_of", [("sqrt(noise)", lambda v: v["noise"]),
                                                  ("noise", lambda v: v["noise"] ** 2)])
def test_the_warm_up_holds_the_noise_and_kernel_variances_and_lowers_a_large_noise(likelihood, noise_of):
    data, _ = synthetic()
    model = load_model(open(MODEL).read().replace("normal(F, sqrt(noise))", f"normal(F, {likelihood})"))
    problem = gplvm_problem(model, data)
    y_var = np.mean(np.var(data["Y"], axis=0))
    start = initial_params(problem, VEMSettings(num_inducing=8, initial_values={"s2": 0.7, "noise": 2.0}))
    warm = fit_vem(problem, VEMSettings(num_inducing=8, warmup_iterations=20, max_iterations=20), initial=start)
    values = warm.hyperparameters()
    assert warm.report["warmup_iterations"] == 20
    assert float(values["s2"]) == pytest.approx(0.7, rel=1e-12)
    # a noise variance above 1% of the outputs' variance starts the warm-up at 1% (vargplvm's SNR of 100)
    assert float(noise_of(values)) == pytest.approx(0.01 * y_var, rel=1e-10)
    assert not np.allclose(values["w"], problem.theta_values(start.theta)["w"])
    later = fit_vem(problem, VEMSettings(num_inducing=8, warmup_iterations=20, max_iterations=40), initial=start)
    assert float(later.hyperparameters()["s2"]) != pytest.approx(0.7, rel=1e-6)
    assert np.all(np.diff(later.trace[1:]) > -1e-6) and later.bound > warm.bound


def test_no_warm_up_when_asked_or_nothing_to_hold(model):
    data, _ = synthetic(N=20, D=3)
    problem = gplvm_problem(model, data)
    assert fit_vem(problem, VEMSettings(num_inducing=5, warmup_iterations=0, max_iterations=5)).report[
        "warmup_iterations"] == 0
    fixed = load_model(open(MODEL).read().replace("variance = s2", "variance = 1").replace("sqrt(noise)", "0.1")
                       .replace("real<lower=0> s2;", "").replace("real<lower=0> noise;", ""))
    report = fit_vem(gplvm_problem(fixed, data), VEMSettings(num_inducing=5, max_iterations=5)).report
    assert report["warmup_iterations"] == 0 and report["iterations"] == 5


def test_one_compiled_program_serves_the_warm_up_the_main_phase_and_restarts(model, monkeypatch, caplog):
    data, _ = synthetic(N=23, D=4)
    problem = gplvm_problem(model, data)
    minimize, calls = lbfgs.minimize, []

    def stalling_once(fun, x0, **options):  # the main phase stops early as if its line search had failed
        if len(calls) == 1:
            options["max_iterations"] = 5
        result = minimize(fun, x0, **options)
        calls.append(result)
        return result._replace(stop="line_search") if len(calls) == 2 else result

    monkeypatch.setattr(lbfgs, "minimize", stalling_once)
    with caplog.at_level(logging.DEBUG, logger="jax"):  # JAX logs every lowering and compilation at DEBUG
        fit = fit_vem(problem, VEMSettings(num_inducing=6, warmup_iterations=4, max_iterations=15, restarts=1))
    assert fit.report["warmup_iterations"] == 4 and fit.report["restarts"] == 1 and len(calls) == 3
    assert fit.report["iterations"] == sum(result.iterations for result in calls) == 15
    compiled = [record.getMessage() for record in caplog.records if "Finished XLA compilation" in record.getMessage()]
    assert sum("jit(value_and_gradient)" in message for message in compiled) == 1
    # the start point stays in NumPy: no copy program (jnp.asarray of a NumPy array) per shape
    assert not any("jit(stage)" in message for message in compiled)


SMALL_PROGRAMS = """
import numpy as np
from gpdsl.api import load_model
from gpdsl.inference.families.gplvm import gplvm_problem
from gpdsl.inference.variational.vem import VEMSettings, fit_vem
Y = np.random.default_rng(0).normal(size=(15, 3))
fit = fit_vem(gplvm_problem(load_model("models/bayesian_gplvm.gpm"), {"N": 15, "D": 3, "Q": 2, "Y": Y}),
              VEMSettings(num_inducing=4, max_iterations=2))
fit.hyperparameters()
"""


def test_the_small_programs_of_every_run_go_to_the_compilation_cache(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_COMPILATION_CACHE_DIR", "GPDSL_JAX_CACHE")}
    env["GPDSL_CACHE_DIR"] = str(tmp_path)
    subprocess.run([sys.executable, "-c", SMALL_PROGRAMS], env=env, check=True, capture_output=True,
                   cwd=Path(__file__).resolve().parents[3])
    names = {path.name.split("-")[0] for path in (tmp_path / "jax").glob("*-cache")}
    # the start point, the warm-up's noise check and the hyperparameters of the results: a few milliseconds to
    # load in a later run instead of 0.02-0.1 s each to compile (below the cache's threshold for other programs)
    assert {"jit_unconstrain_theta", "jit_noise_variance", "jit_theta_values"} <= names


def test_l_bfgs_scales_each_latent_dimension_and_each_hyperparameter_on_its_own(model):
    data, _ = synthetic(N=12, D=3)
    problem = gplvm_problem(model, data)
    _, from_params = optimiser_space(problem)
    labels = scale_blocks(problem, from_params(initial_params(problem, VEMSettings(num_inducing=4))))
    N, Q, M = 12, 2, 4
    means, variances, inducing, theta = np.split(labels, np.cumsum([N * Q, N * Q, M * Q]))
    np.testing.assert_array_equal(means.reshape(N, Q), np.tile([0, 1], (N, 1)))
    np.testing.assert_array_equal(variances.reshape(N, Q), np.tile([2, 3], (N, 1)))
    np.testing.assert_array_equal(inducing.reshape(M, Q), np.tile([4, 5], (M, 1)))
    np.testing.assert_array_equal(theta, [6, 7, 7, 8])  # s2, w (both dimensions), noise


def test_block_scales_let_l_bfgs_cross_curvatures_orders_of_magnitude_apart():
    rng = np.random.default_rng(0)
    curvature = np.concatenate([rng.uniform(1, 10, 50), 1e4 * rng.uniform(1, 10, 50)])

    def fun(x):
        return 0.5 * np.sum(curvature * x * x), curvature * x

    one_scale = lbfgs.minimize(fun, np.ones(100), gtol=1e-8, ftol=0.0, max_iterations=5000)
    two_scales = lbfgs.minimize(fun, np.ones(100), gtol=1e-8, ftol=0.0, max_iterations=5000,
                                scale_blocks=np.repeat([0, 1], 50))
    assert one_scale.converged and two_scales.converged
    assert two_scales.iterations < one_scale.iterations / 10
    with pytest.raises(ValueError, match="label"):
        lbfgs.minimize(fun, np.ones(100), scale_blocks=np.zeros(99, dtype=int))


@pytest.mark.parametrize("changes, message", [
    ({"warmup_iterations": -1}, "warmup_iterations"), ({"warmup_iterations": 2.5}, "warmup_iterations"),
    ({"scaling": "diagonal"}, "scaling"), ({"restarts": -1}, "restarts")])
def test_optimiser_settings_are_validated_when_made(changes, message):
    with pytest.raises(MethodError, match=message):
        VEMSettings(**changes)


MIRROR = Path(os.environ.get("GPDSL_DATA_MIRROR", Path(__file__).resolve().parents[4] / "shared" / "data"))


def oil_subset(N, Q):
    """The first N rows of GPy's oil_100 permutation of the oil-flow training outputs, centred."""
    if not (MIRROR / "oil_flow").is_dir():
        pytest.skip(f"the data mirror {MIRROR} is absent")
    from gpdsl.datasets import oil_flow

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GPDSL_DATA_MIRROR", str(MIRROR))
        Y = oil_flow("train").X
    Y = Y[np.random.RandomState(10000).permutation(len(Y))[:N]]
    return {"N": N, "D": Y.shape[1], "Q": Q, "Y": Y - Y.mean(axis=0)}


def test_on_an_oil_flow_subset_both_parameterisations_pass_gpys_bound_and_agree():
    data = oil_subset(200, 10)
    text = open(MODEL).read()
    bounds = [fit_vem(gplvm_problem(model, data), VEMSettings(num_inducing=20, seed=0)).bound
              for model in (load_model(text), lengthscale_model(text))]
    # GPy 1.15 from its default start (seeds 0-2, 1000 L-BFGS-B evaluations): 736.7, 773.5, 771.1; gpdsl
    # before the warm-up and block scales: 822 (weights) and 765-798 (length-scales); 5000-iteration runs
    # of the weights model from five seeds: 834-863
    assert min(bounds) > 830
    assert abs(bounds[0] - bounds[1]) < 0.03 * max(bounds)


@pytest.mark.slow
def test_on_oil_flow_the_default_path_passes_gpys_bound():
    GPy = pytest.importorskip("GPy")
    data = oil_subset(1000, 10)
    np.random.seed(0)
    gpy = GPy.models.BayesianGPLVM(data["Y"], 10, num_inducing=30, kernel=GPy.kern.RBF(10, ARD=True))
    gpy.optimize("lbfgsb", max_iters=1000)
    gpy_bound = float(np.squeeze(gpy.log_likelihood()))
    fit = fit_vem(gplvm_problem(load_model(open(MODEL).read()), data), VEMSettings(num_inducing=30, seed=0))
    assert fit.bound > gpy_bound


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "gpdsl.cli", *args], capture_output=True, text=True)


def test_cli_fit_and_latent_plot(tmp_path):
    data, labels = synthetic(N=30)
    data_path = tmp_path / "data.json"
    data_path.write_text(json.dumps({k: np.asarray(v).tolist() for k, v in data.items()}))
    (tmp_path / "labels.json").write_text(json.dumps({"phase": labels.tolist()}))
    out = tmp_path / "fit.nc"
    done = run_cli("fit", MODEL, "--data", str(data_path), "--num-inducing", "8", "--max-iterations", "100",
                   "--init-value", "noise=0.1", "--out", str(out))
    assert done.returncode == (3 if "iteration limit reached" in done.stdout else 0), done.stderr
    assert "final bound" in done.stdout and "iterations" in done.stdout
    png = tmp_path / "latent.png"
    done = run_cli("plot", str(out), "--kind", "latent", "--labels", str(tmp_path / "labels.json"), "-o", str(png))
    assert done.returncode == 0, done.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_fit_refuses_a_classification_model(tmp_path):
    data_path = tmp_path / "data.json"
    data_path.write_text(json.dumps({"N": 3, "D": 1, "X": [[0.1], [0.5], [0.9]], "y": [0, 1, 1]}))
    done = run_cli("fit", "models/gp_classification.gpm", "--data", str(data_path), "--out", str(tmp_path / "f.nc"))
    assert done.returncode == 1
    assert "needs a Bayesian GPLVM" in done.stderr and "Traceback" not in done.stderr
