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


def test_pm_predicts_from_each_draws_weights_or_from_the_approximation_at_each_draw():
    """With ``sample_latent`` the predictions at the training inputs are pm's draws of f (the basis at the inputs
    times each draw's weights); without, each draw's weights come from the Laplace approximation at it, so the
    predictions exist (and no pointwise groups, which need f)."""
    import numpy as np

    model, data = check_file("models/gp_hsgp.gpm")[0], counts()
    new = np.r_[data["t"][:10], 10.5]
    settings = dict(chains=2, warmup=100, draws=50, approximation="laplace", num_importance=2)
    kept = run(model, data, "pm", PseudoMarginalSettings(**settings, sample_latent=True), seed=5, new_inputs=new)
    f_new = kept.predictions["f_new"].values
    assert f_new.shape == (2, 50, 11) and np.isfinite(f_new).all()
    np.testing.assert_allclose(f_new[..., :10], kept.posterior["f"].values[..., :10], atol=1e-8)
    assert "y" in kept.log_likelihood
    alone = run(model, data, "pm", PseudoMarginalSettings(**settings), seed=5, new_inputs=new)
    assert alone.predictions["f_new"].shape == (2, 50, 11) and np.isfinite(alone.predictions["f_new"].values).all()
    assert "f" not in alone.posterior and not hasattr(alone, "log_likelihood")
