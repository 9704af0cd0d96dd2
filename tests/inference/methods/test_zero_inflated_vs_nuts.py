"""The zero-inflated count likelihoods in the engines: the Laplace approximation refuses them (not log-concave)
and says why; gibbs and Stan's NUTS agree on their model files (slow tier).

Thirty counts on a smooth log rate over ``x`` in ``(0, 4)``, a third of them structural zeros. Both samplers
target the same posterior: for each hyperparameter and the zero-inflation probability the posterior means
differ by less than four combined Monte Carlo standard errors.
"""

import numpy as np
import pytest

import gpdsl
from gpdsl.api import check_file, run
from gpdsl.errors import MethodError
from gpdsl.settings import GibbsSettings, NUTSSettings
from tests.inference.methods.test_pm_vs_nuts import disagreements

N = 30
MODELS = {"models/gp_zero_inflated_poisson.gpm": ["sigma", "lengthscale", "zi"]}


def zero_inflated_data(seed=4, zi=0.3):
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(0, 4, N))
    counts = rng.poisson(np.exp(np.sin(1.5 * x) + 0.8))
    return {"N": N, "D": 1, "X": x[:, None], "y": np.where(rng.uniform(size=N) < zi, 0, counts)}


@pytest.mark.parametrize("model_file", list(MODELS))
def test_laplace_refuses_a_zero_inflated_model_and_says_why(model_file):
    with pytest.raises(MethodError, match=r"zero_inflated_\w+, which is not \(at y = 0 it mixes a point mass"):
        gpdsl.sample(model_file, zero_inflated_data(), "pm", seed=1, chains=1, warmup=5, draws=5,
                     approximation="laplace")


@pytest.mark.slow
@pytest.mark.parametrize("model_file", list(MODELS))
def test_gibbs_agrees_with_nuts_on_zero_inflated_counts(model_file):
    model, _ = check_file(model_file)
    data = zero_inflated_data()
    names = MODELS[model_file]
    gibbs = run(model, data, "gibbs", GibbsSettings(chains=4, warmup=1000, draws=4000), seed=5)
    nuts = run(model, data, "nuts", NUTSSettings(chains=4, warmup=1000, draws=1000), seed=6)
    failures = disagreements(gibbs, nuts, names)
    assert not failures, f"posterior means differ by more than 4 combined MCSEs for {failures}"
