"""The censored likelihoods and ``beta_logit`` in the engines against Stan's NUTS (slow tier).

Thirty survival times on a smooth log scale over ``x`` in ``(0, 4)``, Weibull with shape 1.5, right-censored
at a uniform follow-up time (about a third censored): gibbs (ESS for ``f``) on ``models/gp_censored_survival.gpm``
and pm with Laplace proposals on the same times under ``lognormal_censored`` with every censoring code. Thirty
proportions with mean ``inv_logit(sin(1.5 x))`` and precision 8 under ``beta_logit``, not log-concave, so pm
uses EP with quadrature tilted moments. For each hyperparameter the posterior means differ from NUTS's by
less than four combined Monte Carlo standard errors, and so do the replicates' means (the engine's from the
JAX sampler, NUTS's from the Stan ``_rng``).
"""

import numpy as np
import pytest
import xarray as xr

import gpdsl
from gpdsl.api import check_file, check_text, run
from gpdsl.errors import MethodError
from gpdsl.results.arviz_compat import groups
from gpdsl.settings import GibbsSettings, NUTSSettings, PseudoMarginalSettings
from tests.inference.methods.test_pm_vs_nuts import disagreements

N = 30
LOGNORMAL = """
data { int N; int D; matrix[N, D] X; vector<lower=0>[N] time; array[N] int<lower=-1, upper=2> cens;
       vector<lower=0>[N] time_upper; }
parameters {
  real mu ~ normal(0, 2);
  real<lower=0> sigma ~ lognormal(-1, 1);
  vector<lower=0>[D] lengthscale ~ inv_gamma(5, 5);
  real<lower=0> s ~ lognormal(-1, 1);
}
model {
  f ~ gp(X, sigma * rbf(lengthscale = lengthscale));
  time ~ lognormal_censored(mu + f, s, cens, time_upper);
}
"""
BETA = """
data { int N; int D; matrix[N, D] X; vector<lower=0, upper=1>[N] y; }
parameters {
  real<lower=0> sigma ~ lognormal(0, 1);
  vector<lower=0>[D] lengthscale ~ inv_gamma(5, 5);
  real<lower=0> phi ~ gamma(2, 0.1);
}
model {
  f ~ gp(X, sigma * rbf(lengthscale = lengthscale));
  y ~ beta_logit(f, phi);
}
"""
LONG = dict(chains=4, warmup=1000, draws=4000)
CASES = {
    "weibull_gibbs": ("models/gp_censored_survival.gpm", "survival", "time", GibbsSettings(**LONG),
                      ["mu", "sigma", "lengthscale", "shape"]),
    "lognormal_pm_laplace": (LOGNORMAL, "codes", "time", PseudoMarginalSettings(**LONG, approximation="laplace",
                                                                                  sample_latent=True),
                             ["mu", "sigma", "lengthscale", "s"]),
    "beta_pm_ep": (BETA, "proportions", "y", PseudoMarginalSettings(**LONG, approximation="ep", sample_latent=True),
                   ["sigma", "lengthscale", "phi"]),
}


def checked(model: str):
    return (check_text(model) if "\n" in model else check_file(model))[0]


def survival_data(seed=4):
    """Weibull times, right-censored at a uniform follow-up time: ``censored`` for the model file."""
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(0, 4, N))
    event = np.exp(0.5 + 0.6 * np.sin(1.5 * x)) * rng.weibull(1.5, N)
    follow_up = rng.uniform(0.5, 4.0, N)
    return {"N": N, "D": 1, "X": x[:, None], "time": np.minimum(event, follow_up),
            "censored": (event > follow_up).astype(int)}


def coded_data(seed=4):
    """The survival times with every censoring code: right as above, a sixth left-censored at their time, a
    sixth interval-censored between 0.7 and 1.5 times it."""
    data = survival_data(seed)
    rng = np.random.default_rng(seed + 1)
    cens = np.where(data.pop("censored") == 1, 1, rng.choice([0, 0, 0, 0, -1, 2], N))
    time = np.where(cens == 2, 0.7 * data["time"], data["time"])
    return {**data, "time": time, "cens": cens, "time_upper": np.where(cens == 2, 1.5 * data["time"], time)}


def proportion_data(seed=4):
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(0, 4, N))
    mean = 1 / (1 + np.exp(-np.sin(1.5 * x)))
    return {"N": N, "D": 1, "X": x[:, None], "y": rng.beta(8 * mean, 8 * (1 - mean))}


DATA = {"survival": survival_data, "codes": coded_data, "proportions": proportion_data}


def replicate_mean(results, name) -> xr.Dataset:
    replicates = groups(results)["posterior_predictive"][name]
    return xr.Dataset({"mean": replicates.mean([d for d in replicates.dims if d not in ("chain", "draw")])})


def test_censoring_codes_reach_the_engines_and_laplace_refuses_beta():
    data = coded_data()
    assert set(np.unique(data["cens"])) == {-1, 0, 1, 2}
    assert np.all(data["time_upper"][data["cens"] == 2] > data["time"][data["cens"] == 2])
    with pytest.raises(MethodError, match=r"beta_logit, which is not \(the logit link bends"):
        gpdsl.sample(checked(BETA), proportion_data(), "pm", seed=1, chains=1, warmup=5, draws=5,
                     approximation="laplace")


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_an_engine_agrees_with_nuts_on_censored_times_and_proportions(case):
    model_text, data_name, observed, settings, names = CASES[case]
    model, data = checked(model_text), DATA[data_name]()
    method = "gibbs" if isinstance(settings, GibbsSettings) else "pm"
    ours = run(model, data, method, settings, seed=5)
    nuts = run(model, data, "nuts", NUTSSettings(chains=4, warmup=1000, draws=1000), seed=6)
    failures = disagreements(ours, nuts, names)
    failures += disagreements(replicate_mean(ours, observed), replicate_mean(nuts, observed), ["mean"])
    assert not failures, f"posterior means differ by more than 4 combined MCSEs for {failures}"
