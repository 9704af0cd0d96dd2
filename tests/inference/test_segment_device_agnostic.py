"""Every compiled segment stays on the device: no host callback in the jaxpr the driver compiles.

For every shipped model (``models/*.gpm``) and every chain method the listing says runs it (``pm``, ``mcmc-ep``,
``gibbs``, ``pm-gplvm``, ``sequential``: the engines that run :func:`gpdsl.inference.driver.run_chains`), the run is
prepared and started on small data with a chain executor (:data:`gpdsl.inference.driver.CHAIN_EXECUTOR`) that
takes the segment function the driver would compile (:func:`gpdsl.inference.driver.segment_function`), traces it
(``jax.make_jaxpr``) and stops the run. Its jaxpr, nested jaxprs included (scans, conds, shard_map, custom rules),
must hold no host callback primitive: then a segment runs on a GPU without a round trip to the host.

The one documented exception is an external likelihood written in NumPy (:mod:`gpdsl.externals`), which runs on
the host through ``jax.pure_callback``: the last test shows that the check sees it. ``models/local_volatility.gpm``
is checked here with a JAX external likelihood, which is compiled with the segment, and so is the pricing model
with the JAX Dupire pricer (``gpdsl.testing.local_volatility``).
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gpdsl.api import check_file, execute, prepare
from gpdsl.inference.driver import CHAIN_EXECUTOR, segment_function
from gpdsl.registry import methods
from tests.test_methods_answers import SHIPPED, answers, small_data, smallest_settings

CHAIN_METHODS = ("pm", "mcmc-ep", "gibbs", "pm-gplvm", "sequential")
CALLBACKS = ("pure_callback", "io_callback", "callback", "debug_callback", "outside_call", "host_callback")


class _Traced(Exception):
    def __init__(self, jaxpr):
        super().__init__("traced")
        self.jaxpr = jaxpr


def segment_jaxpr(run_block, num_chains):
    """A chain executor that traces the driver's segment (two iterations, warmup) and stops the run."""
    step_fn, initial_states, rng_key = run_block.args[:3]
    options = run_block.keywords
    segment = segment_function(step_fn, rng_key, num_chains, extract=options["extract"],
                               vectorised=options["vectorised"])
    states = jax.tree.map(jnp.asarray, initial_states)
    key = rng_key if jnp.issubdtype(jnp.asarray(rng_key).dtype, jax.dtypes.prng_key) else \
        jax.random.wrap_key_data(jnp.asarray(rng_key, dtype=jnp.uint32))
    jaxpr = jax.make_jaxpr(segment, static_argnums=4)(key, states, jnp.asarray(0, jnp.int32), jnp.asarray(True), 2)
    raise _Traced(jaxpr)


def primitives(jaxpr) -> set[str]:
    """The names of every primitive of ``jaxpr`` and of the jaxprs nested in its equations' parameters."""
    jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
    found = set()
    for equation in jaxpr.eqns:
        found.add(equation.primitive.name)
        for value in equation.params.values():
            for nested in value if isinstance(value, (tuple, list)) else (value,):
                if hasattr(nested, "eqns") or hasattr(getattr(nested, "jaxpr", None), "eqns"):
                    found |= primitives(nested)
    return found


CHEAPEST_FIRST = ("gibbs", "mcmc-ep", "pm", "sequential")
"""The default tier traces each model's cheapest chain method to start (``pm-gplvm`` first fits a variational
GPLVM: about 40 s a model here); the slow tier traces every other pair."""


def chain_pairs() -> list:
    pairs = []
    for path in SHIPPED:
        model = check_file(path)[0]
        runs = [method for method, values, refusal in answers(model)
                if method in CHAIN_METHODS and not values and refusal is None]
        quick = next((method for method in CHEAPEST_FIRST if method in runs), None)
        pairs += [pytest.param(path.stem, method, id=f"{path.stem}-{method}",
                               marks=() if method == quick else pytest.mark.slow) for method in runs]
    return pairs


PAIRS = chain_pairs()


@pytest.fixture(scope="module")
def external_module(tmp_path_factory):
    """``mypkg.pricing:dupire_call_prices``, the name ``models/local_volatility.gpm`` gives, as a JAX or a NumPy
    Gaussian likelihood."""
    root = tmp_path_factory.mktemp("external")
    package = root / "mypkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "pricing.py").write_text("from gpdsl.testing.external_likelihoods import normal_jax as "
                                        "dupire_call_prices  # noqa: F401\n")
    (package / "numpy_pricing.py").write_text("from gpdsl.testing.external_likelihoods import normal_numpy as "
                                              "dupire_call_prices  # noqa: F401\n")
    sys.path.insert(0, str(root))
    yield root
    sys.path.remove(str(root))
    for module in [m for m in sys.modules if m == "mypkg" or m.startswith("mypkg.")]:
        del sys.modules[module]


def traced_segment(model, method: str, data=None):
    settings = methods()[method].settings_from(smallest_settings(method))
    data = small_data(model) if data is None else data
    prepared = prepare(model, data, method, settings, seed=1, allow_external=True)
    token = CHAIN_EXECUTOR.set(segment_jaxpr)
    try:
        execute(prepared)
    except Exception as error:  # the sequential sampler reports a failed step, caused by the stop
        while error is not None and not isinstance(error, _Traced):
            error = error.__cause__
        if error is None:
            raise
        return error.jaxpr
    finally:
        CHAIN_EXECUTOR.reset(token)
    raise AssertionError(f"{method} finished without running a compiled segment")


def test_the_sweep_covers_every_chain_method():
    assert {pair.values[1] for pair in PAIRS} == set(CHAIN_METHODS)


@pytest.mark.parametrize("name, method", PAIRS)
def test_no_host_callback_in_a_segment(name, method, external_module):
    model = check_file(f"models/{name}.gpm")[0]
    found = primitives(traced_segment(model, method))
    assert "scan" in found, f"{name} with {method}: the traced segment is not the driver's loop"
    assert not found & set(CALLBACKS), f"{name} with {method}: host callbacks {sorted(found & set(CALLBACKS))}"


def test_a_numpy_external_likelihood_is_the_documented_host_callback(external_module):
    text = open("models/local_volatility.gpm").read().replace("mypkg.pricing:", "mypkg.numpy_pricing:")
    assert "mypkg.numpy_pricing:" in text
    from gpdsl.api import check_text

    model = check_text(text)[0]
    method = next(m for m, values, refusal in answers(model) if m in CHAIN_METHODS and refusal is None)
    assert "pure_callback" in primitives(traced_segment(model, method))


PRICING = """
data {
  int T; int N; int K; int M;
  vector[T] t;
  array[T] matrix[N, 2] X;
  array[T] vector[N] c;
  array[T] vector[K] strikes;
  vector[M] maturities;
  vector[T] spot;
}
parameters {
  vector[4] kappa ~ scaled_sigmoid_normal(lower = 0, upper = [1, 1, 1, 1]);
  vector[2] alpha ~ scaled_sigmoid_normal(lower = [-3, 0], upper = [0, 0.5]);
}
model {
  f ~ gp((t, X), kappa[4]^2 * rbf(t, lengthscale = kappa[3]) * rbf(X, lengthscale = kappa[1:2]));
  for (i in 1:T) {
    c[i] ~ external("gpdsl.testing.local_volatility:call_price_log_likelihood",
                    softplus(f[i] + alpha[1]), alpha[2], spot[i], strikes[i], maturities);
  }
}
"""
"""The pricing model of Tegner et al. (2018, Sec. 4.2) with the JAX Dupire pricer as its external likelihood."""


def pricing_data() -> dict:
    """Two dates of 3 strikes x 2 maturities, priced at a volatility of 0.2."""
    from gpdsl.testing.local_volatility import dupire_call_prices

    strikes, maturities, spot = np.array([[1.1, 1.0, 0.9], [1.2, 1.0, 0.8]]) * 100, np.array([0.25, 0.5]), [100, 100]
    prices = [np.asarray(dupire_call_prices(np.full((2, 3), 0.2), 100.0, k[::-1], maturities))[:, ::-1].T.ravel()
              for k in strikes]
    X = np.stack([np.repeat(np.linspace(0, 1, 3), 2), np.tile([0.0, 1.0], 3)], axis=1)
    return {"T": 2, "N": 6, "K": 3, "M": 2, "t": np.array([0.0, 1.0]), "X": np.stack([X, X]), "c": np.stack(prices),
            "strikes": strikes, "maturities": maturities, "spot": np.asarray(spot, float)}


def test_a_jax_external_likelihood_runs_inside_the_segment():
    from gpdsl.api import check_text

    model = check_text(PRICING)[0]
    found = primitives(traced_segment(model, "sequential", pricing_data()))
    assert "scan" in found
    assert not found & set(CALLBACKS)
