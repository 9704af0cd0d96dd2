"""gibbs on a latent state-space GP under a Poisson likelihood (ESS on the innovations, SURR updates of the
hyperparameters) agrees with Stan's NUTS on the same model and parameterisation (slow tier): 100 daily counts on a
smooth log rate, ``models/gp_state_space_poisson.gpm``. For each hyperparameter and ``f`` at five times the posterior
means differ by less than four combined Monte Carlo standard errors; so do the replicates' mean and the predictions
of ``f`` at two new times (one inside the series, one past its end), NUTS's from the same draw groups.
"""

import numpy as np
import pytest
import xarray as xr

from gpdsl.api import check_file, run
from gpdsl.results.arviz_compat import groups
from gpdsl.settings import GibbsSettings, NUTSSettings
from tests.inference.methods.test_pm_vs_nuts import disagreements
from tests.inference.methods.test_zero_inflated_vs_nuts import replicate_statistics

N = 100


def daily_counts(seed=3):
    rng = np.random.default_rng(seed)
    t = np.sort(rng.choice(np.arange(140.0), N, replace=False))  # days, with gaps
    rate = np.exp(1.0 + 0.8 * np.sin(t / 12.0))
    return {"N": N, "t": t, "y": rng.poisson(rate)}


def compared(results) -> xr.Dataset:
    """The hyperparameters, ``f`` at five of the times and the predictions of ``f`` at the new times."""
    posterior = groups(results)["posterior"]
    f = posterior["f"]
    dataset = posterior[["mu", "alpha", "ell"]].assign(f=f.isel({f.dims[2]: [0, 25, 50, 75, 99]}))
    return dataset.assign(f_new=groups(results)["predictions"]["f_new"].transpose("chain", "draw", ...))


@pytest.mark.slow
def test_gibbs_agrees_with_nuts_on_a_poisson_series():
    model, _ = check_file("models/gp_state_space_poisson.gpm")
    data = daily_counts()
    new = np.array([[70.5], [150.0]])
    gibbs = run(model, data, "gibbs", GibbsSettings(chains=4, warmup=1000, draws=4000, repeat_f=2),
                seed=5, new_inputs=new)
    nuts = run(model, data, "nuts", NUTSSettings(chains=4, warmup=1000, draws=1000), seed=6, new_inputs=new)
    failures = disagreements(compared(gibbs), compared(nuts), ["mu", "alpha", "ell", "f", "f_new"])
    failures += disagreements(replicate_statistics(gibbs), replicate_statistics(nuts), ["mean"])
    assert not failures, f"posterior means differ by more than 4 combined MCSEs for {failures}"
