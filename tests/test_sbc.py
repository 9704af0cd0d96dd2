"""Simulation-based calibration: the harness on exact and wrong samplers, its report, then every exact engine of
gpdsl on its case of :mod:`gpdsl.testing.sbc_cases` (slow).

The engine runs vectorise hundreds of chains, whose batched LAPACK calls have deadlocked XLA's
multi-threaded CPU pool (jaxlib 0.10.2); single-threaded Eigen avoids it. The flag only takes effect
if no JAX computation ran before this module was imported.
"""

import os

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false").strip()

import json  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from gpdsl.api import check_text  # noqa: E402
from gpdsl.settings.sampling import THETA_UPDATES  # noqa: E402
from gpdsl.testing.sbc import run_sbc, thin_draws  # noqa: E402
from gpdsl.testing.sbc_cases import CASES, case, run_case  # noqa: E402
from gpdsl.testing.sbc_report import case_record, result_of, write_outputs  # noqa: E402

CONJUGATE_NORMAL = """
data { int N; vector[N] y; }
parameters { real mu ~ normal(0, 1); }
model { y ~ normal(mu, 1); }
"""
NORMAL_DATA = {"N": 5, "y": np.zeros(5)}

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


def test_every_exact_engine_has_a_case():
    covered = {(c.method, getattr(c.settings, "theta_update", None) or getattr(c.settings, "approximation", None))
               for c in CASES}
    assert {("gibbs", update) for update in THETA_UPDATES} <= covered
    assert {("pm", "ep"), ("pm", "laplace"), ("sequential", None), ("pm-gplvm", None), ("nuts", None)} <= covered
    assert not {c.method for c in CASES} & {"mcmc-ep", "ep-ml"}
    assert len({c.name for c in CASES}) == len(CASES) and len({c.seed for c in CASES}) == len(CASES)
    assert all(c.replicates >= 100 for c in CASES)


def test_case_settings_name_the_engine_and_what_differs_from_the_defaults():
    text = case("gibbs-sa").settings_text()
    assert "theta_update=sa" in text and "draws=4000" in text and "repeat_f=5" in text
    assert "target_acceptance" not in text
    with pytest.raises(KeyError, match="gibbs-surr"):
        case("no-such-case")


def test_report_keeps_the_ranks_and_writes_a_png_and_the_table(normal_model, tmp_path):
    result = run_sbc(normal_model, NORMAL_DATA, exact_sampler(), num_replicates=100, num_posterior_draws=19, seed=4)
    record = json.loads(json.dumps(case_record(case("gibbs-surr"), result)))
    again = result_of(record)
    assert again.uniformity().round(4).equals(result.uniformity().round(4))
    out = tmp_path / "validation"
    out.mkdir()
    (out / "gibbs-surr.json").write_text(json.dumps(record))
    page = tmp_path / "validation.md"
    page.write_text("# Title\n\ntext before\n\n<!-- sbc-table:start -->\nold\n<!-- sbc-table:end -->\n\ntext after\n")
    write_outputs(out, page)
    text = page.read_text()
    assert "text before" in text and "text after" in text and "old" not in text
    assert "| [gibbs-surr](validation/gibbs-surr.png) | `gibbs` |" in text
    assert "| yes |" in text
    png = out / "gibbs-surr.png"
    assert png.read_bytes()[:4] == b"\x89PNG" and png.stat().st_size < 100_000


@pytest.mark.slow
@pytest.mark.parametrize("entry", CASES, ids=lambda c: c.name)
def test_engine_is_calibrated(entry):
    result, fit = run_case(entry)
    print(f"\n{entry.name}: {result.seconds:.0f} s, fits {result.info['fit_seconds']:.0f} s, "
          f"{ {k: round(v, 1) for k, v in getattr(fit, 'timings', {}).items()} }")
    print(result.report())
    assert result.passes(0.001), result.report()
