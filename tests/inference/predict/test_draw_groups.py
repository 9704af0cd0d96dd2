"""Pointwise log-likelihood, posterior predictive and predictions of the samplers (issue 13, items 1 and 3).

Unit tests check each quantity against an independent computation (brute-force leave-one-out, the
likelihood's own sum, the exact GP predictive written out in NumPy); run tests check that results files of
gibbs, pm and NUTS on GP classification, GP regression and a Poisson latent GP pass ``az.loo``,
``az.compare`` and ``az.plot_ppc``. NUTS tests need PyStan or CmdStan and are slow (a build per program).
"""

import importlib.util
import shutil

import arviz as az
import jax
import jax.numpy as jnp
import matplotlib
import numpy as np
import pytest
from scipy import stats

from gpdsl.api import check_file, run
from gpdsl.backends.jax.lowering import lower
from gpdsl.backends.jax.simulate import simulate
from gpdsl.errors import MethodError
from gpdsl.inference.families.gp_regression import gp_regression
from gpdsl.inference.families.latent_gp import latent_gp
from gpdsl.settings import GibbsSettings
from gpdsl.settings import PseudoMarginalSettings
from gpdsl.inference.predict.draws import (gp_regression_log_likelihood, gp_regression_new_draws,
                                           latent_log_likelihood, latent_new_draws, unconstrained_draws)
from gpdsl.inference.predict.gp_regression import exact_posterior, posterior_replicate
from gpdsl.registry import get_method
from gpdsl.results.arviz_compat import ARVIZ_MAJOR, groups, loo, mcse
from gpdsl.results.io import read_netcdf, write_netcdf

matplotlib.use("Agg")

MODELS = {"classification": "models/gp_classification.gpm", "regression": "models/gp_regression.gpm",
          "poisson": "models/gp_poisson.gpm"}
X_NEW = np.linspace(-0.2, 1.2, 7)[:, None]

needs_stan = pytest.mark.skipif(
    importlib.util.find_spec("stan") is None and shutil.which("stanc") is None
    and importlib.util.find_spec("cmdstanpy") is None, reason="needs PyStan or CmdStan")


def simulated(family: str, n: int = 20, seed: int = 0):
    """A model of ``family`` and data simulated from it (hyperparameters from their priors); classification labels
    are redrawn until each class has at least a third of the points."""
    model, _ = check_file(MODELS[family])
    X = np.random.default_rng(seed).uniform(size=(n, 1))
    blank = np.zeros(n) if family == "regression" else np.zeros(n, int)
    jax_model = lower(model, {"N": n, "D": 1, "X": X, "y": blank})
    for key in jax.random.split(jax.random.PRNGKey(seed), 100):
        y = np.asarray(simulate(jax_model, key)[1]["y"])
        if family != "classification" or min(y.sum(), n - y.sum()) >= n // 3:
            return model, {"N": n, "D": 1, "X": X, "y": y}
    raise RuntimeError("no balanced draw in 100 tries")


def exact_gp_regression(theta: dict, X, y, X_new):
    """The exact GP predictive of the Matérn-5/2 model of ``models/gp_regression.gpm``, in NumPy."""
    def matern52(A, B):
        r = np.sqrt(5.0) * np.abs(A[:, None, 0] - B[None, :, 0]) / theta["lengthscale"][0]
        return theta["variance"] * (1 + r + r ** 2 / 3) * np.exp(-r)

    noise = theta["noise"] ** 2
    C = matern52(X, X) + (noise + 1e-8) * np.eye(len(X))
    K_star = matern52(X, X_new)
    mean = K_star.T @ np.linalg.solve(C, y)
    f_variance = theta["variance"] - np.sum(K_star * np.linalg.solve(C, K_star), axis=0)
    return mean, f_variance, f_variance + noise


# ---- the quantities, one draw at a time -----------------------------------------------------------
def test_gp_regression_loo_densities_are_the_brute_force_conditionals():
    model, data = simulated("regression", n=8)
    problem = gp_regression(model, data)
    theta = np.asarray(jax.random.normal(jax.random.PRNGKey(2), (3, 2, 3)))
    loo = gp_regression_log_likelihood(problem, theta)
    chain, draw = 2, 1
    C = np.array(problem.kernel(theta[chain, draw])(problem.inputs(theta[chain, draw])))
    C += (float(problem.noise_variance(theta[chain, draw])) + 1e-8) * np.eye(8)
    y = data["y"]
    for i in range(8):
        rest = np.delete(np.arange(8), i)
        weights = np.linalg.solve(C[np.ix_(rest, rest)], C[rest, i])
        mean, var = weights @ y[rest], C[i, i] - weights @ C[rest, i]
        assert loo[chain, draw, i] == pytest.approx(stats.norm.logpdf(y[i], mean, np.sqrt(var)), rel=1e-8)


def test_gp_regression_replicates_have_the_exact_conditional_moments():
    """Mean y - s^2 alpha and covariance K - K C^-1 K + s^2 I, within Monte Carlo error of 40000 draws."""
    rng = np.random.default_rng(1)
    X, y = rng.uniform(size=(4, 1)), rng.normal(size=4)
    K = np.exp(-0.5 * (X - X.T) ** 2 / 0.3 ** 2)
    s2 = 0.2
    posterior = exact_posterior(lambda A: jnp.asarray(K), X, jnp.asarray(y), s2)
    draws = np.asarray(jax.vmap(lambda k: posterior_replicate(posterior, y, k))(
        jax.random.split(jax.random.PRNGKey(0), 40000)))
    C = K + (s2 + 1e-8) * np.eye(4)
    K_f = K + 1e-8 * np.eye(4)
    mean = K_f @ np.linalg.solve(C, y)
    covariance = K_f - K_f @ np.linalg.solve(C, K_f) + s2 * np.eye(4)
    se_mean = np.sqrt(np.diag(covariance) / len(draws))
    assert np.all(np.abs(draws.mean(0) - mean) < 4 * se_mean)
    se_cov = np.sqrt((np.outer(np.diag(covariance), np.diag(covariance)) + covariance ** 2) / len(draws))
    assert np.all(np.abs(np.cov(draws.T) - covariance) < 4 * se_cov)


@pytest.mark.parametrize("family", ["classification", "poisson"])
def test_latent_log_likelihood_sums_to_the_models_likelihood(family):
    model, data = simulated(family, n=10)
    problem = latent_gp(model, data)
    key_theta, key_f = jax.random.split(jax.random.PRNGKey(3))
    theta = np.asarray(jax.random.normal(key_theta, (2, 3, problem.theta_dim)))
    f = np.asarray(jax.random.normal(key_f, (2, 3, 10)))
    pointwise = latent_log_likelihood(problem, theta, f)
    assert pointwise.shape == (2, 3, 10)
    for c in range(2):
        for d in range(3):
            assert pointwise[c, d].sum() == pytest.approx(float(problem.log_likelihood(f[c, d], theta[c, d])),
                                                          rel=1e-10)


def test_latent_predictions_from_f_follow_the_gp_conditional():
    """At a training input the conditional of f* given f is f itself (up to the jitter): f_new equals f there, and
    the Poisson draws y_new have the mean exp(f) (within Monte Carlo error). f is a draw from the GP prior."""
    model, data = simulated("poisson", n=10)
    problem = latent_gp(model, data)
    theta = np.zeros((1, 4000, problem.theta_dim))
    prior_draw = np.linalg.cholesky(np.asarray(problem.covariance(theta[0, 0]))) @ np.linspace(-1, 1, 10)
    f = np.broadcast_to(prior_draw, (1, 4000, 10))
    values = latent_new_draws(problem, theta, f, data["X"][[2, 7]], jax.random.PRNGKey(0))
    np.testing.assert_allclose(values["f_new"][0, 0], f[0, 0, [2, 7]], atol=1e-3)
    rate = np.exp(f[0, 0, [2, 7]])
    assert np.all(np.abs(values["y_new"][0].mean(0) - rate) < 4 * np.sqrt(rate / 4000))


def test_gp_regression_predictions_are_the_exact_predictive_at_each_draw():
    model, data = simulated("regression", n=12)
    problem = gp_regression(model, data)
    theta = np.asarray(0.3 * jax.random.normal(jax.random.PRNGKey(5), (2, 2, 3)))
    values = gp_regression_new_draws(problem, theta, X_NEW, jax.random.PRNGKey(1))
    for c in range(2):
        for d in range(2):
            named = {k: np.atleast_1d(np.asarray(v)) for k, v in problem.constrain(theta[c, d])[0].items()}
            mean, f_variance, y_variance = exact_gp_regression({**named, "variance": named["variance"][0],
                                                                 "noise": named["noise"][0]},
                                                                data["X"], data["y"], X_NEW)
            np.testing.assert_allclose(values["y_mean"][c, d], mean, rtol=1e-6, atol=1e-9)
            np.testing.assert_allclose(values["f_variance"][c, d], f_variance, rtol=1e-6, atol=1e-9)
            np.testing.assert_allclose(values["y_variance"][c, d], y_variance, rtol=1e-6, atol=1e-9)


def test_named_draws_round_trip_to_the_unconstrained_hyperparameters():
    model, data = simulated("regression", n=6)
    problem = gp_regression(model, data)
    theta = np.asarray(jax.random.normal(jax.random.PRNGKey(0), (2, 3, 3)))
    named = {k: np.asarray(v) for k, v in jax.vmap(jax.vmap(lambda t: problem.constrain(t)[0]))(theta).items()}
    np.testing.assert_allclose(unconstrained_draws(problem, named), theta, rtol=1e-10, atol=1e-12)


# ---- refusals -------------------------------------------------------------------------------------
def test_nuts_predicts_for_latent_gp_and_gp_regression_and_refuses_other_models():
    nuts = get_method("nuts")
    for family in MODELS:
        assert nuts.prediction_refusal(check_file(MODELS[family])[0]) is None
    gplvm, _ = check_file("models/bayesian_gplvm.gpm")
    assert "nuts predicts at new inputs for a latent GP" in nuts.prediction_refusal(gplvm)


def test_predict_is_refused_before_anything_runs(tmp_path):
    """NUTS on a GPLVM with new inputs: refused with the reason, no program built, no file written."""
    model, _ = check_file("models/bayesian_gplvm_priors.gpm")
    data = {"N": 4, "D": 2, "Q": 1, "Y": np.zeros((4, 2))}
    with pytest.raises(MethodError, match="nuts predicts at new inputs for .* this model is a Bayesian GPLVM"):
        run(model, data, "nuts", seed=0, new_inputs=np.zeros((2, 1)), out=tmp_path / "fit.nc")
    assert not (tmp_path / "fit.nc").exists()


# ---- results files through ArviZ ------------------------------------------------------------------
def passes_arviz(results, other, tmp_path, name):
    """Write and read back the results; az.loo (pointwise), az.compare (against ``other``) and the posterior
    predictive plot (az.plot_ppc; az.plot_ppc_dist under ArviZ 1.x) work on them."""
    write_netcdf(results, tmp_path / f"{name}.nc")
    back = read_netcdf(tmp_path / f"{name}.nc")
    psis = az.loo(back, pointwise=True)
    elpd, pointwise = (psis.elpd_loo, psis.loo_i) if ARVIZ_MAJOR == 0 else (psis.elpd, psis.elpd_i)
    assert np.isfinite(elpd) and pointwise.shape == (groups(back)["observed_data"]["y"].size,)
    table = az.compare({name: back, "other": other})
    assert set(table.index) == {name, "other"}
    if ARVIZ_MAJOR == 0:
        assert np.size(az.plot_ppc(back, num_pp_samples=20)) >= 1
    else:
        drawn = az.plot_ppc_dist(back, num_samples=20).viz
        assert all("y" in drawn[part].data_vars for part in ("predictive_dist", "observed_dist"))
    matplotlib.pyplot.close("all")
    return psis


def check_latent_pointwise(results, family):
    """The stored log-likelihood is the likelihood of the stored f draws (independent NumPy formulas)."""
    tree = groups(results)
    f = tree["posterior"]["f"].values
    y = tree["observed_data"]["y"].values
    expected = stats.norm.logcdf((2 * y - 1) * f) if family == "classification" else stats.poisson.logpmf(y, np.exp(f))
    np.testing.assert_allclose(tree["log_likelihood"]["y"].values, expected, rtol=1e-8, atol=1e-10)
    replicates = tree["posterior_predictive"]["y"].values
    assert replicates.shape == f.shape and np.all(replicates >= 0)


def short_run(family, method, seed=1, **extra):
    model, data = simulated(family)
    settings = {"gibbs": GibbsSettings, "pm": PseudoMarginalSettings}[method]
    if method == "pm":
        extra = {"sample_latent": True, "approximation": "laplace" if family == "poisson" else "ep", **extra}
    return run(model, data, method, settings(chains=2, warmup=100, draws=150, **extra), seed=seed,
               new_inputs=X_NEW)


def test_gibbs_classification_file_passes_loo_compare_and_ppc(tmp_path):
    results = short_run("classification", "gibbs")
    check_latent_pointwise(results, "classification")
    passes_arviz(results, short_run("classification", "gibbs", seed=2), tmp_path, "gibbs")
    assert groups(results)["predictions"]["y_prob"].shape == (2, 150, len(X_NEW))


@pytest.mark.slow
@pytest.mark.parametrize("family", ["regression", "poisson"])
def test_gibbs_files_pass_loo_compare_and_ppc(family, tmp_path):
    results = short_run(family, "gibbs")
    if family == "poisson":
        check_latent_pointwise(results, family)
    passes_arviz(results, short_run(family, "gibbs", seed=2), tmp_path, "gibbs")


@pytest.mark.slow
@pytest.mark.parametrize("family", ["classification", "poisson"])
def test_pm_files_pass_loo_compare_and_ppc(family, tmp_path):
    """pm needs a latent GP with a likelihood an approximation supports, so GP regression (f integrated out,
    no latent-GP family) is not among its models; with ``sample_latent`` it records f and the pointwise groups."""
    results = short_run(family, "pm")
    check_latent_pointwise(results, family)
    passes_arviz(results, short_run(family, "gibbs"), tmp_path, "pm")


@pytest.mark.slow
def test_pm_without_f_draws_writes_predictions_but_no_pointwise_groups():
    """Without ``sample_latent`` there are no f draws, so no log_likelihood or posterior_predictive; the predictions
    come from the approximation at each theta draw."""
    model, data = simulated("classification")
    results = run(model, data, "pm", PseudoMarginalSettings(chains=1, warmup=20, draws=30), seed=0,
                  new_inputs=X_NEW)
    tree = groups(results)
    assert "log_likelihood" not in tree and "posterior_predictive" not in tree
    assert tree["predictions"]["f_new"].shape == (1, 30, len(X_NEW))


@pytest.mark.slow
@needs_stan
@pytest.mark.parametrize("family", sorted(MODELS))
def test_nuts_files_pass_loo_compare_and_ppc(family, tmp_path):
    """NUTS's generated quantities: the log-likelihood of its f draws (latent GPs) or the exact LOO densities of
    its hyperparameter draws (GP regression, recomputed here by the engines' code), and replicates."""
    from gpdsl.settings import NUTSSettings

    model, data = simulated(family)
    results = run(model, data, "nuts", NUTSSettings(chains=2, warmup=200, draws=200), seed=1, new_inputs=X_NEW)
    if family == "regression":
        problem = gp_regression(model, data)
        posterior = groups(results)["posterior"]
        theta = unconstrained_draws(problem, {n: posterior[n].values for n in problem.theta_names})
        np.testing.assert_allclose(groups(results)["log_likelihood"]["y"].values,
                                   gp_regression_log_likelihood(problem, theta), rtol=1e-6)
    else:
        check_latent_pointwise(results, family)
    passes_arviz(results, short_run("classification" if family == "classification" else family,
                                    "gibbs"), tmp_path, "nuts")


@pytest.mark.slow
@needs_stan
def test_elpd_of_pm_and_nuts_agree_and_gp_regression_predictions_agree_between_nuts_and_gibbs():
    """GP classification: elpd_loo of pm (EP, f recorded) and of NUTS within 2 se. GP regression: the posterior
    mean of the predictive mean at new inputs from NUTS and from gibbs within 4 combined MCSE, and each draw's
    predictive equal to the exact GP predictive at that draw's hyperparameters."""
    from gpdsl.settings import NUTSSettings

    model, data = simulated("classification", n=40, seed=3)
    pm = run(model, data, "pm", PseudoMarginalSettings(chains=4, warmup=500, draws=1500, sample_latent=True,
                                                       num_importance=16), seed=1)
    nuts = run(model, data, "nuts", NUTSSettings(chains=4, warmup=500, draws=500), seed=2)
    pm_loo, nuts_loo = loo(pm), loo(nuts)
    print(f"\nelpd_loo pm {pm_loo['elpd_loo']:.3f} ({pm_loo['se']:.3f}), "
          f"NUTS {nuts_loo['elpd_loo']:.3f} ({nuts_loo['se']:.3f})")
    assert abs(pm_loo["elpd_loo"] - nuts_loo["elpd_loo"]) < 2 * max(pm_loo["se"], nuts_loo["se"])

    model, data = simulated("regression", n=30, seed=4)
    fits = {"nuts": run(model, data, "nuts", NUTSSettings(chains=4, warmup=500, draws=500), seed=1,
                        new_inputs=X_NEW),
            "gibbs": run(model, data, "gibbs", GibbsSettings(chains=4, warmup=500, draws=1500), seed=1,
                         new_inputs=X_NEW)}
    summaries = {}
    for name, fit in fits.items():
        tree = groups(fit)
        for c, d in [(0, 0), (3, 77)]:
            named = {k: tree["posterior"][k].values[c, d] for k in ("variance", "lengthscale", "noise")}
            mean, _, y_variance = exact_gp_regression(named, data["X"], data["y"], X_NEW)
            np.testing.assert_allclose(tree["predictions"]["y_mean"].values[c, d], mean, rtol=1e-6, atol=1e-9)
            np.testing.assert_allclose(tree["predictions"]["y_variance"].values[c, d], y_variance, rtol=1e-6)
        predictions = tree["predictions"]
        summaries[name] = (predictions["y_mean"].values.mean((0, 1)),
                           mcse(predictions, ["y_mean"])["y_mean"].values)
    (nuts_mean, nuts_error), (gibbs_mean, gibbs_error) = summaries["nuts"], summaries["gibbs"]
    print(np.c_[nuts_mean, nuts_error, gibbs_mean, gibbs_error])
    assert np.all(np.abs(nuts_mean - gibbs_mean) < 4 * np.hypot(nuts_error, gibbs_error))
