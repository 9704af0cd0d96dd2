"""The fast log normal CDF against SciPy: values, derivatives, the branch boundaries."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import special

from gpdsl.kernels.params import sum_over_inputs
from gpdsl.numerics.special import inverse_mills, log_ndtr


def test_log_ndtr_matches_scipy_across_the_real_line():
    x = np.concatenate([np.linspace(-1000.0, 36.0, 100_001), np.linspace(-31.0, -29.0, 2001),
                        np.linspace(-1.0, 1.0, 2001), -np.logspace(-12, 3, 400), np.logspace(-12, 1.5, 400)])
    expected = special.log_ndtr(x)
    got = np.asarray(jax.jit(log_ndtr)(x))
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=0)
    assert float(log_ndtr(40.0)) == pytest.approx(special.log_ndtr(40.0), abs=1e-300)
    assert float(log_ndtr(0.0)) == pytest.approx(np.log(0.5), rel=1e-15)


def test_log_ndtr_derivatives():
    x = np.concatenate([np.linspace(-200.0, 30.0, 4001), [-30.0, 0.0]])
    expected = np.exp(-0.5 * x**2 - 0.5 * np.log(2 * np.pi) - special.log_ndtr(x))
    np.testing.assert_allclose(jax.vmap(jax.grad(log_ndtr))(x), expected, rtol=1e-10)
    np.testing.assert_allclose(inverse_mills(x), expected, rtol=1e-10)
    second = jax.vmap(jax.grad(jax.grad(log_ndtr)))(x)
    ratio = expected
    np.testing.assert_allclose(second, -ratio * (x + ratio), rtol=1e-6, atol=1e-12)


@pytest.mark.parametrize("columns", [1, 2, 16, 17, 40])
def test_sum_over_inputs_equals_the_sum(columns):
    terms = jnp.asarray(np.random.default_rng(columns).normal(size=(3, 4, columns)))
    np.testing.assert_allclose(sum_over_inputs(terms), jnp.sum(terms, axis=-1), rtol=1e-14)
    assert float(sum_over_inputs(jnp.asarray(2.5))) == 2.5
