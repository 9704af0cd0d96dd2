"""Missing outcomes (NaN) of GP regression and latent-GP models: left out of the likelihood exactly, imputed in the
posterior predictive.

* the JAX likelihood with missing entries sums over the observed ones (a complementary split adds up to the
  complete data's; SciPy's Poisson pmf), and the GP regression marginal is the observed rows' exactly;
* ``ml`` on data with missing outcomes finds the same hyperparameters as on the observed rows alone, to the bit,
  and its imputations are the closed-form GP predictive (NumPy) from the observed rows;
* the Laplace and EP approximations with missing sites are those of the observed rows' model;
* the Stan programs with index arrays pass ``stanc``, and their ``log_prob`` agrees with the JAX log density up
  to a constant (slow); ``gibbs`` and ``pm`` (Laplace) each agree with NUTS on a Poisson latent GP with missing counts within four combined
  Monte Carlo standard errors, imputations included (slow);
* bad data gets one clear line: NaN in an input, an outcome with no observed entry, an outcome the model also reads
  elsewhere, a method that does not take missing outcomes.
"""

import json

import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

from gpdsl.api import check_file, check_text, prepare, run
from gpdsl.backends.jax.lowering import lower
from gpdsl.backends.stan.codegen import generate_stan
from gpdsl.backends.stan.stanc import check_program
from gpdsl.data.io import load_data
from gpdsl.data.missing import observed_masks
from gpdsl.errors import DataError
from gpdsl.numerics import GP_JITTER
from gpdsl.results.arviz_compat import groups
from gpdsl.settings import GibbsSettings, NUTSSettings, PseudoMarginalSettings

MISSING = [1, 6, 10]

LIKELIHOODS = """
data {
  int N; matrix[N, 1] X;
  vector[N] y_t; array[N] int<lower=0> y_nb; array[N] int<lower=0> trials; array[N] int<lower=0> y_bin;
  array[N] int<lower=1, upper=4> y_ord; vector<lower=0>[N] y_g; array[N] int<lower=0> y_zinb;
  array[N] int<lower=0> y_hu; array[N] int<lower=0, upper=1> y_b; array[N] int<lower=0> y_p;
}
parameters {
  real<lower=0> ell ~ lognormal(0, 0.5);
  real<lower=0> nu ~ gamma(2, 0.1);
  real<lower=0> sigma ~ half_normal(1);
  real<lower=0> phi ~ gamma(2, 1);
  real c1 ~ normal(0, 2);
  real<lower=0> d2 ~ gamma(2, 2);
  real<lower=0> alpha ~ gamma(2, 1);
  real<lower=0, upper=1> zi ~ uniform(0, 1);
}
model {
  f ~ gp(X, rbf(lengthscale = ell));
  y_t ~ student_t(nu, f, sigma);
  y_nb ~ neg_binomial_2_log(f, phi);
  y_bin ~ binomial_logit(trials, f);
  y_ord ~ ordered_logistic(f, [c1, c1 + d2, c1 + 2 * d2]);
  y_g ~ gamma_log(f, alpha);
  y_zinb ~ zero_inflated_neg_binomial_2_log(f, phi, zi);
  y_hu ~ hurdle_poisson_log(f, zi);
  y_b ~ bernoulli_logit(f);
  y_p ~ poisson_log(1.5 + f);
}
"""
OUTCOMES = ["y_t", "y_nb", "y_bin", "y_ord", "y_g", "y_zinb", "y_hu", "y_b", "y_p"]


def likelihoods_data(rng, N=12):
    trials = rng.integers(1, 15, N)
    return {"N": N, "X": rng.uniform(size=(N, 1)), "y_t": rng.standard_t(3, N), "y_nb": rng.poisson(4.0, N),
            "trials": trials, "y_bin": rng.binomial(trials, 0.3), "y_ord": rng.integers(1, 5, N),
            "y_g": rng.gamma(2.0, 1.0, N), "y_zinb": rng.poisson(2.0, N) * (rng.uniform(size=N) > 0.3),
            "y_hu": rng.poisson(2.0, N), "y_b": rng.integers(0, 2, N), "y_p": rng.poisson(3.0, N)}


def with_missing(data, name, rows):
    values = np.asarray(data[name], dtype=float).copy()
    values[rows] = np.nan
    return {**data, name: values}


def regression_data(seed=3, N=16):
    rng = np.random.default_rng(seed)
    X = np.sort(rng.uniform(-2, 2, N))[:, None]
    return {"X": X, "y": np.sin(1.5 * X[:, 0]) + 0.2 * rng.normal(size=N)}


def matern52(X1, X2, variance, lengthscale):
    r = np.sqrt(((X1[:, None, :] - X2[None, :, :]) ** 2 / lengthscale ** 2).sum(-1))
    s = np.sqrt(5.0) * r
    return variance * (1 + s + s ** 2 / 3) * np.exp(-s)


# ---- the JAX lowering --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("outcome", OUTCOMES)
def test_the_likelihood_sums_over_observed_entries_only(outcome):
    """Missing at MISSING, then at every other row: the two likelihoods add up to the complete data's."""
    model, _ = check_text(LIKELIHOODS)
    data = likelihoods_data(np.random.default_rng(5))
    others = [i for i in range(data["N"]) if i not in MISSING]
    z = np.random.default_rng(6).normal(size=lower(model, data, "centred").dim) * 0.5

    def likelihood(values):
        jax_model = lower(model, values, "centred")
        free, _ = jax_model.constrain_free(jnp.asarray(z))
        return float(jax_model.log_terms(jax_model.environment(free), ("likelihood",), targets={outcome}))

    complete = likelihood(data)
    split = likelihood(with_missing(data, outcome, MISSING)) + likelihood(with_missing(data, outcome, others))
    assert np.isfinite(complete)
    np.testing.assert_allclose(split, complete, rtol=1e-12, atol=1e-10)


def test_a_poisson_likelihood_with_missing_counts_is_scipys_over_the_observed_ones():
    model, _ = check_file("models/gp_poisson.gpm")
    rng = np.random.default_rng(2)
    N = 12
    data = {"N": N, "D": 1, "X": rng.normal(size=(N, 1)), "y": rng.poisson(2.0, N)}
    jax_model = lower(model, with_missing(data, "y", MISSING), "centred")
    f = rng.normal(size=N)
    env = {**jax_model.data, "sigma": 1.0, "lengthscale": np.ones(1), "f": jnp.asarray(f)}
    observed = np.setdiff1d(np.arange(N), MISSING)
    expected = scipy.stats.poisson.logpmf(data["y"][observed], np.exp(f[observed])).sum()
    np.testing.assert_allclose(float(jax_model.log_terms(env, ("likelihood",))), expected, rtol=1e-12)


def test_the_gp_regression_marginal_with_missing_outcomes_is_the_observed_rows_marginal():
    model, _ = check_file("models/gp_regression.gpm")
    data = regression_data()
    observed = np.setdiff1d(np.arange(len(data["y"])), MISSING)
    values, _ = load_data(with_missing(data, "y", MISSING), model, allow_missing=["y"])
    subset, _ = load_data({"X": data["X"][observed], "y": data["y"][observed]}, model)
    missing_model, subset_model = lower(model, values), lower(model, subset)
    for z in np.random.default_rng(1).normal(size=(5, missing_model.dim)):
        assert float(missing_model.log_density(jnp.asarray(z))) == float(subset_model.log_density(jnp.asarray(z)))


@pytest.mark.parametrize("approximation", ["laplace", "ep parallel", "ep sequential"])
def test_laplace_and_ep_with_missing_outcomes_are_those_of_the_observed_rows(approximation):
    """Missing sites add nothing (Laplace: no gradient or curvature; EP: the tilted distribution is the cavity), so
    the approximate marginal and the mean at the observed rows are those of the observed rows' model."""
    from gpdsl.inference.approximations.ep import ep
    from gpdsl.inference.approximations.laplace import laplace

    rng = np.random.default_rng(0)
    N = 12
    x = np.sort(rng.uniform(0, 3, N))
    K = np.exp(-0.5 * (x[:, None] - x[None]) ** 2) + 1e-8 * np.eye(N)
    observed = np.setdiff1d(np.arange(N), MISSING)
    if approximation == "laplace":
        y = rng.poisson(2.0, N).astype(float)
        fit = lambda K, y: laplace(K, y, "poisson_log", tol=1e-12, offset=0.3)  # noqa: E731
    else:
        y = (rng.uniform(size=N) < 0.5).astype(float)
        fit = lambda K, y: ep(K, y, tol=1e-12, schedule=approximation.split()[1])  # noqa: E731
    with_nan, subset = fit(K, with_missing({"y": y}, "y", MISSING)["y"]), fit(K[np.ix_(observed, observed)], y[observed])
    np.testing.assert_allclose(float(with_nan.log_marginal), float(subset.log_marginal), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(with_nan.mean)[observed], np.asarray(subset.mean), atol=1e-12)


# ---- ml: the estimate and the imputations ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ml_fits():
    data = regression_data()
    observed = np.setdiff1d(np.arange(len(data["y"])), MISSING)
    with_nan = run("models/gp_regression.gpm", with_missing(data, "y", MISSING), "ml", seed=1)
    subset = run("models/gp_regression.gpm", {"X": data["X"][observed], "y": data["y"][observed]}, "ml", seed=1)
    return data, observed, with_nan, subset


def test_ml_with_missing_outcomes_finds_the_observed_rows_estimate(ml_fits):
    _, _, with_nan, subset = ml_fits
    for name in ("variance", "lengthscale", "noise"):
        np.testing.assert_array_equal(np.asarray(with_nan.posterior[name]), np.asarray(subset.posterior[name]))


def closed_form_imputation(data, observed, variance, lengthscale, noise):
    """The GP predictive of ``y`` at the MISSING rows from the observed ones (NumPy): mean and variance."""
    X, y = data["X"], data["y"]
    C = matern52(X[observed], X[observed], variance, lengthscale) + (noise ** 2 + GP_JITTER) * np.eye(observed.size)
    K_star = matern52(X[MISSING], X[observed], variance, lengthscale)
    mean = K_star @ np.linalg.solve(C, y[observed])
    return mean, variance - np.einsum("ij,ji->i", K_star, np.linalg.solve(C, K_star.T)) + noise ** 2


def test_the_imputations_are_the_closed_form_gp_predictive_at_fixed_hyperparameters():
    from gpdsl.inference.families.gp_regression import gp_regression
    from gpdsl.inference.predict.draws import gp_regression_imputation_moments

    model, _ = check_file("models/gp_regression.gpm")
    data = regression_data()
    observed = np.setdiff1d(np.arange(len(data["y"])), MISSING)
    values, _ = load_data(with_missing(data, "y", MISSING), model, allow_missing=["y"])
    problem = gp_regression(model, values)
    fixed = {"variance": 0.8, "lengthscale": np.array([0.7]), "noise": 0.3}
    mean, variance = gp_regression_imputation_moments(problem, problem.unconstrain_theta(fixed))
    expected_mean, expected_variance = closed_form_imputation(data, observed, 0.8, np.array([0.7]), 0.3)
    np.testing.assert_allclose(np.asarray(mean)[MISSING], expected_mean, rtol=1e-10)
    np.testing.assert_allclose(np.asarray(variance)[MISSING], expected_variance, rtol=1e-10)
    np.testing.assert_allclose(np.asarray(mean)[observed] - data["y"][observed], 0, atol=0.5)


def test_ml_imputes_the_closed_form_gp_predictive_from_the_observed_rows(ml_fits):
    data, observed, with_nan, _ = ml_fits
    variance, lengthscale, noise = (np.asarray(with_nan.posterior[n])[0, 0] for n in ("variance", "lengthscale",
                                                                                        "noise"))
    mean, var = closed_form_imputation(data, observed, variance, lengthscale, noise)
    predictive = groups(with_nan)["posterior_predictive"]
    np.testing.assert_allclose(np.asarray(predictive["y_mean"])[0, 0, MISSING], mean, rtol=1e-9)
    np.testing.assert_allclose(np.asarray(predictive["y_variance"])[0, 0, MISSING], var, rtol=1e-9)
    assert np.isfinite(np.asarray(predictive["y"])).all()
    assert np.isnan(np.asarray(groups(with_nan)["observed_data"]["y"])[MISSING]).all()


@pytest.mark.slow
def test_sgpr_with_missing_outcomes_fits_the_observed_rows_and_imputes_the_others():
    from gpdsl.settings import SGPRSettings

    data = regression_data()
    observed = np.setdiff1d(np.arange(len(data["y"])), MISSING)
    settings = SGPRSettings(num_inducing=6)
    with_nan = run("models/gp_regression.gpm", with_missing(data, "y", MISSING), "sgpr", settings, seed=2)
    subset = run("models/gp_regression.gpm", {"X": data["X"][observed], "y": data["y"][observed]}, "sgpr", settings,
                 seed=2)
    for name in ("variance", "lengthscale", "noise", "inducing_inputs"):
        np.testing.assert_array_equal(np.asarray(with_nan.posterior[name]), np.asarray(subset.posterior[name]))
    variance, lengthscale, noise, Z = (np.asarray(with_nan.posterior[n])[0, 0] for n in (
        "variance", "lengthscale", "noise", "inducing_inputs"))
    X, y = data["X"], data["y"]
    K_uf = matern52(Z, X[observed], variance, lengthscale)
    Sigma = matern52(Z, Z, variance, lengthscale) + K_uf @ K_uf.T / noise ** 2
    expected = matern52(X, Z, variance, lengthscale) @ np.linalg.solve(Sigma, K_uf @ y[observed]) / noise ** 2
    mean = np.asarray(groups(with_nan)["posterior_predictive"]["y_mean"])[0, 0]
    np.testing.assert_allclose(mean, expected, rtol=1e-5, atol=1e-8)  # Titsias's predictive mean


# ---- Stan -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("model_file", ["models/gp_regression.gpm", "models/gp_poisson.gpm",
                                        "models/gp_classification.gpm", LIKELIHOODS])
def test_stanc_accepts_the_programs_with_index_arrays(model_file):
    model, _ = check_text(model_file) if "\n" in model_file else check_file(model_file)
    outcomes = [s.target.name for s in model.likelihoods()]
    program = generate_stan(model, missing=outcomes)
    check_program(program.code, model.name)
    for name in outcomes:
        count, indices = program.observed_indices[name]
        assert f"array[{count}] int<lower=1, upper=N> {indices};" in program.code
        assert f"vector[{count}] {program.log_likelihood[name]};" in program.code


def test_the_stan_data_hold_the_observed_indices_and_a_placeholder():
    model, _ = check_text(LIKELIHOODS)
    data = with_missing(with_missing(likelihoods_data(np.random.default_rng(1)), "y_ord", MISSING), "y_g", [0])
    program = generate_stan(model, missing=tuple(observed_masks(model, data)))
    stan = program.stan_data(model, data)
    count, indices = program.observed_indices["y_ord"]
    assert stan[count] == 12 - len(MISSING)
    assert stan[indices] == [i + 1 for i in range(12) if i not in MISSING]
    assert [stan["y_ord"][i] for i in MISSING] == [1, 1, 1] and stan["y_g"][0] == 1.0
    assert set(program.observed_indices) == {"y_ord", "y_g"}
    with pytest.raises(DataError, match="data 'y_ord' has missing values"):
        generate_stan(model).stan_data(model, data)


@pytest.mark.slow
def test_log_density_with_missing_outcomes_agrees_with_stan_up_to_a_constant():
    from tests.backends.test_jax_vs_stan import INDEXING, assert_agrees_with_stan, indexing_data

    rng = np.random.default_rng(11)
    model, _ = check_text(LIKELIHOODS)
    data = likelihoods_data(rng)
    for outcome in OUTCOMES:
        data = with_missing(data, outcome, MISSING)
    assert_agrees_with_stan(model, data, np.full((10, 1), 0.7), rng)
    model, _ = check_file("models/gp_regression.gpm")
    assert_agrees_with_stan(model, {"N": 12, "D": 2, "X": rng.normal(size=(12, 2)),
                                    "y": with_missing({"y": rng.normal(size=12)}, "y", MISSING)["y"]},
                            np.full((10, 1), 0.5), rng)
    model, _ = check_text(INDEXING)  # an integrated-out GP with a mean and an offset
    assert_agrees_with_stan(model, with_missing(indexing_data(rng), "v", MISSING), np.full((10, 1), 0.7), rng)


@pytest.mark.slow
def test_nuts_imputes_gp_regression_outcomes_from_the_exact_conditional():
    """NUTS's replicates at the missing rows (Stan's ``normal_gp_impute_rng``) have the mean of the exact predictive
    mean averaged over its hyperparameter draws (JAX), within four Monte Carlo standard errors."""
    import arviz as az
    import xarray as xr

    from gpdsl.inference.draw_map import over_draws
    from gpdsl.inference.families.gp_regression import gp_regression
    from gpdsl.inference.predict.draws import gp_regression_imputation_moments, unconstrained_draws

    model, _ = check_file("models/gp_regression.gpm")
    data = with_missing(regression_data(), "y", MISSING)
    nuts = run(model, data, "nuts", NUTSSettings(chains=4, warmup=500, draws=1000), seed=3)
    parts = groups(nuts)
    assert parts["log_likelihood"]["y"].sizes["N_observed"] == len(data["y"]) - len(MISSING)
    values, _ = load_data(data, model, allow_missing=["y"])
    problem = gp_regression(model, values)
    posterior = {name: np.asarray(parts["posterior"][name]) for name in problem.theta_names}
    theta = unconstrained_draws(problem, posterior)
    means = over_draws(lambda t: gp_regression_imputation_moments(problem, t)[0], theta)[..., MISSING]
    replicates = np.asarray(parts["posterior_predictive"]["y"])[..., MISSING]
    draws = xr.Dataset({"replicate": (("chain", "draw", "m"), replicates), "mean": (("chain", "draw", "m"), means)})
    error = az.mcse(draws)
    for k in range(len(MISSING)):
        bound = 4 * np.hypot(float(error["replicate"][k]), float(error["mean"][k]))
        assert abs(replicates[..., k].mean() - means[..., k].mean()) < bound, (k, replicates[..., k].mean(),
                                                                                means[..., k].mean(), bound)


def poisson_data(seed=4, N=20):
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(0, 4, N))
    y = rng.poisson(np.exp(np.sin(1.5 * x) + 0.5)).astype(float)
    y[[3, 9, 15]] = np.nan
    return {"N": N, "D": 1, "X": x[:, None], "y": y}


@pytest.fixture(scope="module")
def nuts_on_missing_counts():
    return run("models/gp_poisson.gpm", poisson_data(), "nuts", NUTSSettings(chains=4, warmup=1000, draws=1000), seed=6)


@pytest.mark.slow
@pytest.mark.parametrize("method, settings", [
    ("gibbs", GibbsSettings(chains=4, warmup=1000, draws=4000)),
    ("pm", PseudoMarginalSettings(chains=4, warmup=1000, draws=4000, approximation="laplace", sample_latent=True)),
])
def test_an_engine_and_nuts_agree_on_a_poisson_latent_gp_with_missing_counts(method, settings, nuts_on_missing_counts):
    from tests.inference.methods.test_pm_vs_nuts import disagreements

    ours, nuts = run("models/gp_poisson.gpm", poisson_data(), method, settings, seed=5), nuts_on_missing_counts
    for results in (ours, nuts):
        assert groups(results)["log_likelihood"]["y"].sizes["N_observed"] == 17
        assert groups(results)["posterior_predictive"]["y"].sizes["N"] == 20

    def imputed(results):
        parts = groups(results)
        return parts["posterior_predictive"]["y"].isel(N=[3, 9, 15]).to_dataset(name="y_missing").assign(
            f_missing=parts["posterior"]["f"].isel(N=[3, 9, 15]))

    failures = disagreements(ours, nuts, ["sigma", "lengthscale"])
    failures += disagreements(imputed(ours), imputed(nuts), ["y_missing", "f_missing"])
    assert not failures, f"posterior means differ by more than 4 combined MCSEs for {failures}"


# ---- data --------------------------------------------------------------------------------------------------------
def test_nan_in_an_input_is_still_refused_naming_the_entry():
    data = regression_data()
    data["X"][4, 0] = np.nan
    with pytest.raises(DataError, match=r"data 'X' contains NaN at X\[5, 1\]"):
        prepare("models/gp_regression.gpm", with_missing(data, "y", MISSING), "ml")


def test_an_outcome_with_no_observed_entry_is_refused():
    data = regression_data()
    with pytest.raises(DataError, match="data 'y' holds no observed value: every entry is NaN"):
        prepare("models/gp_regression.gpm", with_missing(data, "y", slice(None)), "ml")
    counts = poisson_data()
    with pytest.raises(DataError, match="data 'y' holds no observed value: every entry is NaN"):
        prepare("models/gp_poisson.gpm", with_missing(counts, "y", slice(None)), "gibbs")


def test_an_outcome_read_elsewhere_cannot_be_missing():
    model = """
data { int N; matrix[N, 1] X; vector[N] y; vector[N] z; }
parameters { real<lower=0> s ~ half_normal(1); }
model {
  f ~ gp(X, rbf());
  y ~ normal(f, s);
  z ~ normal(y, s);
}
"""
    data = {"X": np.linspace(0, 1, 6)[:, None], "y": [0.1, np.nan, 0.3, 0.2, 0.0, 0.5], "z": np.zeros(6)}
    with pytest.raises(DataError) as info:
        prepare(model, data, "nuts")
    assert "data 'y' has missing entries (NaN at y[2]), but the model reads 'y' here" in info.value.message
    assert info.value.span is not None and info.value.span.line == 7


def test_a_method_that_does_not_take_missing_outcomes_refuses_them():
    Y = np.random.default_rng(0).normal(size=(8, 3))
    Y[2, 1] = np.nan
    with pytest.raises(DataError, match=r"data 'Y' contains NaN at Y\[3, 2\]"):
        prepare("models/bayesian_gplvm_priors.gpm", {"Q": 2, "Y": Y}, "pm-gplvm")


def test_json_null_and_csv_na_mark_a_missing_integer_outcome(tmp_path):
    model, _ = check_file("models/gp_poisson.gpm")
    (tmp_path / "counts.json").write_text(json.dumps({"X": [[0.0], [0.5], [1.0]], "y": [2, None, 0]}))
    (tmp_path / "counts.csv").write_text("X.1,y\n0.0,2\n0.5,NA\n1.0,0\n")
    for name in ("counts.json", "counts.csv"):
        values, _ = load_data(tmp_path / name, model, allow_missing=["y"])
        np.testing.assert_array_equal(values["y"], [2.0, np.nan, 0.0])
        with pytest.raises(DataError, match=r"data 'y' contains NaN at y\[2\]"):
            load_data(tmp_path / name, model)


def test_a_missing_integer_outcome_keeps_its_checks_on_the_observed_entries():
    model, _ = check_file("models/gp_classification.gpm")
    data = {"X": np.zeros((4, 1)), "y": [1, np.nan, 2, 0]}
    with pytest.raises(DataError, match=r"y must be 0 or 1 .*found values \{0, 1, 2\}"):
        load_data(data, model, allow_missing=["y"])
    model, _ = check_file("models/gp_poisson.gpm")
    with pytest.raises(DataError, match=r"data 'y' must hold integers .*y\[3\] = 2.5"):
        load_data({"X": np.zeros((4, 1)), "y": [1, np.nan, 2.5, 0]}, model, allow_missing=["y"])
