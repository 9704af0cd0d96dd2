"""gibbs and Stan's NUTS agree on the hyperparameters of ``models/gp_spectral_mixture.gpm`` (one component).

Thirty noisy points of one Gaussian-windowed cosine over ``t`` in ``(0, 10)``; with ``Q = 1`` the mixture has
no label switching, so NUTS is a reference. Both samplers target the same posterior: for each
hyperparameter the posterior means differ by less than four combined Monte Carlo standard errors.
"""

import numpy as np
import pytest

from gpdsl.api import check_file, run
from gpdsl.kernels import SpectralMixture
from gpdsl.settings import GibbsSettings, NUTSSettings
from tests.inference.methods.test_pm_vs_nuts import disagreements

N = 30


def one_component_data(seed=3):
    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(0, 10, N))
    K = np.asarray(SpectralMixture(1.0, 0.4, 0.05)(t)) + 1e-8 * np.eye(N)
    f = np.linalg.cholesky(K) @ rng.normal(size=N)
    return {"N": N, "Q": 1, "t": t, "y": f + 0.3 * rng.normal(size=N)}


@pytest.mark.slow
def test_gibbs_agrees_with_nuts_on_a_spectral_mixture():
    model, _ = check_file("models/gp_spectral_mixture.gpm")
    data = one_component_data()
    names = ["weights", "means", "scales", "noise"]
    gibbs = run(model, data, "gibbs", GibbsSettings(chains=4, warmup=1000, draws=4000), seed=5)
    nuts = run(model, data, "nuts", NUTSSettings(chains=4, warmup=1000, draws=1000, adapt_delta=0.95), seed=6)
    failures = disagreements(gibbs, nuts, names)
    assert not failures, f"posterior means differ by more than 4 combined MCSEs for {failures}"
