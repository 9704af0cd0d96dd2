"""gibbs on a Hilbert-space approximate GP (elliptical slice sampling of the basis weights, hyperparameter updates with
the weights fixed) and Stan's NUTS on the same HSGP program agree on the hyperparameters' posterior means, and on the
replicates' mean, within four combined Monte Carlo standard errors (slow tier): models/gp_hsgp.gpm, 60 counts; with
SURR, with SA, which keeps the basis coefficients fixed, and with AA, which keeps the whitened weights fixed.
gibbs's predictions at the training inputs are its f draws."""

import numpy as np
import pytest

from gpdsl.api import check_file, run
from gpdsl.settings import GibbsSettings, NUTSSettings
from tests.inference.methods.test_pm_vs_nuts import disagreements
from tests.inference.methods.test_zero_inflated_vs_nuts import replicate_statistics


def counts(seed=7, n=60):
    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(0, 10, n))
    return {"N": n, "t": t, "y": rng.poisson(np.exp(0.5 + np.sin(t)))}


@pytest.fixture(scope="module")
def nuts_run():
    model, data = check_file("models/gp_hsgp.gpm")[0], counts()
    return run(model, data, "nuts", NUTSSettings(chains=4, warmup=1000, draws=1000), seed=6)


@pytest.mark.slow
@pytest.mark.parametrize("theta_update", ["surr", "sa", "aa"])
def test_gibbs_on_the_weights_agrees_with_nuts(nuts_run, theta_update):
    """``surr`` moves the hyperparameters with the weights fixed; ``sa`` with the basis coefficients fixed; ``aa`` with
    the whitened weights fixed, ``f`` moving with them."""
    model, data = check_file("models/gp_hsgp.gpm")[0], counts()
    ours = run(model, data, "gibbs", GibbsSettings(chains=4, warmup=1000, draws=4000, theta_update=theta_update),
               seed=5, new_inputs=data["t"][:5])
    np.testing.assert_allclose(ours.predictions["f_new"].values, ours.posterior["f"].values[..., :5], atol=1e-9)
    failures = disagreements(ours, nuts_run, ["mu", "sigma", "ell"])
    failures += disagreements(replicate_statistics(ours), replicate_statistics(nuts_run), ["mean", "zeros"])
    assert not failures, f"posterior means differ by more than 4 combined MCSEs for {failures}"
