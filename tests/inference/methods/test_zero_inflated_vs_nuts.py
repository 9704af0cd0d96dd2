"""The zero-inflated and hurdle count likelihoods in the engines: the Laplace approximation refuses the
zero-inflated ones (not log-concave) and says why; an engine and Stan's NUTS agree on each (slow tier).

Thirty counts on a smooth log rate over ``x`` in ``(0, 4)``, a third of them extra zeros. Both samplers target
the same posterior: for each hyperparameter and the zero probability the posterior means differ by less than
four combined Monte Carlo standard errors. The zero-inflated models run on gibbs (ESS for ``f``), the hurdle
Poisson, log-concave in ``eta``, on pm with Laplace proposals. The replicates (the engine's from the JAX
sampler, NUTS's from the Stan ``_rng`` template) agree on their mean and fraction of zeros in the same way.
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
COUNTS = """
data {{ int N; int D; matrix[N, D] X; array[N] int<lower=0> y; }}
parameters {{
  real<lower=0> sigma ~ lognormal(0, 1);
  vector<lower=0>[D] lengthscale ~ inv_gamma(5, 5);
  {extra}
}}
model {{
  f ~ gp(X, sigma * rbf(lengthscale = lengthscale));
  y ~ {likelihood};
}}
"""
ZINB = COUNTS.format(extra="real<lower=0> phi ~ gamma(4, 1);\n  real<lower=0, upper=1> zi ~ uniform(0, 1);",
                     likelihood="zero_inflated_neg_binomial_2_log(f, phi, zi)")
HURDLE = COUNTS.format(extra="real<lower=0, upper=1> hu ~ uniform(0, 1);", likelihood="hurdle_poisson_log(f, hu)")
GIBBS = GibbsSettings(chains=4, warmup=1000, draws=4000)
CASES = {
    "zero_inflated_poisson": ("models/gp_zero_inflated_poisson.gpm", GIBBS, ["sigma", "lengthscale", "zi"]),
    "zero_inflated_neg_binomial": (ZINB, GIBBS, ["sigma", "lengthscale", "phi", "zi"]),
    "hurdle_poisson": (HURDLE, PseudoMarginalSettings(chains=4, warmup=1000, draws=4000, approximation="laplace",
                                                      sample_latent=True),
                       ["sigma", "lengthscale", "hu"]),
}


def checked(model: str):
    return (check_text(model) if "\n" in model else check_file(model))[0]


def zero_inflated_data(seed=4, zi=0.3):
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(0, 4, N))
    counts = rng.poisson(np.exp(np.sin(1.5 * x) + 0.8))
    return {"N": N, "D": 1, "X": x[:, None], "y": np.where(rng.uniform(size=N) < zi, 0, counts)}


def replicate_statistics(results) -> xr.Dataset:
    """Per draw: the mean and the fraction of zeros of the replicates of ``y``."""
    replicates = groups(results)["posterior_predictive"]["y"]
    observations = [d for d in replicates.dims if d not in ("chain", "draw")]
    return xr.Dataset({"mean": replicates.mean(observations), "zeros": (replicates == 0).mean(observations)})


@pytest.mark.parametrize("case", ["zero_inflated_poisson", "zero_inflated_neg_binomial"])
def test_laplace_refuses_a_zero_inflated_model_and_says_why(case):
    model, data = checked(CASES[case][0]), zero_inflated_data()
    with pytest.raises(MethodError, match=r"zero_inflated_\w+, which is not \(at y = 0 it mixes a point mass"):
        gpdsl.sample(model, data, "pm", seed=1, chains=1, warmup=5, draws=5, approximation="laplace")
    # EP takes them with quadrature tilted moments
    assert np.all(np.isfinite(gpdsl.sample(model, data, "mcmc-ep", seed=1, chains=1, warmup=5, draws=5)
                              .posterior["sigma"]))


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_an_engine_agrees_with_nuts_on_extra_zeros(case):
    model_text, settings, names = CASES[case]
    model, data = checked(model_text), zero_inflated_data()
    method = "gibbs" if isinstance(settings, GibbsSettings) else "pm"
    ours = run(model, data, method, settings, seed=5)
    nuts = run(model, data, "nuts", NUTSSettings(chains=4, warmup=1000, draws=1000), seed=6)
    failures = disagreements(ours, nuts, names)
    failures += disagreements(replicate_statistics(ours), replicate_statistics(nuts), ["mean", "zeros"])
    assert not failures, f"posterior means differ by more than 4 combined MCSEs for {failures}"
