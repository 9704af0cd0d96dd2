"""Natural-gradient site updates of q(X) under a GP prior: they reach a stationary point of the bound at fixed
hyperparameters and inducing inputs, a point where L-BFGS stops is improved to a stationary one, and they
vectorise."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize
from jax.flatten_util import ravel_pytree

from gpdsl.api import load_model
from gpdsl.data.io import load_data
from gpdsl.inference.families.gplvm import gplvm_problem
from gpdsl.errors import MethodError
from gpdsl.settings import VEMSettings
from gpdsl.inference.variational.e_step import e_step
from gpdsl.inference.variational.site_updates import make_site_updates
from gpdsl.inference.variational.vem import VariationalParams, initial_params, make_objective
from tests.inference.variational.test_gp_prior_latents import simulated


def small_problem():
    model = load_model("models/dynamical_gplvm.gpm")
    data, _ = load_data(simulated("dynamical", N=15, D=3, noise_sd=0.2, seed=2), model)
    problem = gplvm_problem(model, data)
    settings = VEMSettings(num_inducing=5, seed=0)
    return problem, settings, initial_params(problem, settings)


@pytest.mark.slow
def test_site_updates_reach_stationary_points_from_the_start_and_from_lbfgs():
    problem, settings, start = small_problem()
    result = jax.jit(make_site_updates(problem, settings, max_iterations=3000, tol=1e-12))(
        start.latent, start.inducing, start.theta)
    assert bool(result.converged)
    q = problem.latent_q()
    objective = make_objective(problem, settings)
    prior_term = float(problem.log_hyperprior(start.theta))

    def negative(flat, unravel):
        return -objective(VariationalParams(q.constrain(unravel(flat)), start.inducing, start.theta))

    flat, unravel = ravel_pytree(q.unconstrain(result.latent, jnp))
    gradient = jax.grad(negative)(flat, unravel)
    np.testing.assert_allclose(float(result.bound), -float(negative(flat, unravel)) - prior_term, rtol=1e-10)
    assert np.max(np.abs(gradient)) < 1e-3
    flat0, _ = ravel_pytree(q.unconstrain(start.latent, jnp))
    value_and_grad = jax.jit(jax.value_and_grad(lambda x: negative(x, unravel)))
    lbfgs = scipy.optimize.minimize(lambda x: tuple(np.asarray(v) for v in value_and_grad(jnp.asarray(x))),
                                    np.asarray(flat0), jac=True, method="L-BFGS-B",
                                    options={"maxiter": 5000, "ftol": 1e-15, "gtol": 1e-10})
    # L-BFGS creeps along the badly conditioned mu_bar directions; from where it stops, the site updates
    # only go up, to a stationary point
    at_lbfgs = q.constrain(unravel(jnp.asarray(lbfgs.x)))
    again = jax.jit(make_site_updates(problem, settings, max_iterations=3000, tol=1e-12))(
        at_lbfgs, start.inducing, start.theta)
    assert bool(again.converged) and float(again.bound) >= -lbfgs.fun - prior_term
    flat, _ = ravel_pytree(q.unconstrain(again.latent, jnp))
    assert np.max(np.abs(jax.grad(negative)(flat, unravel))) < 1e-3
    print(f"site updates from the start: {float(result.bound):.4f}; L-BFGS (5000 iterations): "
          f"{-lbfgs.fun - prior_term:.4f}; site updates from there: {float(again.bound):.4f}")


def test_site_updates_vectorise_over_hyperparameters():
    problem, settings, start = small_problem()
    run = make_site_updates(problem, settings, max_iterations=300)
    thetas = jnp.stack([start.theta, start.theta + 0.1])
    batched = jax.jit(jax.vmap(run, in_axes=(None, None, 0)))(start.latent, start.inducing, thetas)
    for b in range(2):
        one = jax.jit(run)(start.latent, start.inducing, thetas[b])
        np.testing.assert_allclose(float(batched.bound[b]), float(one.bound), rtol=1e-9)
        np.testing.assert_allclose(np.asarray(batched.latent.mu_bar[b]), np.asarray(one.latent.mu_bar), rtol=1e-7,
                                   atol=1e-9)


def test_e_step_by_site_updates_is_deterministic_and_vectorised():
    problem, settings, start = small_problem()
    thetas = jnp.stack([start.theta, start.theta + 0.2])
    batch = e_step(problem, settings, thetas, max_iterations=2000, updates="sites")
    assert bool(jnp.all(batch.converged)) and batch.inducing.shape == (2, 5, 2)
    objective = make_objective(problem, settings)
    for k in range(2):
        single = e_step(problem, settings, thetas[k], max_iterations=2000, updates="sites")
        np.testing.assert_allclose(float(single.bound), float(batch.bound[k]), rtol=1e-8)
        at = VariationalParams(single.latent, single.inducing, thetas[k])
        np.testing.assert_allclose(float(objective(at) - problem.log_hyperprior(thetas[k])), float(single.bound),
                                   rtol=1e-10)
    again = e_step(problem, settings, thetas, max_iterations=2000, updates="sites")
    assert np.array_equal(np.asarray(again.bound), np.asarray(batch.bound))


def test_e_step_updates_are_checked():
    problem, settings, start = small_problem()
    with pytest.raises(MethodError, match="'lbfgs' or 'sites'"):
        e_step(problem, settings, start.theta, updates="newton")
    model = load_model("models/bayesian_gplvm.gpm")
    data, _ = load_data({"N": 10, "D": 2, "Q": 1, "Y": np.random.default_rng(0).normal(size=(10, 2))}, model)
    with pytest.raises(MethodError, match="GP prior"):
        e_step(gplvm_problem(model, data), VEMSettings(num_inducing=3), np.zeros(4), updates="sites")
