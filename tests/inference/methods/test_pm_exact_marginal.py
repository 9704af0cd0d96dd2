"""``pm`` on GP regression: adaptive Metropolis on the exact marginal likelihood (the Kalman filter for a state-space
GP, a Cholesky factorisation for the dense one), against a posterior computed by quadrature."""

import arviz as az
import numpy as np
import pytest
from scipy import stats

from gpdsl.api import run
from gpdsl.registry import methods
from gpdsl.semantics.model_text import check_text

MAGNITUDE = 0.8

TEMPLATE = """
data {{ int N; vector[N] t; vector[N] y; }}
parameters {{
  real<lower=0> ell ~ lognormal(0, 1);
  real<lower=0> sigma ~ half_normal(1);
}}
model {{
  f ~ gp(t, square({magnitude}) * matern32(lengthscale = ell){approx});
  y ~ normal(f, sigma);
}}
"""


def series(n=40, seed=3):
    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(0, 10, n))
    return {"N": n, "t": t, "y": np.sin(t) + 0.3 * rng.normal(size=n)}


def model(approx: str):
    return check_text(TEMPLATE.format(magnitude=MAGNITUDE, approx=approx), "m.gpm")[0]


def quadrature_moments(data, points=120):
    """Posterior mean and sd of ``ell`` and ``sigma`` on a grid of their logarithms, from a dense Matérn-3/2 marginal
    written out here (independent of gpdsl's code)."""
    t, y = data["t"], data["y"]
    log_ell, log_sigma = np.meshgrid(np.linspace(-2.5, 3.0, points), np.linspace(-2.5, 0.5, points), indexing="ij")
    distance = np.abs(t[:, None] - t[None, :])
    log_post = np.empty_like(log_ell)
    for i, j in np.ndindex(log_ell.shape):
        ell, sigma = np.exp(log_ell[i, j]), np.exp(log_sigma[i, j])
        r = np.sqrt(3.0) * distance / ell
        cov = MAGNITUDE**2 * (1 + r) * np.exp(-r) + (sigma**2 + 1e-8) * np.eye(len(t))
        log_post[i, j] = (stats.multivariate_normal.logpdf(y, cov=cov) + stats.lognorm.logpdf(ell, 1.0)
                          + stats.halfnorm.logpdf(sigma) + log_ell[i, j] + log_sigma[i, j])
    weights = np.exp(log_post - log_post.max())
    weights /= weights.sum()
    moments = {}
    for name, values in (("ell", np.exp(log_ell)), ("sigma", np.exp(log_sigma))):
        mean = np.sum(weights * values)
        moments[name] = (mean, np.sqrt(np.sum(weights * (values - mean) ** 2)))
    return moments


def test_pm_on_a_state_space_regression_matches_the_quadrature_posterior():
    data = series()
    settings = methods()["pm"].settings(chains=4, warmup=400, draws=1500)
    results = run(model(", approx = state_space"), data, "pm", settings, seed=7)
    summary = az.summary(results, var_names=["ell", "sigma"])
    assert summary["r_hat"].max() < 1.05
    for name, (mean, sd) in quadrature_moments(data).items():
        row = summary.loc[name]
        assert abs(row["mean"] - mean) < 4 * row["mcse_mean"] + 1e-3 * sd, (name, row["mean"], mean)
        assert abs(row["sd"] - sd) < 4 * row["mcse_sd"] + 1e-3 * sd, (name, row["sd"], sd)
    assert {"log_likelihood", "posterior_predictive"} <= set(results.groups())
    assert 0.1 < float(results.sample_stats["acceptance_rate"].mean()) < 0.6


def test_pm_runs_the_same_chain_on_the_state_space_and_the_dense_model():
    data = series(n=30)
    settings = methods()["pm"].settings(chains=2, warmup=100, draws=200)
    state_space = run(model(", approx = state_space"), data, "pm", settings, seed=2)
    dense = run(model(""), data, "pm", settings, seed=2)
    for name in ("ell", "sigma"):
        np.testing.assert_allclose(state_space.posterior[name].values, dense.posterior[name].values, rtol=1e-6)
    np.testing.assert_allclose(state_space.log_likelihood["y"].values, dense.log_likelihood["y"].values, rtol=1e-6)


@pytest.mark.slow
def test_pm_reuses_an_adapted_proposal_on_a_regression_model():
    data = series(n=20)
    first = run(model(", approx = state_space"), data, "pm", methods()["pm"].settings(chains=2, warmup=100, draws=50),
                seed=1)
    from gpdsl.settings.sampling import adapted_proposal_covariance

    covariance = adapted_proposal_covariance(first)
    assert np.shape(covariance) == (2, 2) and np.all(np.linalg.eigvalsh(covariance) > 0)
    settings = methods()["pm"].settings(chains=2, warmup=10, draws=50, proposal_covariance=covariance)
    again = run(model(", approx = state_space"), data, "pm", settings, seed=1)
    assert again.posterior["ell"].shape == (2, 50)


@pytest.mark.parametrize("approx", [", approx = state_space", ""])
def test_pm_on_regression_needs_a_prior_on_every_hyperparameter(approx):
    from gpdsl.errors import MethodError

    text = TEMPLATE.format(magnitude=MAGNITUDE, approx=approx).replace(" ~ half_normal(1)", "")
    with pytest.raises(MethodError, match="sigma"):
        run(check_text(text, "m.gpm")[0], series(n=10), "pm", seed=1)
