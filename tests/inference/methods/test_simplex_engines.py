"""A ``simplex[K]`` parameter in gpdsl's engines.

- ``gibbs`` moves a simplex in Stan's stick-breaking coordinates and reports it constrained (entries >= 0 that
  sum to one, dims ``(chain, draw, K)``); a simplex the likelihood does not read keeps its Dirichlet prior, so
  its posterior means are ``alpha / sum(alpha)`` within four Monte Carlo standard errors;
- ``gibbs`` and Stan's NUTS agree on the mixture weights of a regression mean, the length-scale and the noise
  within four combined Monte Carlo standard errors (slow tier).
"""

import numpy as np
import pytest

from gpdsl.api import check_text, run
from gpdsl.results.arviz_compat import groups
from gpdsl.settings import GibbsSettings, NUTSSettings
from tests.inference.methods.test_pm_vs_nuts import disagreements, means_and_mcse

WEIGHTED_MEAN = """
data { int N; vector[N] x; matrix[N, 3] X; vector[N] y; }
parameters {
  real<lower=0> ell ~ gamma(4, 4);
  real<lower=0> noise ~ half_normal(1);
  simplex[3] w ~ dirichlet([2, 2, 2]);
  simplex[3] v ~ dirichlet([1, 2, 4]);
}
model {
  f ~ gp(x, 0.5 * rbf(lengthscale = ell));
  y ~ normal(3 * (X * w) + f, noise);
}
"""
PRIOR_ALPHA = np.array([1.0, 2.0, 4.0])


def weighted_mean_data(seed=0, N=20):
    rng = np.random.default_rng(seed)
    x, X = np.linspace(0, 4, N), rng.normal(size=(N, 3))
    y = 3 * X @ np.array([0.6, 0.3, 0.1]) + 0.5 * np.sin(x) + 0.2 * rng.normal(size=N)
    return {"N": N, "x": x, "X": X, "y": y}


def test_gibbs_reports_simplexes_and_keeps_an_unread_one_at_its_prior():
    model, _ = check_text(WEIGHTED_MEAN)
    results = run(model, weighted_mean_data(), "gibbs", GibbsSettings(chains=2, warmup=300, draws=1000), seed=1)
    posterior = groups(results)["posterior"]
    for name in ("w", "v"):
        values = posterior[name].transpose("chain", "draw", ...).values
        assert values.shape == (2, 1000, 3) and np.all(values >= 0)
        np.testing.assert_allclose(values.sum(axis=-1), 1.0, rtol=1e-12)
    table = means_and_mcse(results, ["v"])
    for k, expected in enumerate(PRIOR_ALPHA / PRIOR_ALPHA.sum()):
        mean, error = table[f"v[{k + 1}]"]
        assert abs(mean - expected) < 4 * error, (k, mean, expected, error)


@pytest.mark.slow
def test_gibbs_agrees_with_nuts_on_simplex_weights():
    model, _ = check_text(WEIGHTED_MEAN)
    data = weighted_mean_data()
    ours = run(model, data, "gibbs", GibbsSettings(chains=4, warmup=1000, draws=4000), seed=5)
    nuts = run(model, data, "nuts", NUTSSettings(chains=4, warmup=1000, draws=1000), seed=6)
    failures = disagreements(ours, nuts, ["w", "v", "ell", "noise"])
    assert not failures, f"posterior means differ by more than 4 combined MCSEs for {failures}"
