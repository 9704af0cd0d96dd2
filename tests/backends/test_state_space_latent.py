"""A sampled state-space latent GP (``approx = state_space`` under a non-normal likelihood) is computed from its
innovations ``<f>_z`` by the state recursion (:mod:`gpdsl.backends.jax.state_space`). The map ``z -> f`` is linear, so
its implied covariance, pushed through from the identity's columns, must equal the kernel matrix at the data's times
(unsorted, with a repeated time) to 1e-8 for every state-space form; and the associative scan equals the plain
sequential recursion."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gpdsl.api import check_text
from gpdsl.backends.jax.lowering import lower
from gpdsl.backends.jax.state_space import innovation_factors, latent_from_innovations, principal_square_root
from gpdsl.kernels.kalman import time_grid
from gpdsl.data.validation import validate_data

jax.config.update("jax_enable_x64", True)

KERNELS = {
    "matern12": "matern12(lengthscale = ell)",
    "matern32": "matern32(lengthscale = ell)",
    "matern52": "matern52(lengthscale = ell)",
    "periodic": "periodic(lengthscale = ell, period = 2.5)",
    "sum": "matern52(lengthscale = ell) + square(0.7) * periodic(lengthscale = 1.3, period = 2) + constant(0.3)",
    "product": "matern32(lengthscale = ell) * periodic(lengthscale = 1.1, period = 3)",
}

TEMPLATE = """
data {{ int N; vector[N] t; array[N] int<lower=0> y; }}
parameters {{
  real<lower=0> ell ~ lognormal(0, 1);
  real<lower=0> s ~ half_normal(1);
}}
model {{
  f ~ gp(t, square(s) * {kernel}, approx = state_space(order = 30));
  y ~ poisson_log(f);
}}
"""


def series(n=14, seed=3):
    rng = np.random.default_rng(seed)
    t = rng.uniform(0, 6, n)
    t[5] = t[9]  # a repeated time: a step of zero
    t[2] = t[3] + 1e-7  # a tiny step: a nearly singular process noise
    return {"N": n, "t": t, "y": rng.poisson(2.0, n)}


@pytest.mark.parametrize("kernel", [k if k == "sum" else pytest.param(k, marks=pytest.mark.slow) for k in KERNELS])
def test_the_innovations_give_f_the_kernel_covariance(kernel):
    model, _ = check_text(TEMPLATE.format(kernel=KERNELS[kernel]))
    data = validate_data(model, series())[0]
    jax_model = lower(model, data)
    block = jax_model.block("f_z")
    assert block.role == "state_space_innovations" and "f_raw" not in [b.name for b in jax_model.blocks]
    values = {"ell": jnp.asarray(0.8), "s": jnp.asarray(1.3)}
    env = {**jax_model.data, **values}

    def f_of(z):
        return jax_model.environment({**values, "f_z": z})["f"]

    columns = jax.vmap(f_of)(jnp.eye(block.size))  # row j: f of the j-th unit innovation
    implied = np.asarray(columns.T @ columns)
    K = np.asarray(jax_model.gp_kernel(model.gp_statements()[0], env)(jnp.asarray(data["t"])[:, None]))
    np.testing.assert_allclose(implied, K, atol=1e-8, rtol=0)


def test_the_associative_scan_and_the_step_by_step_scan_are_the_recursion():
    from gpdsl.kernels.stationary import Matern52

    times = series(n=40)["t"]
    grid = time_grid(times)
    kernel = Matern52(1.7, 0.6)
    A, R, h = innovation_factors(kernel, grid, 7)
    z = np.random.default_rng(0).normal(size=(40, 3))
    state, expected = np.zeros(3), []
    for k in range(40):
        state = np.asarray(A[k]) @ state + np.asarray(R[k]) @ z[k]
        expected.append(np.asarray(h) @ state)
    expected = np.array(expected)[grid.unsort]
    for parallel in (True, False):
        f = latent_from_innovations(kernel, grid, jnp.asarray(z.ravel()), 7, parallel=parallel)
        np.testing.assert_allclose(f, expected, atol=1e-12)


def test_the_principal_square_root_is_symmetric_and_squares_back_even_when_singular():
    rng = np.random.default_rng(1)
    B = rng.normal(size=(4, 2))
    for S in (B @ B.T, np.zeros((4, 4)), np.diag([2.0, 2.0, 1.0, 0.0])):
        R = np.asarray(principal_square_root(jnp.asarray(S)))
        np.testing.assert_allclose(R, R.T, atol=1e-12)
        np.testing.assert_allclose(R @ R, S, atol=1e-10)
