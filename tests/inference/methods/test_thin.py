"""``thin``: gpdsl's chains keep the first of every ``thin`` iterations after warmup, as Stan does, and record it."""

import json

import numpy as np
import pytest

import gpdsl
from gpdsl.errors import GpdslError

MODEL = "models/gp_classification.gpm"


def classification_data() -> dict:
    rng = np.random.default_rng(4)
    X = rng.normal(size=(12, 2))
    return {"N": 12, "D": 2, "X": X, "y": (X[:, 0] + 0.3 * rng.normal(size=12) > 0).astype(int)}


@pytest.mark.parametrize("method, settings, names", [
    pytest.param("gibbs", {}, None, marks=pytest.mark.slow),  # the same driver call as pm's (latent_chains)
    ("pm", {"num_importance": 2}, ["tau", "sigma"]),
])
def test_a_thinned_chain_is_every_thin_th_draw_of_the_unthinned_one(method, settings, names):
    common = dict(chains=2, warmup=10, seed=3, progress=False, **settings)
    thinned = gpdsl.sample(MODEL, classification_data(), method, draws=4, thin=3, **common)
    every = gpdsl.sample(MODEL, classification_data(), method, draws=12, **common)
    names = names or list(every.posterior.data_vars)
    for name in names:
        assert thinned.posterior[name].sizes["draw"] == 4
        np.testing.assert_array_equal(thinned.posterior[name].values, every.posterior[name].values[:, ::3])
    assert json.loads(thinned.attrs["settings"])["thin"] == 3


def test_thin_is_checked_before_the_run():
    with pytest.raises(GpdslError, match="thin"):
        gpdsl.sample(MODEL, classification_data(), "gibbs", chains=1, warmup=2, draws=2, thin=0)
