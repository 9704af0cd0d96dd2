"""NUTS on a Hilbert-space approximate GP and NUTS on the exact GP of the same model agree on the hyperparameters'
posterior means within four combined Monte Carlo standard errors (slow tier): a 1-D regression of 100 points and a
2-D one of 120 points, with m and c generous by the paper's rule for the length-scales the posteriors hold, so the
approximation's bias is far below the Monte Carlo error. Also the run's HSGP diagnostics: none here, and the
replicates (Stan's generated quantities on the approximate f) agree with the exact GP's in mean."""

import numpy as np
import pytest

from gpdsl.api import check_text, run
from gpdsl.results.method_output import results_json
from gpdsl.settings import NUTSSettings
from tests.inference.methods.test_pm_vs_nuts import disagreements

ONE_D = """
data {{ int N; vector[N] x; vector[N] y; }}
parameters {{
  real<lower=0> alpha ~ half_normal(2);
  real<lower=0> ell ~ inv_gamma(5, 5);
  real<lower=0> sigma ~ half_normal(1);
}}
model {{
  f ~ gp(x, square(alpha) * matern52(lengthscale = ell){approx});
  y ~ normal(f, sigma);
}}
"""

TWO_D = """
data {{ int N; matrix[N, 2] X; vector[N] y; }}
parameters {{
  real<lower=0> alpha ~ half_normal(2);
  vector<lower=0>[2] ell ~ inv_gamma(5, 5);
  real<lower=0> sigma ~ half_normal(1);
}}
model {{
  f ~ gp(X, square(alpha) * rbf(lengthscale = ell){approx});
  y ~ normal(f, sigma);
}}
"""

SETTINGS = NUTSSettings(chains=4, warmup=1000, draws=1000)


def one_d_data(seed=3, n=100):
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(0, 10, n))
    return {"N": n, "x": x, "y": np.sin(x) + 0.5 * np.cos(2.3 * x) + 0.3 * rng.normal(size=n)}


def two_d_data(seed=4, n=120):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 4, (n, 2))
    return {"N": n, "X": X, "y": np.sin(1.5 * X[:, 0]) * np.cos(2 * X[:, 1]) + 0.2 * rng.normal(size=n)}


def compare(template, data, approx, names, seed):
    exact = run(check_text(template.format(approx=""))[0], data, "nuts", SETTINGS, seed=seed)
    hsgp = run(check_text(template.format(approx=f", approx = {approx}"))[0], data, "nuts", SETTINGS, seed=seed + 1)
    for label, results in (("exact", exact), ("hsgp", hsgp)):
        print(f"{label}: {results_json(results, 'timings')['total']:.0f} s")
    assert results_json(hsgp, "report").get("warnings", []) == []
    failures = disagreements(hsgp, exact, names)
    assert not failures, f"posterior means differ by more than 4 combined MCSEs for {failures}"
    replicates = {label: float(results.posterior_predictive["y"].mean()) for label, results in
                  (("exact", exact), ("hsgp", hsgp))}
    observed = float(np.mean(data["y"]))
    assert abs(replicates["hsgp"] - observed) < 0.1 and abs(replicates["exact"] - observed) < 0.1


@pytest.mark.slow
def test_hsgp_and_exact_gp_agree_under_nuts_in_one_dimension():
    # half range 5, c = 2: Matérn-5/2 length-scales down to 2.65 * 2 * 5 / 60 = 0.44 and up to 2 * 5 / 4.1 = 2.4
    compare(ONE_D, one_d_data(), "hsgp(m = 60, c = 2)", ["alpha", "ell", "sigma"], seed=11)


@pytest.mark.slow
def test_hsgp_and_exact_gp_agree_under_nuts_in_two_dimensions():
    # half range 2, c = 2.5: rbf length-scales down to 1.75 * 2.5 * 2 / 24 = 0.36 and up to 2.5 * 2 / 3.2 = 1.56
    compare(TWO_D, two_d_data(), "hsgp(m = 24, c = 2.5)", ["alpha", "ell", "sigma"], seed=21)


@pytest.mark.slow
def test_predictions_at_the_training_inputs_are_the_f_draws_and_the_paper_warning_is_reported():
    # models/gp_hsgp.gpm; predictions at new inputs evaluate the basis there with each draw's weights: at the training
    # inputs themselves they are Stan's f draws (transformed parameters) to rounding
    model = check_text(open("models/gp_hsgp.gpm").read())[0]
    rng = np.random.default_rng(2)
    t = np.sort(rng.uniform(0, 10, 40))
    data = {"N": 40, "t": t, "y": rng.poisson(np.exp(np.sin(t)))}
    new = np.r_[t, 10.5]
    results = run(model, data, "nuts", NUTSSettings(chains=2, warmup=300, draws=100), seed=3, new_inputs=new)
    f = results.posterior["f"].values
    f_new = results.predictions["f_new"].values
    assert f_new.shape == (2, 100, 41) and results.predictions["y_new"].shape == (2, 100, 41)
    np.testing.assert_allclose(f_new[..., :40], f, atol=1e-6)
    assert np.issubdtype(results.predictions["y_new"].dtype, np.integer) or \
        np.all(results.predictions["y_new"].values == np.round(results.predictions["y_new"].values))
    # the posterior log-likelihood is Stan's poisson_log_lpmf at its f draws
    from scipy import stats
    np.testing.assert_allclose(results.log_likelihood["y"].values, stats.poisson.logpmf(data["y"], np.exp(f)),
                               rtol=1e-6)
