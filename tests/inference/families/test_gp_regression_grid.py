"""GP regression on a full grid of tuple inputs: ``ml``'s marginal likelihood by Kronecker algebra equals the dense one.

The reference is the same view with ``use_grid=False`` (the dense Cholesky factorisation of ``K + s^2 I``): the log
marginal likelihood and its gradient at several hyperparameters, and the maximum-likelihood optimum.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gpdsl.api import check
from gpdsl.inference.families.gp_regression import gp_regression
from gpdsl.inference.optimise.marginal_likelihood import fit_marginal_likelihood

MODEL = """
data {{
  int N;
  vector[N] t;
  vector[N] x;
  vector[N] y;
}}
parameters {{
  real<lower=0> a ~ lognormal(0, 1);
  real<lower=0> b ~ lognormal(0, 1);
  real<lower=0> v ~ lognormal(0, 1);
  real<lower=0> s ~ lognormal(-1, 1);
}}
model {{
  f ~ gp((t, x), {kernel});
  y ~ normal(f, s);
}}
"""
SEPARABLE = "v * rbf(t, lengthscale = a) * matern32(x, lengthscale = b)"


def grid_data(rng, n_t=6, n_x=5, drop=0):
    """A shuffled full grid (less ``drop`` rows) with outcomes from a smooth surface plus noise."""
    t, x = (m.ravel() for m in np.meshgrid(np.sort(rng.uniform(0, 4, n_t)), np.sort(rng.uniform(0, 2, n_x)),
                                           indexing="ij"))
    order = rng.permutation(t.size)[drop:]
    t, x = t[order], x[order]
    y = np.sin(t) * np.cos(2 * x) + 0.1 * rng.normal(size=t.size)
    return {"N": t.size, "t": t, "x": x, "y": y}


def view(kernel, data):
    model, _ = check(MODEL.format(kernel=kernel))
    return gp_regression(model, data)


def test_the_grid_marginal_likelihood_and_gradient_equal_the_dense_ones():
    rng = np.random.default_rng(0)
    problem = view(SEPARABLE, grid_data(rng))
    dense = dataclasses.replace(problem, use_grid=False)
    assert problem.grid is not None and problem.grid.shape == (6, 5) and dense.grid is None
    for theta in rng.normal(scale=0.7, size=(4, 4)):
        theta = jnp.asarray(theta)
        value, gradient = jax.value_and_grad(problem.log_marginal)(theta)
        expected, expected_gradient = jax.value_and_grad(dense.log_marginal)(theta)
        np.testing.assert_allclose(value, expected, rtol=1e-8)
        np.testing.assert_allclose(gradient, expected_gradient, rtol=1e-7, atol=1e-9)


def test_ml_on_a_grid_reaches_the_dense_optimum():
    problem = view(SEPARABLE, grid_data(np.random.default_rng(1)))
    kronecker_fit = fit_marginal_likelihood(problem)
    assert problem.grid is not None
    dense_fit = fit_marginal_likelihood(dataclasses.replace(problem, use_grid=False))
    np.testing.assert_allclose(kronecker_fit.theta, dense_fit.theta, rtol=1e-6, atol=1e-6)
    assert float(kronecker_fit.log_marginal) == pytest.approx(float(dense_fit.log_marginal), rel=1e-9)


@pytest.mark.parametrize("kernel, drop", [
    (SEPARABLE, 1),
    ("v * rbf(t, lengthscale = a) + matern32(x, lengthscale = b)", 0),
    ("v * rbf(t, lengthscale = a) * white(x, variance = b)", 0),
    ("v * rbf(lengthscale = a)", 0),
], ids=["partial grid", "sum", "same-index term", "kernel over both columns"])
def test_no_grid_where_k_is_not_a_kronecker_product(kernel, drop):
    problem = view(kernel, grid_data(np.random.default_rng(2), drop=drop))
    assert problem.grid is None


def test_a_coregionalised_multi_output_grid_equals_the_dense_one():
    rng = np.random.default_rng(4)
    x = np.repeat(rng.uniform(0, 5, 8), 3)
    output = np.tile([1, 2, 3], 8)
    order = rng.permutation(24)
    data = {"N": 24, "P": 3, "R": 1, "x": x[order], "output": output[order], "y": rng.normal(size=24)}
    model, _ = check("models/gp_multi_output.gpm")
    problem = gp_regression(model, data)
    dense = dataclasses.replace(problem, use_grid=False)
    assert problem.grid is not None and problem.grid.shape == (8, 3)
    theta = jnp.asarray(rng.normal(scale=0.5, size=sum(b.size for b in problem.theta_blocks)))
    value, gradient = jax.value_and_grad(problem.log_marginal)(theta)
    expected, expected_gradient = jax.value_and_grad(dense.log_marginal)(theta)
    np.testing.assert_allclose(value, expected, rtol=1e-8)
    np.testing.assert_allclose(gradient, expected_gradient, rtol=1e-7, atol=1e-9)
