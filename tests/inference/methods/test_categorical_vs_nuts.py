"""Multiclass GP classification, ``y ~ categorical_logit(f)`` with ``matrix[N, K] f`` of independent GP columns.

Fast tier: the data check names a label outside ``1..K``; the methods on expectation propagation (pm's default,
mcmc-ep, ep-ml) refuse the model, say why and name pm's multiclass Laplace approximation.

Slow tier: a short gibbs run fills the posterior (``f`` as ``(chain, draw, N, K)``), ``log_likelihood`` (each
equal to the softmax's log probability of the observed label at the recorded ``f``) and ``posterior_predictive``
(labels in ``1..K``). On 15 points of a three-class problem over one input, gibbs (ESS of the latent matrix),
pm with the multiclass Laplace approximation as importance density (and exact draws of ``f``) and Stan's NUTS
agree on the posterior means of the hyperparameters, of the class probabilities ``softmax(f[n])`` at five
points, of the replicates' class frequencies, and of the class probabilities ``softmax(f*)`` at four new inputs
(the predictions group; NUTS's from the GP conditional given its draws of ``f``), within four combined Monte Carlo
standard errors.
"""

import numpy as np
import pytest
import xarray as xr
from scipy.special import softmax

import gpdsl
from gpdsl.api import check_file, run
from gpdsl.errors import DataError, MethodError
from gpdsl.registry import get_method
from gpdsl.results.arviz_compat import groups
from gpdsl.settings import GibbsSettings, NUTSSettings, PseudoMarginalSettings
from tests.inference.methods.test_pm_vs_nuts import disagreements

MODEL = "models/gp_multiclass.gpm"
SHOWN_POINTS = [0, 4, 7, 10, 14]
NEW_INPUTS = np.array([[-1.6], [-0.2], [0.5], [2.4]])


def three_class_data(N=15, seed=3):
    """Labels 1, 2, 3 from the left, middle and right of ``(-2, 2)``, one in five drawn at random instead."""
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(-2, 2, N))
    y = np.where(x < -0.7, 1, np.where(x < 0.7, 2, 3))
    noisy = rng.uniform(size=N) < 0.2
    y[noisy] = rng.integers(1, 4, noisy.sum())
    return {"N": N, "D": 1, "K": 3, "X": x[:, None], "y": y}


def class_probabilities(results) -> xr.Dataset:
    """Per draw: ``softmax(f[n])`` at :data:`SHOWN_POINTS` and the replicates' frequency of each class."""
    found = groups(results)
    f = found["posterior"]["f"].transpose("chain", "draw", "N", "K").values
    replicates = found["posterior_predictive"]["y"].transpose("chain", "draw", ...).values
    frequencies = np.stack([(replicates == k).mean(axis=-1) for k in (1, 2, 3)], axis=-1)
    return xr.Dataset({"p": (("chain", "draw", "point", "class"), softmax(f[:, :, SHOWN_POINTS], axis=-1)),
                       "frequency": (("chain", "draw", "class"), frequencies)})


def new_class_probabilities(results) -> xr.Dataset:
    """Per draw: ``softmax(f*[j])`` at each of :data:`NEW_INPUTS` (the predictions group's ``y_prob``)."""
    probabilities = groups(results)["predictions"]["y_prob"].transpose("chain", "draw", "N_new", "K").values
    return xr.Dataset({"p_new": (("chain", "draw", "point", "class"), probabilities)})


def test_a_label_outside_the_classes_is_named():
    model, _ = check_file(MODEL)
    data = three_class_data()
    data["y"][5] = 4
    with pytest.raises(DataError, match=r"y\[6\] = 4"):
        gpdsl.sample(model, data, "gibbs", seed=1, chains=1, warmup=2, draws=2)


@pytest.mark.parametrize("method", ["pm", "mcmc-ep", "ep-ml"])
def test_expectation_propagation_refuses_it_and_names_the_laplace_approximation(method):
    model, _ = check_file(MODEL)
    refusal = get_method(method).refusal(model)
    assert "expectation propagation takes one latent value per observation" in refusal
    assert "--approximation laplace" in refusal
    with pytest.raises(MethodError, match="categorical_logit, with a row of latent values per observation"):
        run(model, three_class_data(), method, seed=1)
    assert get_method("pm").refusal(model, settings=PseudoMarginalSettings(approximation="laplace")) is None


@pytest.mark.slow
def test_gibbs_fills_the_posterior_and_the_pointwise_groups():
    model, _ = check_file(MODEL)
    data = three_class_data()
    found = groups(run(model, data, "gibbs", GibbsSettings(chains=2, warmup=5, draws=30), seed=2))
    f = found["posterior"]["f"].transpose("chain", "draw", "N", "K").values
    assert f.shape == (2, 30, 15, 3)
    log_lik = found["log_likelihood"]["y"].transpose("chain", "draw", ...).values
    log_probabilities = np.log(softmax(f, axis=-1))
    expected = np.take_along_axis(log_probabilities, (data["y"] - 1)[None, None, :, None], axis=-1)[..., 0]
    np.testing.assert_allclose(log_lik, expected, rtol=1e-10)
    replicates = found["posterior_predictive"]["y"].values
    assert replicates.shape == (2, 30, 15) and set(np.unique(replicates)) <= {1, 2, 3}


ENGINES = {
    "gibbs": GibbsSettings(chains=4, warmup=1000, draws=4000),
    "pm": PseudoMarginalSettings(chains=4, warmup=1000, draws=4000, approximation="laplace", num_importance=4,
                                 sample_latent=True),
}


@pytest.fixture(scope="module")
def nuts_reference():
    model, _ = check_file(MODEL)
    return run(model, three_class_data(), "nuts", NUTSSettings(chains=4, warmup=1000, draws=1000), seed=6,
               new_inputs=NEW_INPUTS)


@pytest.mark.slow
@pytest.mark.parametrize("method", list(ENGINES))
def test_an_engine_agrees_with_nuts_on_class_probabilities(method, nuts_reference):
    model, _ = check_file(MODEL)
    ours = run(model, three_class_data(), method, ENGINES[method], seed=5, new_inputs=NEW_INPUTS)
    failures = disagreements(ours, nuts_reference, ["sigma", "ell"])
    failures += disagreements(class_probabilities(ours), class_probabilities(nuts_reference), ["p", "frequency"])
    failures += disagreements(new_class_probabilities(ours), new_class_probabilities(nuts_reference), ["p_new"])
    assert not failures, f"posterior means differ by more than 4 combined MCSEs for {failures}"


def test_simulated_labels_follow_the_simulated_latent_matrix():
    """Draws from the model: ``f`` of shape ``(N, K)`` and labels in ``1..K``; with ``f`` held at 40 times a one-hot
    row per point (the other classes have probability ``e^-40``) the labels are those classes."""
    import jax

    from gpdsl.backends.jax.lowering import lower
    from gpdsl.backends.jax.simulate import simulate

    model, _ = check_file(MODEL)
    data = three_class_data(N=6)
    jax_model = lower(model, data)
    truth, observed = simulate(jax_model, jax.random.PRNGKey(3))
    assert np.asarray(truth["f"]).shape == (6, 3)
    assert set(np.unique(observed["y"])) <= {1, 2, 3} and np.asarray(observed["y"]).shape == (6,)
    classes = np.array([3, 1, 2, 2, 1, 3])
    _, observed = simulate(jax_model, jax.random.PRNGKey(4), fixed={"f": 40.0 * np.eye(3)[classes - 1]})
    np.testing.assert_array_equal(observed["y"], classes)
