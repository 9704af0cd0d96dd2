"""vem on a Bayesian GPLVM whose kernel is an HSGP over the latent inputs (``models/gplvm_hsgp.gpm``): the box from the
prior, the model's JAX log density and the fit's bound against the exact marginal of the feature GP, the other
engines' refusals, and the fit on an oil-flow subset against the exact-kernel vem."""

import os
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import multivariate_normal, norm

from gpdsl.api import check_file, load_model, run
from gpdsl.backends.jax.lowering import lower
from gpdsl.inference.families.gplvm import gplvm_problem
from gpdsl.inference.predict.gplvm import predict_latent_function
from gpdsl.inference.variational.latent_q import GaussianQParams
from gpdsl.inference.variational.vem import VEMSettings, fit_vem, gplvm_bound
from gpdsl.kernels.hsgp_features import HSGPFeatureKernel
from gpdsl.numerics import GP_JITTER
from gpdsl.registry import get_method
from gpdsl.settings import NUTSSettings
from tests.stan_available import needs_pystan

MODEL = "models/gplvm_hsgp.gpm"
EXACT_MODEL = "models/bayesian_gplvm.gpm"


def synthetic(N=30, D=5, seed=0):
    rng = np.random.default_rng(seed)
    t = rng.uniform(-2, 2, size=N)
    W = rng.normal(size=(2, D))
    Y = np.tanh(np.column_stack([np.sin(t), np.cos(t)]) @ W) + 0.05 * rng.normal(size=(N, D))
    return {"N": N, "D": D, "Y": Y}


@pytest.fixture(scope="module")
def model():
    return check_file(MODEL)[0]


def feature_gp_log_marginal(kernel, X, Y, noise):
    K = np.asarray(kernel(X)) + noise * np.eye(len(X))
    return sum(multivariate_normal(np.zeros(len(X)), K).logpdf(y) for y in Y.T)


def test_the_box_comes_from_the_latent_prior():
    text = open(MODEL).read().replace("X ~ normal(0, 1)", "X ~ normal(1, 2)").replace("c = 1.5", "c = 2").replace(
        "m = 12", "m = [12, 8]")
    jax_model = lower(load_model(text), synthetic())
    values = {"s2": jnp.asarray(1.0), "ell": jnp.ones(2)}
    kernel = jax_model.gp_kernel(jax_model.gp_nodes[0].statement, {**jax_model.data, **values})
    assert isinstance(kernel, HSGPFeatureKernel)
    # centre mu = 1, half-width c * 3 * sigma = 2 * 3 * 2
    assert kernel.centre == (1.0, 1.0) and kernel.half_widths == (12.0, 12.0) and kernel.m == (12, 8)


def test_the_bound_with_point_masses_is_the_exact_marginal_of_the_feature_gp(model):
    data = synthetic()
    problem = gplvm_problem(model, data)
    theta = problem.unconstrain_theta({"s2": 1.4, "ell": np.array([0.9, 1.3]), "noise": 0.05})
    X = np.random.default_rng(1).normal(size=(data["N"], 2))
    moments = problem.latent_q().moments
    bound = gplvm_bound(problem, VEMSettings(), moments, lambda *_: 0.0, hyperprior=False)
    value = jax.jit(bound)(GaussianQParams(jnp.asarray(X), jnp.full(X.shape, -80.0)), jnp.zeros((0, 2)), theta)
    exact = feature_gp_log_marginal(problem.kernel(theta), X, data["Y"], 0.05)
    assert float(value) == pytest.approx(exact, abs=1e-8)


def test_the_jax_log_density_integrates_f_out_under_the_feature_kernel(model):
    data = synthetic()
    jax_model = lower(model, data)
    X = np.random.default_rng(2).normal(size=(data["N"], 2))
    free = {"s2": jnp.asarray(1.4), "ell": jnp.array([0.9, 1.3]), "noise": jnp.asarray(0.05), "X": jnp.asarray(X)}
    assert {b.name for b in jax_model.blocks} == set(free)
    kernel = jax_model.gp_kernel(jax_model.gp_nodes[0].statement, {**jax_model.data, **free})
    # the lowering adds GP_JITTER to every GP covariance
    exact = feature_gp_log_marginal(kernel, X, data["Y"], 0.05 + GP_JITTER) + norm.logpdf(X).sum()
    assert float(jax_model.log_joint(free)) == pytest.approx(exact, rel=1e-10)


def with_priors():
    return load_model(open(MODEL).read().replace(
        "real<lower=0> s2;", "real<lower=0> s2 ~ lognormal(0, 1);").replace(
        "vector<lower=0>[2] ell;", "vector<lower=0>[2] ell ~ inv_gamma(5, 5);").replace(
        "real<lower=0> noise;", "real<lower=0> noise ~ inv_gamma(2, 0.1);"))


def test_the_other_gplvm_engines_refuse_it_with_what_runs_it(model):
    for name in ("svi-gplvm", "pm-gplvm"):
        assert "vem fits it and nuts samples it" in get_method(name).refusal(with_priors())


@pytest.mark.slow
@needs_pystan
def test_nuts_samples_it_through_the_woodbury_marginal():
    data = synthetic()
    result = run(with_priors(), data, "nuts", NUTSSettings(chains=2, warmup=150, draws=100), seed=4)
    assert result.posterior["X"].shape == (2, 100, data["N"], 2) and "F" not in result.posterior
    log_lik = result.log_likelihood["Y"].values
    assert log_lik.shape == (2, 100, data["N"], data["D"]) and np.isfinite(log_lik).all()
    assert int(result.sample_stats["diverging"].sum()) <= 5
    noise = result.posterior["noise"].values
    assert 0.05 ** 2 / 3 < np.median(noise) < 0.05 ** 2 * 3  # synthetic() adds noise of sd 0.05


@pytest.fixture(scope="module")
def fitted(model):
    data = synthetic()
    results, fit = run(model, data, "vem", VEMSettings(max_iterations=40), seed=0, keep_state=True)
    return data, results, fit


def test_a_fit_has_no_inducing_inputs(fitted):
    _, results, fit = fitted
    assert np.asarray(fit.params.inducing).shape == (0, 2)
    assert results.posterior["inducing_inputs"].shape == (1, 1, 0, 2)
    assert np.isfinite(fit.bound) and fit.bound > fit.trace[0]


@pytest.mark.slow
def test_predictions_of_hidden_columns_from_new_rows(model):
    data = synthetic()
    Y_new = data["Y"][:3].copy()
    Y_new[:, 3:] = np.nan
    results = run(model, data, "vem", VEMSettings(max_iterations=200), seed=0, new_inputs={"Y": Y_new})
    mean = np.asarray(results.predictions["Y_new"])[0, 0]
    sd = np.sqrt(np.asarray(results.predictions["Y_new_variance"])[0, 0])
    # the rows are training rows: their hidden columns are recovered within a few predictive standard deviations
    assert np.all(np.abs(mean[:, 3:] - data["Y"][:3, 3:]) < 5 * sd[:, 3:])


@pytest.mark.slow
def test_predictions_at_point_masses_are_the_feature_gp_posterior(fitted):
    data, _, fit = fitted
    X = fit.mean
    fit.params = fit.params._replace(latent=GaussianQParams(jnp.asarray(X), jnp.full(X.shape, -80.0)))
    X_new = np.random.default_rng(3).normal(size=(4, 2))
    mean, variance = predict_latent_function(fit, X_new)
    theta = fit.params.theta
    kernel, noise = fit.problem.kernel(theta), float(fit.problem.noise_variance(theta))
    K = np.asarray(kernel(X)) + noise * np.eye(len(X))
    cross = np.asarray(kernel(X_new, X))
    np.testing.assert_allclose(mean, cross @ np.linalg.solve(K, data["Y"]), rtol=1e-7, atol=1e-9)
    exact_variance = np.asarray(kernel.diag(X_new)) - np.sum(cross * np.linalg.solve(K, cross.T).T, axis=1)
    np.testing.assert_allclose(variance, np.broadcast_to(exact_variance[:, None], variance.shape), rtol=1e-6,
                               atol=1e-9)


MIRROR = Path(os.environ.get("GPDSL_DATA_MIRROR", Path(__file__).resolve().parents[4] / "shared" / "data"))


def oil_subset(N):
    """The first N rows of GPy's oil_100 permutation of the oil-flow training outputs, centred, and their labels."""
    if not (MIRROR / "oil_flow").is_dir():
        pytest.skip(f"the data mirror {MIRROR} is absent")
    from gpdsl.datasets import oil_flow

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GPDSL_DATA_MIRROR", str(MIRROR))
        dataset = oil_flow("train")
    rows = np.random.RandomState(10000).permutation(len(dataset.X))[:N]
    Y = dataset.X[rows]
    return Y - Y.mean(axis=0), dataset.y[rows]


def nearest_neighbour_errors(points, labels):
    """Points whose nearest other point has another label (Damianou et al. 2016, Sec. 5.2)."""
    d2 = ((points[:, None, :] - points[None, :, :]) ** 2).sum(axis=-1)
    np.fill_diagonal(d2, np.inf)
    return int(np.sum(labels[np.argmin(d2, axis=1)] != labels))


@pytest.mark.slow
def test_on_an_oil_flow_subset_the_hsgp_kernel_fits_as_well_as_the_exact_one():
    Y, labels = oil_subset(100)
    exact_model = load_model(open(EXACT_MODEL).read())
    exact = [fit_vem(gplvm_problem(exact_model, {"N": 100, "D": 12, "Q": 2, "Y": Y}),
                     VEMSettings(num_inducing=20, seed=seed)) for seed in range(3)]
    hsgp = fit_vem(gplvm_problem(load_model(open(MODEL).read()), {"N": 100, "D": 12, "Y": Y}), VEMSettings(seed=0))
    bounds = [fit.bound for fit in exact]
    # the exact kernel's bound moves with the seed (its inducing inputs): 203.1, 170.4 and 147.2; the HSGP kernel's
    # (12 x 12 basis functions, no inducing inputs): 178.2. Tolerance: the spread of the exact kernel's own bounds.
    assert abs(hsgp.bound - max(bounds)) <= max(bounds) - min(bounds)
    # nearest-neighbour errors among the 100 latent means: exact 4, 4, 4; HSGP 1
    assert nearest_neighbour_errors(hsgp.mean, labels) <= min(nearest_neighbour_errors(f.mean, labels) for f in exact)
