"""Matrix products and reductions: their types, their shape errors, their JAX values (against NumPy) the results'
NumPy evaluator, and their Stan spelling (checked by stanc)."""

import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import gpdsl.numerics.float64  # noqa: F401
from gpdsl.api import check_text
from gpdsl.backends.jax.lowering import lower
from gpdsl.backends.stan.codegen import generate_stan
from gpdsl.backends.stan.stanc import check_program
from gpdsl.errors import GpdslError
from gpdsl.ir import nodes as ir
from gpdsl.ir.values import value

MODEL = """
data { int N; int K; matrix[N, K] PHI; matrix[K, 2] B; matrix[N, K] C; vector[N] x; vector[N] y; }
parameters { vector[K] z ~ normal(0, 1); real a ~ normal(0, 1); real<lower=0> s ~ half_normal(1); }
model {
  y ~ normal(MEAN, s);
}
"""


def _mean(expression: str) -> ir.Expr:
    model, _ = check_text(MODEL.replace("MEAN", expression))
    return model.statements[-1].distribution.arg("mu")


@pytest.mark.parametrize("expression, node, described", [
    ("PHI * z", ir.MatrixProduct, "vector[N]"),
    ("(PHI * B)[:, 1]", ir.Index, "vector[N]"),
    ("(PHI * C)[:, 1]", ir.Index, "vector[N]"),   # the same shape: element by element
    ("sum(z) + x", ir.Binary, "vector[N]"),
    ("mean(PHI)", ir.Reduction, "real"),
    ("dot_product(x, y) * x", ir.Binary, "vector[N]"),
])
def test_products_and_reductions_are_typed(expression, node, described):
    mean = _mean(expression)
    assert isinstance(mean, node) and mean.type.describe() == described
    if expression.startswith("(PHI * C)"):
        assert isinstance(mean.base, ir.Binary)


@pytest.mark.parametrize("expression, message", [
    ("B * z", r"shapes do not match for the matrix product '\*': matrix\[K, 2\] and vector\[K\]"),
    ("dot_product(x, z)", r"dot_product needs two vectors of the same length, got vector\[N\] and vector\[K\]"),
    ("sum(a)", "sum needs vector or matrix arguments, got real"),
    ("dot_product(x)", r"dot_product takes two arguments: dot_product\(a, b\)"),
    ("z * PHI", r"shapes do not match for '\*'"),
])
def test_bad_products_and_reductions_are_refused(expression, message):
    with pytest.raises(GpdslError, match=message):
        _mean(expression)


def test_jax_values_agree_with_numpy_and_stan_spells_them():
    expression = "PHI * z + sum(z) * x + mean(PHI * B) + dot_product(x, y) * a - mean(z)"
    model, _ = check_text(MODEL.replace("MEAN", expression))
    rng = np.random.default_rng(4)
    N, K = 6, 3
    data = {"N": N, "K": K, "PHI": rng.normal(size=(N, K)), "B": rng.normal(size=(K, 2)),
            "C": rng.normal(size=(N, K)), "x": rng.normal(size=N), "y": rng.normal(size=N)}
    jax_model = lower(model, data)
    free = {"z": jnp.asarray(rng.normal(size=K)), "a": jnp.asarray(0.3), "s": jnp.asarray(0.8)}
    z = np.asarray(free["z"])
    mu = (data["PHI"] @ z + z.sum() * data["x"] + (data["PHI"] @ data["B"]).mean()
          + data["x"] @ data["y"] * 0.3 - z.mean())
    expected = (stats.norm.logpdf(data["y"], mu, 0.8).sum() + stats.norm.logpdf(z).sum()
                + stats.norm.logpdf(0.3) + stats.halfnorm.logpdf(0.8))
    np.testing.assert_allclose(float(jax_model.log_joint(free)), expected, rtol=1e-12)
    numpy_mu = value(model.statements[-1].distribution.arg("mu"), {**data, "z": z, "a": 0.3})
    np.testing.assert_allclose(numpy_mu, mu, rtol=1e-12)  # the results' evaluator of transformed parameters
    code = generate_stan(model).code
    assert ("normal_lpdf(y | PHI * z + sum(z) * x + mean(PHI * B) + dot_product(x, y) * a - mean(z), s)"
            in code)
    check_program(code)
