"""gibbs and Stan's NUTS agree on the hyperparameters of ``models/gp_changepoint.gpm``.

Thirty noisy points over ``t`` in ``(0, 10)`` drawn from the model's kernel: a smooth Matérn-5/2 process
before ``t = 5`` and a rough Matérn-3/2 one after it. Both samplers target the same posterior: for each
hyperparameter the posterior means differ by less than four combined Monte Carlo standard errors.
"""

import numpy as np
import pytest

from gpdsl.api import check_file, run
from gpdsl.kernels import Changepoint, Matern
from gpdsl.settings import GibbsSettings, NUTSSettings
from tests.inference.methods.test_pm_vs_nuts import disagreements

N = 30


def changepoint_data(seed=2):
    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(0, 10, N))
    kernel = Changepoint(Matern(2.5, lengthscale=2.0), Matern(1.5, lengthscale=0.5), 5.0, 3.0)
    K = np.asarray(kernel(t)) + 1e-8 * np.eye(N)
    f = np.linalg.cholesky(K) @ rng.normal(size=N)
    return {"N": N, "t": t, "y": f + 0.2 * rng.normal(size=N)}


@pytest.mark.slow
def test_gibbs_agrees_with_nuts_on_a_changepoint_model():
    model, _ = check_file("models/gp_changepoint.gpm")
    data = changepoint_data()
    names = ["location", "steepness", "ell_before", "ell_after", "noise"]
    gibbs = run(model, data, "gibbs", GibbsSettings(chains=4, warmup=1000, draws=4000), seed=5)
    nuts = run(model, data, "nuts", NUTSSettings(chains=4, warmup=1000, draws=1000, adapt_delta=0.95), seed=6)
    failures = disagreements(gibbs, nuts, names)
    assert not failures, f"posterior means differ by more than 4 combined MCSEs for {failures}"
