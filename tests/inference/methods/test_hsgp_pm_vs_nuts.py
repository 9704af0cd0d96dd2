"""pm on a Hilbert-space approximate GP (pseudo-marginal MH on the hyperparameters, p(y | theta) estimated by
importance sampling from the Laplace approximation or EP of the basis weights) and Stan's NUTS on the same HSGP program
agree on the hyperparameters' posterior means and on the replicates' statistics within four combined Monte Carlo
standard errors, both runs converged (split R-hat below 1.01, bulk ESS at least 400) (slow tier): models/gp_hsgp.gpm,
60 counts."""

import time

import pytest

from gpdsl.api import check_file, run
from gpdsl.settings import NUTSSettings, PseudoMarginalSettings
from tests.inference.methods.test_hsgp_gibbs_vs_nuts import counts
from tests.inference.methods.test_kernels_vs_nuts import convergence_problems
from tests.inference.methods.test_pm_vs_nuts import disagreements
from tests.inference.methods.test_zero_inflated_vs_nuts import replicate_statistics

NAMES = ["mu", "sigma", "ell"]


@pytest.mark.slow
@pytest.mark.parametrize("approximation", ["laplace", "ep"])
def test_pm_on_the_weights_agrees_with_nuts(approximation):
    model, data = check_file("models/gp_hsgp.gpm")[0], counts()
    start = time.perf_counter()
    ours = run(model, data, "pm", PseudoMarginalSettings(chains=4, warmup=1000, draws=6000, approximation=approximation,
                                                         num_importance=8, sample_latent=True), seed=5)
    middle = time.perf_counter()
    nuts = run(model, data, "nuts", NUTSSettings(chains=4, warmup=1000, draws=1000), seed=6)
    print(f"\npm ({approximation}) {middle - start:.0f} s, NUTS {time.perf_counter() - middle:.0f} s")
    problems = convergence_problems(ours, NAMES, "pm") + convergence_problems(nuts, NAMES, "nuts")
    assert not problems, problems
    failures = disagreements(ours, nuts, NAMES)
    failures += disagreements(replicate_statistics(ours), replicate_statistics(nuts), ["mean", "zeros"])
    assert not failures, f"posterior means differ by more than 4 combined MCSEs for {failures}"
