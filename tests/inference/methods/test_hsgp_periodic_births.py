"""Periodic kernels under ``approx = hsgp(...)`` and under ``approx = state_space`` on the US births data
(births_usa_1969, the HSGP paper's case study), against independent references:

* ``ml`` on one HSGP whose kernel is a Matérn-3/2 trend plus a weekly periodic term: its log marginal likelihood at
  its estimate equals ``log N(y | 0, A A' + sigma^2 I)`` with the basis built here in NumPy (sine eigenfunctions on
  the box, the cosine series with SciPy's Bessel functions);
* ``ml`` on trend + weekly periodic as a state-space GP (Kalman filter) and as the exact GP: the same estimate and
  log marginal likelihood (the series truncated after 6 harmonics is exact on whole days of a 7-day period);
* gibbs (elliptical slice sampling of the weights) and NUTS agree on a periodic-sum HSGP within combined MCSEs (slow).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy import special, stats

import gpdsl.datasets as datasets
from gpdsl.api import check_text, run
from gpdsl.errors import DataError
from gpdsl.settings import GibbsSettings, MLSettings, NUTSSettings
from tests.inference.methods.test_pm_vs_nuts import disagreements

MIRROR = Path(__file__).resolve().parents[4] / "shared" / "data"
DAYS = 150

HSGP_WEEKLY = """
data { int N; vector[N] t; vector[N] y; }
parameters {
  real<lower=0> trend_sd ~ normal(0, 1);
  real<lower=0> trend_lengthscale ~ lognormal(4, 1);
  real<lower=0> week_sd ~ normal(0, 1);
  real<lower=0> week_lengthscale ~ lognormal(0, 0.5);
  real<lower=0> sigma ~ normal(0, 0.5);
}
model {
  f ~ gp(t, square(trend_sd) * matern32(lengthscale = trend_lengthscale)
            + square(week_sd) * periodic(lengthscale = week_lengthscale, period = 7), approx = APPROX);
  y ~ normal(f, sigma);
}
"""


@pytest.fixture
def births(monkeypatch):
    if not (MIRROR / "births_usa_1969" / "births_usa_1969.csv").is_file():
        pytest.skip(f"the data mirror {MIRROR} (../shared/data beside the checkout) lacks births_usa_1969")
    monkeypatch.setenv("GPDSL_DATA_MIRROR", str(MIRROR))
    data = datasets.births_usa_1969(relative=True)
    y = (data.y - data.y.mean()) / data.y.std()
    return {"N": DAYS, "t": data.X[:DAYS, 0] - 1.0, "y": y[:DAYS]}


def model_with(approx: str):
    return check_text(HSGP_WEEKLY.replace("APPROX", approx))[0]


def numpy_log_marginal(data, theta, m, c, order, constant=True):
    """``log N(y | 0, A A' + sigma^2 I)``: the trend on ``m`` sine eigenfunctions of ``[centre - L, centre + L]``
    with the Matérn-3/2 spectral density, the weekly term on ``1, cos(j w t), sin(j w t)`` with variances
    ``variance exp(-z) I_j(z)`` (twice for ``j >= 1``), ``z = 1 / (4 lengthscale^2)``; without the ``1`` and its
    variance unless ``constant``."""
    t = data["t"]
    centre, L = (t.min() + t.max()) / 2, c * (t.max() - t.min()) / 2
    omega = np.arange(1, m + 1) * np.pi / (2 * L)
    trend_phi = np.sin(np.outer(t - centre + L, omega)) / np.sqrt(L)
    ell = theta["trend_lengthscale"]
    trend_var = theta["trend_sd"] ** 2 * 12 * np.sqrt(3) * ell / (3 + ell ** 2 * omega ** 2) ** 2
    angles = np.outer(t, 2 * np.pi / 7 * np.arange(1, order + 1))
    week_phi = np.column_stack([np.ones_like(t)] + [f(angles[:, j]) for j in range(order) for f in (np.cos, np.sin)])
    z = 0.25 / theta["week_lengthscale"] ** 2
    bessel = special.ive(np.arange(order + 1), z)
    week_var = theta["week_sd"] ** 2 * np.concatenate([bessel[:1], np.repeat(2 * bessel[1:], 2)])
    if not constant:
        week_phi, week_var = week_phi[:, 1:], week_var[1:]
    A = np.column_stack([trend_phi * np.sqrt(trend_var), week_phi * np.sqrt(week_var)])
    covariance = A @ A.T + theta["sigma"] ** 2 * np.eye(len(t))
    return stats.multivariate_normal(np.zeros(len(t)), covariance).logpdf(data["y"])


def estimate(result, names):
    return {name: float(result.posterior[name].values.ravel()[0]) for name in names}


NAMES = ("trend_sd", "trend_lengthscale", "week_sd", "week_lengthscale", "sigma")


@pytest.mark.parametrize("constant", [1, 0])
def test_ml_on_a_trend_plus_periodic_hsgp_is_the_gaussian_of_its_basis(births, constant):
    result = run(model_with(f"hsgp(m = 15, c = 1.5, constant = {constant})"), births, "ml", MLSettings(restarts=2),
                 seed=3)
    theta = estimate(result, NAMES)
    reference = numpy_log_marginal(births, theta, m=15, c=1.5, order=15, constant=bool(constant))
    assert float(result.sample_stats["log_marginal"].values.ravel()[0]) == pytest.approx(reference, rel=1e-7)


def weekly_period_as_data():
    """The weekly HSGP model with its period read from the data variable ``days_per_week``."""
    source = HSGP_WEEKLY.replace("vector[N] y; }", "vector[N] y; real days_per_week; }").replace(
        "period = 7", "period = days_per_week").replace("APPROX", "hsgp(m = 15, c = 1.5)")
    return check_text(source)[0]


def test_a_period_given_as_data_is_the_period_written_as_a_number(births):
    model = weekly_period_as_data()
    result = run(model, {**births, "days_per_week": 7.0}, "ml", MLSettings(restarts=2), seed=3)
    theta = estimate(result, NAMES)
    reference = numpy_log_marginal(births, theta, m=15, c=1.5, order=15)
    assert float(result.sample_stats["log_marginal"].values.ravel()[0]) == pytest.approx(reference, rel=1e-7)
    with pytest.raises(DataError, match="period of a periodic term of 'f' is -7; its cosine series needs a positive"):
        run(model, {**births, "days_per_week": -7.0}, "ml", MLSettings(restarts=2), seed=3)


@pytest.mark.parametrize("period", [0.0, -1.5])
def test_nuts_refuses_a_period_that_is_not_positive_before_compiling_stan(births, period):
    model = weekly_period_as_data()
    with pytest.raises(DataError, match=f"period of a periodic term of 'f' is {period:g}"):
        run(model, {**births, "days_per_week": period}, "nuts", NUTSSettings(chains=1, warmup=10, draws=10), seed=3)


def test_state_space_and_exact_ml_agree_on_births(births):
    state_space = run(model_with("state_space(order = 6)"), births, "ml", MLSettings(restarts=2), seed=3)
    exact_model = check_text(HSGP_WEEKLY.replace(", approx = APPROX", ""))[0]
    exact = run(exact_model, births, "ml", MLSettings(restarts=2), seed=3)
    ours, theirs = estimate(state_space, NAMES), estimate(exact, NAMES)
    for name in NAMES:
        assert ours[name] == pytest.approx(theirs[name], rel=2e-3), name
    assert float(state_space.sample_stats["log_marginal"].values.ravel()[0]) == pytest.approx(
        float(exact.sample_stats["log_marginal"].values.ravel()[0]), abs=1e-3)


@pytest.mark.slow
def test_gibbs_on_a_periodic_sum_hsgp_agrees_with_nuts():
    rng = np.random.default_rng(4)
    t = np.sort(rng.uniform(0, 28, 60))
    data = {"N": 60, "t": t, "y": 0.4 * t / 28 + np.sin(2 * np.pi * t / 7) + rng.normal(0, 0.3, 60)}
    model = model_with("hsgp(m = 8, c = 1.5)")
    ours = run(model, data, "gibbs", GibbsSettings(chains=4, warmup=1000, draws=4000), seed=5)
    nuts = run(model, data, "nuts", NUTSSettings(chains=4, warmup=1000, draws=1000), seed=6)
    failures = disagreements(ours, nuts, list(NAMES))
    assert not failures, f"posterior means differ by more than 4 combined MCSEs for {failures}"
