"""Simulation-based calibration: the harness on exact and wrong samplers, then gpdsl's engines (slow).

The engine runs vectorise hundreds of chains, whose batched LAPACK calls have deadlocked XLA's
multi-threaded CPU pool (jaxlib 0.10.2); single-threaded Eigen avoids it. The flag only takes effect
if no JAX computation ran before this module was imported.
"""

import os

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false").strip()

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from gpdsl.api import check_text  # noqa: E402
from gpdsl.settings import GibbsSettings  # noqa: E402
from gpdsl.settings import PseudoMarginalSettings  # noqa: E402
from gpdsl.testing.sbc import EngineFit, run_sbc, thin_draws  # noqa: E402

CONJUGATE_NORMAL = """
data { int N; vector[N] y; }
parameters { real mu ~ normal(0, 1); }
model { y ~ normal(mu, 1); }
"""
NORMAL_DATA = {"N": 5, "y": np.zeros(5)}

PAPER_CLASSIFICATION_1D = """
data { int N; matrix[N, 1] X; array[N] int<lower=0, upper=1> y; }
parameters {
  real<lower=0> sigma ~ gamma(1.2, 0.2);
  real<lower=0> tau ~ gamma(1, 1);
}
model {
  f ~ gp(X, sigma * rbf(lengthscale = tau));
  y ~ bernoulli_probit(f);
}
"""
N_CLASSIFICATION = 20


def conjugate_posterior(data):
    precision = 1.0 + data["N"]
    return np.sum(data["y"]) / precision, 1.0 / np.sqrt(precision)


def exact_sampler(sd_factor=1.0, autocorrelation=0.0, chains=2, draws=500):
    """Posterior draws of mu: exact, overconfident (``sd_factor`` < 1), or a stationary AR(1) chain."""

    def fit(model, data, seed):
        rng = np.random.default_rng(seed)
        mean, sd = conjugate_posterior(data)
        sd = sd * sd_factor
        x = np.empty((chains, draws))
        x[:, 0] = rng.normal(size=chains)
        innovation = np.sqrt(1 - autocorrelation ** 2)
        for t in range(1, draws):
            x[:, t] = autocorrelation * x[:, t - 1] + innovation * rng.normal(size=chains)
        return {"mu": mean + sd * x}

    return fit


@pytest.fixture(scope="module")
def normal_model():
    return check_text(CONJUGATE_NORMAL)[0]


def test_exact_sampler_gives_uniform_ranks(normal_model):
    result = run_sbc(normal_model, NORMAL_DATA, exact_sampler(), num_replicates=300, num_posterior_draws=49,
                     seed=0, thin="none")
    assert result.ranks.shape == (300, 1) and result.element_names == ["mu"]
    assert np.all(result.num_draws == 49)
    assert np.all((result.ranks >= 0) & (result.ranks <= 49))
    assert result.passes(), result.report()


def test_autocorrelated_exact_chain_passes_after_ess_thinning(normal_model):
    result = run_sbc(normal_model, NORMAL_DATA, exact_sampler(autocorrelation=0.9), num_replicates=200,
                     num_posterior_draws=30, seed=1, thin="ess")
    assert np.all(np.isfinite(result.ess)) and np.mean(result.ess) < 500
    assert result.passes(), result.report()


@pytest.mark.parametrize("sampler", [exact_sampler(sd_factor=0.5), exact_sampler(sd_factor=2.0)],
                         ids=["overconfident", "underconfident"])
def test_wrong_sampler_is_flagged(normal_model, sampler):
    result = run_sbc(normal_model, NORMAL_DATA, sampler, num_replicates=300, num_posterior_draws=49, seed=2,
                     thin="none")
    assert not result.passes(), result.report()
    assert result.min_pvalue() < 1e-6


def test_thinning_by_ess_keeps_at_most_the_requested_draws():
    draws = np.arange(2000.0).reshape(2, 1000)
    assert thin_draws(draws, 50, ess=100).size == 50
    assert thin_draws(draws, 50, ess=20).size == 20
    assert thin_draws(draws, 50).size == 50
    kept = thin_draws(draws, 1000, ess=100)
    assert np.all(np.diff(kept[:10]) == 20)


def test_report_has_a_histogram_per_element(normal_model):
    result = run_sbc(normal_model, NORMAL_DATA, exact_sampler(), num_replicates=40, num_posterior_draws=19, seed=3)
    text = result.report()
    assert "mu: chi2 p = " in text
    assert text.count("[0.") == result.default_bins()


def classification_setup():
    model = check_text(PAPER_CLASSIFICATION_1D)[0]
    X = np.linspace(0.0, 1.0, N_CLASSIFICATION)[:, None]
    return model, {"N": N_CLASSIFICATION, "X": X, "y": np.zeros(N_CLASSIFICATION, int)}


def run_engine_sbc(method, settings, replicates, seed):
    model, base_data = classification_setup()
    fit = EngineFit(method, settings, chains=2, warmup=200, draws=400)
    result = run_sbc(model, base_data, fit, num_replicates=replicates, num_posterior_draws=50, seed=seed)
    print(f"\n{method} ({settings}): fits {result.info['fit_seconds']:.0f} s, engine timings "
          f"{ {k: round(v, 1) for k, v in fit.timings.items()} }")
    print(result.report())
    print(result.uniformity().to_string())
    return result


@pytest.mark.slow
def test_sbc_ess_surr():
    settings = GibbsSettings(theta_update="surr", repeat_f=5, repeat_theta=5)
    result = run_engine_sbc("gibbs", settings, replicates=200, seed=11)
    assert result.passes(0.001)


@pytest.mark.slow
def test_sbc_pseudo_marginal_ep():
    settings = PseudoMarginalSettings(approximation="ep", num_importance=4)
    result = run_engine_sbc("pm", settings, replicates=200, seed=12)
    assert result.passes(0.001)
