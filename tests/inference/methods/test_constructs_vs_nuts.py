"""Stan constructs around a GP in the engines: ``models/gp_hierarchical_groups.gpm`` (a loop likelihood that the
checker vectorises, group effects through a transformed parameter, a half-Cauchy scale, year-by-region effects
indexed by pairs) runs on gibbs, and gibbs and Stan's NUTS agree on it (slow tier).

Forty observations of a smooth trend in time plus four group effects and a 3 x 2 table of year-by-region effects.
For each parameter, each group effect ``u`` and their mean ``u_mean`` (transformed parameters, which the results
compute from each draw) the posterior means of the two samplers differ by less than four combined Monte Carlo
standard errors.
"""

import numpy as np
import pytest

from gpdsl.api import check_file, run
from gpdsl.ir import nodes as ir
from gpdsl.settings import GibbsSettings, NUTSSettings
from tests.inference.methods.test_pm_vs_nuts import disagreements

MODEL = "models/gp_hierarchical_groups.gpm"
NAMES = ["alpha", "sigma_f", "rho", "tau", "noise", "e", "u", "u_mean"]


def hierarchical_groups_data(seed=3, N=40, G=4, T=3, R=2):
    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(-1.7, 1.7, N))
    group, year, region = rng.integers(1, G + 1, N), rng.integers(1, T + 1, N), rng.integers(1, R + 1, N)
    u, e = rng.normal(0, 0.6, G), rng.normal(0, 0.4, (T, R))
    y = np.sin(2 * t) + u[group - 1] + e[year - 1, region - 1] + rng.normal(0, 0.3, N)
    return {"N": N, "G": G, "T": T, "R": R, "t": t, "y": y, "group": group, "year": year, "region": region}


def test_the_loop_likelihood_reaches_the_engines_vectorised():
    model, warnings = check_file(MODEL)
    likelihood = model.statements[-1]
    assert isinstance(likelihood, ir.LikelihoodStatement) and not likelihood.target.indices and warnings == []
    assert list(model.transformed) == ["u", "u_mean"]


@pytest.mark.slow
def test_gibbs_agrees_with_nuts_on_the_hierarchical_groups_model():
    model, _ = check_file(MODEL)
    data = hierarchical_groups_data()
    # the intercept trades off against the GP's level: long chains, several hyperparameter updates per f update
    gibbs = GibbsSettings(chains=4, warmup=2000, draws=16000, repeat_theta=4, repeat_f=2)
    ours = run(model, data, "gibbs", gibbs, seed=5)
    nuts = run(model, data, "nuts", NUTSSettings(chains=4, warmup=1000, draws=1000), seed=6)
    for results in (ours, nuts):
        u = results.posterior["u"].values
        np.testing.assert_allclose(results.posterior["u_mean"].values, u.mean(axis=-1), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(u, results.posterior["tau"].values[..., None] * results.posterior["z"].values,
                                   rtol=1e-12, atol=1e-14)
    failures = disagreements(ours, nuts, NAMES)
    assert not failures, f"posterior means differ by more than 4 combined MCSEs for {failures}"
