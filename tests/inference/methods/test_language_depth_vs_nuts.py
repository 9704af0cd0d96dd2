"""The language-depth models of issue 15's acceptance: gpdsl's engines and Stan's NUTS agree.

A log-Gaussian Cox process with an exposure offset, ``y ~ poisson_log(log_exposure + mu + f)``, by ``pm`` with the
Laplace proposal (which shifts ``f`` by the offset), and GP regression with a linear mean,
``y ~ normal(mu + beta * x + f, noise)``, and a GP plus group effects, ``y ~ normal(f + u[group], noise)``, by
``gibbs``; a Student-t GP regression and a heteroscedastic GP with two latent GPs, ``y ~ normal(f, exp(mu_g + g))``,
by ``gibbs``; a negative-binomial GP by ``pm`` (Laplace): for every hyperparameter the posterior means differ by less
than 4 combined Monte Carlo standard errors.
"""

import numpy as np
import pytest

from gpdsl.api import check_file, check_text, run
from gpdsl.settings import NUTSSettings
from gpdsl.settings import GibbsSettings
from gpdsl.settings import PseudoMarginalSettings
from tests.inference.methods.test_pm_vs_nuts import means_and_mcse
from tests.inference.mcmc.test_several_latent_gps import HETEROSCEDASTIC

COX = """
data { int N; vector[N] x; vector[N] log_exposure; array[N] int<lower=0> y; }
parameters { real<lower=0> s ~ lognormal(0, 0.5); real<lower=0> ell ~ lognormal(0, 0.5); real mu ~ normal(0, 1); }
latent { vector[N] f; }
model {
  f ~ gp(x, s * rbf(ell));
  y ~ poisson_log(log_exposure + mu + f);
}
"""

LINEAR_MEAN = """
data { int N; vector[N] x; vector[N] y; }
parameters {
  real<lower=0> s ~ lognormal(0, 0.5); real<lower=0> ell ~ lognormal(0, 0.5);
  real mu ~ normal(0, 1); real beta ~ normal(0, 1); real<lower=0> noise ~ lognormal(-1, 0.5);
}
latent { vector[N] f; }
model {
  f ~ gp(x, s * rbf(ell));
  y ~ normal(mu + beta * x + f, noise);
}
"""


def agree(gpdsl_fit, nuts_fit, names):
    ours, reference = means_and_mcse(gpdsl_fit, names), means_and_mcse(nuts_fit, names)
    failures = []
    for label, (mean, error) in ours.items():
        nuts_mean, nuts_error = reference[label]
        z = (mean - nuts_mean) / np.hypot(error, nuts_error)
        print(f"{label:6} ours {mean:8.4f} +- {error:.4f}  NUTS {nuts_mean:8.4f} +- {nuts_error:.4f}  z {z:+.2f}")
        if abs(z) > 4:
            failures.append(label)
    assert not failures, f"posterior means differ by more than 4 combined MCSEs for {failures}"


@pytest.mark.slow
def test_cox_process_with_an_exposure_offset_by_pm_laplace_agrees_with_nuts():
    rng = np.random.default_rng(11)
    N = 30
    x = np.sort(rng.uniform(0, 5, N))
    log_exposure = rng.normal(0, 0.5, N)
    y = rng.poisson(np.exp(log_exposure + 0.3 + np.sin(1.5 * x)))
    data = {"N": N, "x": x, "log_exposure": log_exposure, "y": y}
    model, _ = check_text(COX)
    pm = run(model, data, "pm", PseudoMarginalSettings(chains=4, warmup=500, draws=2500, approximation="laplace",
                                                       num_importance=16), seed=3)
    nuts = run(model, data, "nuts", NUTSSettings(chains=4, warmup=1000, draws=1000, adapt_delta=0.95), seed=4)
    agree(pm, nuts, ["s", "ell", "mu"])


@pytest.mark.slow
def test_gp_regression_with_a_linear_mean_by_gibbs_agrees_with_nuts():
    rng = np.random.default_rng(12)
    N = 25
    x = np.sort(rng.uniform(0, 4, N))
    y = 0.5 - 0.8 * x + np.sin(2 * x) + rng.normal(0, 0.3, N)
    data = {"N": N, "x": x, "y": y}
    model, _ = check_text(LINEAR_MEAN)
    gibbs = run(model, data, "gibbs", GibbsSettings(chains=4, warmup=1000, draws=4000), seed=5)
    nuts = run(model, data, "nuts", NUTSSettings(chains=4, warmup=1000, draws=1000, adapt_delta=0.95), seed=6)
    agree(gibbs, nuts, ["s", "ell", "mu", "beta", "noise"])


GROUP_EFFECTS = """
data { int N; int G; vector[N] x; array[N] int<lower=1, upper=G> group; vector[N] y; }
parameters {
  real<lower=0> s ~ lognormal(0, 0.5); real<lower=0> ell ~ lognormal(0, 0.5);
  real<lower=0> tau ~ lognormal(-1, 0.5); vector[G] u ~ normal(0, tau); real<lower=0> noise ~ lognormal(-1, 0.5);
}
latent { vector[N] f; }
model {
  f ~ gp(x, s * rbf(ell));
  y ~ normal(f + u[group], noise);
}
"""


@pytest.mark.slow
def test_gp_with_group_effects_by_gibbs_agrees_with_nuts():
    rng = np.random.default_rng(13)
    N, G = 24, 3
    x = np.sort(rng.uniform(0, 4, N))
    group = rng.integers(1, G + 1, N)
    y = np.sin(2 * x) + np.array([-0.5, 0.1, 0.6])[group - 1] + rng.normal(0, 0.3, N)
    data = {"N": N, "G": G, "x": x, "group": group, "y": y}
    model, _ = check_text(GROUP_EFFECTS)
    gibbs = run(model, data, "gibbs", GibbsSettings(chains=4, warmup=1000, draws=4000), seed=7)
    nuts = run(model, data, "nuts", NUTSSettings(chains=4, warmup=1000, draws=1000, adapt_delta=0.95), seed=8)
    agree(gibbs, nuts, ["s", "ell", "tau", "u", "noise"])


STUDENT_T = """
data { int N; vector[N] x; vector[N] y; }
parameters {
  real<lower=0> s ~ lognormal(0, 0.5); real<lower=0> ell ~ lognormal(0, 0.5);
  real<lower=0> sigma ~ lognormal(-1, 0.5);
}
latent { vector[N] f; }
model {
  f ~ gp(x, s * rbf(ell));
  y ~ student_t(4, f, sigma);
}
"""


@pytest.mark.slow
def test_student_t_gp_regression_by_gibbs_agrees_with_nuts():
    rng = np.random.default_rng(14)
    N = 25
    x = np.sort(rng.uniform(0, 4, N))
    y = np.sin(2 * x) + 0.3 * rng.standard_t(4, N)
    y[[3, 15]] += 3.0  # two outliers the heavy tails absorb
    data = {"N": N, "x": x, "y": y}
    model, _ = check_text(STUDENT_T)
    gibbs = run(model, data, "gibbs", GibbsSettings(chains=4, warmup=1000, draws=4000), seed=9)
    nuts = run(model, data, "nuts", NUTSSettings(chains=4, warmup=1000, draws=1000, adapt_delta=0.95), seed=10)
    agree(gibbs, nuts, ["s", "ell", "sigma"])


@pytest.mark.slow
def test_negative_binomial_gp_by_pm_agrees_with_nuts():
    rng = np.random.default_rng(15)
    N = 30
    X = np.sort(rng.uniform(0, 5, N))[:, None]
    mean = np.exp(1.0 + np.sin(1.2 * X[:, 0]))
    y = rng.negative_binomial(3.0, 3.0 / (3.0 + mean))
    data = {"N": N, "D": 1, "X": X, "y": y}
    model, _ = check_file("models/gp_negbin.gpm")
    pm = run(model, data, "pm", PseudoMarginalSettings(chains=4, warmup=500, draws=2500, approximation="laplace",
                                                       num_importance=16), seed=11)
    nuts = run(model, data, "nuts", NUTSSettings(chains=4, warmup=1000, draws=1000, adapt_delta=0.95), seed=12)
    agree(pm, nuts, [name for name in model.parameters])





@pytest.mark.slow
def test_heteroscedastic_gp_with_two_latent_gps_by_gibbs_agrees_with_nuts():
    rng = np.random.default_rng(16)
    N = 30
    x = np.sort(rng.uniform(0, 4, N))
    y = np.sin(2 * x) + np.exp(-2.0 + 0.5 * x) * rng.normal(size=N)
    data = {"N": N, "x": x, "y": y}
    model, _ = check_text(HETEROSCEDASTIC)
    gibbs = run(model, data, "gibbs", GibbsSettings(chains=4, warmup=1000, draws=5000), seed=13)
    nuts = run(model, data, "nuts", NUTSSettings(chains=4, warmup=1000, draws=1000, adapt_delta=0.95), seed=14)
    agree(gibbs, nuts, ["s", "ell", "s_g", "ell_g", "mu_g"])
