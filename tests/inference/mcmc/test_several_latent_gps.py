"""Several latent GPs under one likelihood (issue 15, item 4): ``gibbs`` samples them as one block-diagonal latent GP,
an ESS update of all of them then one of each in turn; methods that need one latent GP say so before running."""

import numpy as np
import pytest

from gpdsl.api import check_text, run
from gpdsl.errors import MethodError
from gpdsl.settings import GibbsSettings
from gpdsl.settings import PseudoMarginalSettings
from gpdsl.ir.families import LATENT_GP, LATENT_GPS, classify
from gpdsl.registry import get_method

ADDITIVE = """
data { int N; vector[N] x; vector[N] y; }
model {
  f ~ gp(x, rbf(lengthscale = 1.5));
  g ~ gp(x, 0.3 * rbf(lengthscale = 0.3));
  y ~ normal(f + g, 0.3);
}
"""

HETEROSCEDASTIC = """
data { int N; vector[N] x; vector[N] y; }
parameters {
  real<lower=0> s ~ lognormal(0, 0.5); real<lower=0> ell ~ lognormal(0, 0.5);
  real<lower=0> s_g ~ lognormal(-1, 0.5); real<lower=0> ell_g ~ lognormal(0.5, 0.5); real mu_g ~ normal(-1, 1);
}
model {
  f ~ gp(x, s * rbf(lengthscale = ell));
  g ~ gp(x, s_g * rbf(lengthscale = ell_g));
  y ~ normal(f, exp(mu_g + g));
}
"""


def rbf(a, b, lengthscale, variance=1.0):
    return variance * np.exp(-0.5 * (a[:, None] - b[None, :]) ** 2 / lengthscale ** 2)


def additive_data(N=12):
    rng = np.random.default_rng(0)
    x = np.sort(rng.uniform(0, 4, N))
    return {"N": N, "x": x, "y": np.sin(2 * x) + 0.3 * rng.normal(size=N)}


def test_several_latent_gps_are_their_own_family_that_only_gibbs_runs():
    model, _ = check_text(HETEROSCEDASTIC)
    classification = classify(model)
    assert [n.name for n in classification.facts[LATENT_GPS].nodes] == ["f", "g"]
    assert "samples 2 latent GPs (f, g)" in classification.refusals[LATENT_GP].detail
    assert classification.refusals[LATENT_GP].suggests == "gibbs"
    assert get_method("gibbs").refusal(model, classification) is None
    for name in ("pm", "mcmc-ep", "ep-ml"):
        assert "gibbs samples each in turn" in get_method(name).refusal(model, classification)


def test_pm_and_predictions_are_refused_before_running():
    model, _ = check_text(HETEROSCEDASTIC)
    data = additive_data()
    with pytest.raises(MethodError, match="samples 2 latent GPs"):
        run(model, data, "pm", PseudoMarginalSettings(chains=1, warmup=10, draws=10))
    assert "predicts at new inputs for" in get_method("gibbs").prediction_refusal(model)


def test_a_likelihood_on_one_element_of_a_latent_is_refused_naming_the_statement():
    model, _ = check_text(ADDITIVE.replace("normal(f + g, 0.3)", "normal(f + g[1], 0.3)"))
    refusal = classify(model).refusals[LATENT_GPS]
    assert "does not act on their elements one by one" in refusal.detail and refusal.span.line == 6
    assert "--method gibbs" not in get_method("gibbs").refusal(model)


def test_a_likelihood_on_a_product_of_latents_acts_element_by_element():
    model, _ = check_text(ADDITIVE.replace("normal(f + g, 0.3)", "normal(f * g, 0.3)"))
    assert LATENT_GPS in classify(model).facts and get_method("gibbs").refusal(model) is None


def test_gibbs_on_two_additive_gps_matches_the_exact_posterior_mean():
    """y = f + g + noise at fixed hyperparameters: E[f | y] = K_f (K_f + K_g + s^2 I)^-1 y."""
    model, _ = check_text(ADDITIVE)
    data = additive_data()
    fit = run(model, data, "gibbs", GibbsSettings(chains=4, warmup=200, draws=2000), seed=1)
    x, y, N = data["x"], data["y"], data["N"]
    K_f, K_g = rbf(x, x, 1.5), rbf(x, x, 0.3, 0.3)
    C = K_f + K_g + 0.09 * np.eye(N)
    import arviz as az

    for name, K in (("f", K_f), ("g", K_g)):
        draws = fit.posterior[name].values
        ess = az.ess(az.convert_to_dataset({name: draws}))[name].values
        mcse = draws.reshape(-1, N).std(0) / np.sqrt(ess)
        z = (draws.reshape(-1, N).mean(0) - K @ np.linalg.solve(C, y)) / mcse
        assert np.all(np.abs(z) < 4.5), (name, z)
    assert fit.log_likelihood["y"].shape == (4, 2000, N)
