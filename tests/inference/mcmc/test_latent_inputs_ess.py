"""Elliptical slice sampling of a supervised GPLVM's latent inputs against exact answers at fixed hyperparameters."""

import itertools

import arviz as az
import jax
import numpy as np
import pytest

from gpdsl.api import load_model
from gpdsl.data.io import load_data
from gpdsl.errors import MethodError
from gpdsl.inference.families.gplvm import gplvm_problem
from gpdsl.inference.mcmc.gplvm_estimate import collapsed_log_likelihood
from gpdsl.inference.mcmc.latent_inputs_ess import (
    ess_chain,
    latent_inputs_sweeps,
    sample_latent_inputs,
)

MODEL = """
data {
  int N;
  int Q;
  int D;
  matrix[N, 1] X;
  matrix[N, D] Y;
}
parameters {
  real<lower=0> s1 ~ gamma(2, 2);
  real<lower=0> v ~ gamma(2, 2);
  real<lower=0> noise ~ gamma(2, 2);
}
latent {
  matrix[N, Q] Z;
}
model {
  Z ~ gp(X, rbf(variance = 1, inv_ls2 = s1));
  F ~ gp(Z, linear(variance = v));
  Y ~ normal(F, sqrt(noise));
}
"""
X3 = np.array([[0.0], [1.0], [2.5]])
Y3 = np.array([[0.9, -1.4], [1.6, -0.5], [-0.3, 1.1]])
HYPER = {"s1": 0.5, "v": 1.5, "noise": 0.2}


def linear_problem(tmp_path, X, Y, Q):
    path = tmp_path / "linear_sgplvm.gpm"
    path.write_text(MODEL)
    model = load_model(str(path))
    values, _ = load_data({"N": len(X), "Q": Q, "D": Y.shape[1], "X": X, "Y": Y}, model)
    return gplvm_problem(model, values)


def quadrature_moments(problem, theta, half_width=6.0, points=141):
    """Moments of p(z | Y) for Q = 1 and a linear k_f on a grid over R^N (N = 3).

    ``K_f + s^2 I = s^2 I + v z z^T``, so ``log det = N log s^2 + log(1 + v |z|^2 / s^2)`` and
    ``y^T C^-1 y = (|y|^2 - v (z.y)^2 / (s^2 + v |z|^2)) / s^2`` in closed form.
    """
    values = problem.theta_values(theta)
    v, s2 = float(values["v"]), float(values["noise"])
    K = np.asarray(problem.latent_prior_covariance(theta))
    Y = problem.Y
    axis = np.linspace(-half_width, half_width, points)
    z = np.stack(np.meshgrid(axis, axis, axis, indexing="ij"), axis=-1).reshape(-1, 3)
    r2 = np.sum(z * z, axis=1)
    log_det = np.log1p(v * r2 / s2)
    quad = sum(Y[:, d] @ Y[:, d] - v * (z @ Y[:, d]) ** 2 / (s2 + v * r2) for d in range(Y.shape[1])) / s2
    log_prior = -0.5 * np.sum(z * np.linalg.solve(K, z.T).T, axis=1)
    log_post = -0.5 * Y.shape[1] * log_det - 0.5 * quad + log_prior
    weights = np.exp(log_post - log_post.max())
    weights /= weights.sum()
    cube = weights.reshape(points, points, points)
    assert max(np.take(cube, [0, -1], axis=a).sum() for a in range(3)) < 1e-10, "grid too narrow"
    return {name: weights @ f for name, f in functionals(z).items()}


def functionals(z):
    """Named functions of draws ``z`` (..., 3) whose posterior expectations are compared."""
    out = {f"z{i}": z[..., i] for i in range(3)}
    out |= {f"|z{i}|": np.abs(z[..., i]) for i in range(3)}
    out |= {f"z{i}z{j}": z[..., i] * z[..., j] for i, j in itertools.combinations_with_replacement(range(3), 2)}
    return out


def assert_within_mcse(draws, exact):
    """Every functional's sample mean within 4 MCSE (ArviZ) of its exact value; ``draws`` (chains, draws, 3)."""
    for name, f in functionals(draws).items():
        mcse = float(az.mcse(f))
        print(f"{name}: ESS {f.mean():.4f} exact {float(exact[name]):.4f} MCSE {mcse:.4f}")
        assert abs(f.mean() - float(exact[name])) < 4 * mcse, name


@pytest.fixture(scope="module")
def three_points(tmp_path_factory):
    problem = linear_problem(tmp_path_factory.mktemp("model"), X3, Y3, Q=1)
    theta = problem.unconstrain_theta(HYPER)
    return problem, theta, quadrature_moments(problem, theta)


def test_quadrature_target_is_not_gaussian(three_points):
    """The case is a real test: the second moments are far from the prior's and |z| is not half-normal."""
    problem, theta, exact = three_points
    K = np.asarray(problem.latent_prior_covariance(theta))
    assert abs(exact["z0z0"] - K[0, 0]) > 0.2
    assert abs(exact["|z0|"] - np.sqrt(2 * exact["z0z0"] / np.pi)) > 0.01


def test_ess_chain_matches_quadrature_of_exact_posterior(three_points):
    problem, theta, exact = three_points
    draws = ess_chain(problem, theta, jax.random.key(0), np.zeros((3, 1)), num_samples=20000, thin=1)
    assert draws.shape == (20000, 3, 1)
    assert_within_mcse(draws[:, :, 0].reshape(4, 5000, 3), exact)


def test_warm_started_draws_match_quadrature_at_constant_theta(three_points):
    """With every hyperparameter draw the same and one sweep per draw, the kept Z form one ESS chain per
    chain (warm starts): their moments are the exact posterior's."""
    problem, theta, exact = three_points
    theta_draws = np.broadcast_to(np.asarray(theta), (4, 4000, 3))
    draws = sample_latent_inputs(problem, theta_draws, jax.random.key(1), initial_Z=np.full((3, 1), 2.0), sweeps=1)
    assert draws.shape == (4, 4000, 3, 1)
    assert_within_mcse(draws[:, 200:, :, 0], exact)


def test_uninformative_outputs_leave_the_prior(tmp_path):
    """Huge noise: Y says nothing about Z, whose draws (N = 5, Q = 2) must follow N(0, K_z) column by column."""
    rng = np.random.default_rng(4)
    X = np.linspace(0.0, 3.0, 5)[:, None]
    problem = linear_problem(tmp_path, X, rng.normal(size=(5, 2)), Q=2)
    theta = problem.unconstrain_theta({"s1": 0.8, "v": 1.0, "noise": 1e8})
    K = np.asarray(problem.latent_prior_covariance(theta))
    draws = np.stack([ess_chain(problem, theta, key, np.zeros((5, 2)), num_samples=2000)
                      for key in jax.random.split(jax.random.key(2), 4)])
    flat = np.swapaxes(draws, 2, 3).reshape(4, 2000, 10)  # (z_:1, z_:2)
    expected = np.kron(np.eye(2), K)
    for i in range(10):
        assert abs(flat[..., i].mean()) < 4 * float(az.mcse(flat[..., i])), f"mean {i}"
        for j in range(i, 10):
            product = flat[..., i] * flat[..., j]
            assert abs(product.mean() - expected[i, j]) < 4 * float(az.mcse(product)), f"covariance {i}, {j}"


def test_thinning_visits_only_the_kept_draws(three_points):
    problem, theta, _ = three_points
    theta_draws = np.full((2, 7, 3), np.nan)
    theta_draws[:, ::3] = np.asarray(theta)
    draws = sample_latent_inputs(problem, theta_draws, jax.random.key(3), initial_Z=np.zeros((2, 3, 1)), sweeps=2,
                                 thin=3)
    assert draws.shape == (2, 3, 3, 1)
    assert np.all(np.isfinite(draws)) and np.all(np.abs(draws) > 0)
    assert not np.allclose(draws[0], draws[1])


def test_segments_give_the_draws_of_one_scan_over_all_draws_and_move_the_stage(three_points, monkeypatch):
    """The draws are computed a segment of draws at a time (for progress): bit for bit those of the single scan over
    all draws the sampler ran before, each segment moving the stage's bar by its draws of every chain."""
    from jax import lax

    from gpdsl.inference import progress

    problem, theta, _ = three_points
    theta_draws = np.asarray(theta) + 0.1 * np.random.default_rng(6).normal(size=(2, 7, 3))
    key, start = jax.random.key(8), np.full((3, 1), 0.5)

    def chain(key, thetas, Z):
        def visit(Z, inputs):
            Z, _ = latent_inputs_sweeps(problem, inputs[1], inputs[0], Z, 2)
            return Z, Z

        return lax.scan(visit, Z, (jax.random.split(key, 7), thetas))[1]

    one_scan = np.asarray(jax.jit(jax.vmap(chain))(jax.random.split(key, 2), theta_draws,
                                                   np.broadcast_to(start, (2, 3, 1))))
    steps = []
    monkeypatch.setattr(progress, "advance", steps.append)
    segments = sample_latent_inputs(problem, theta_draws, key, initial_Z=start, sweeps=2, segment_size=3)
    np.testing.assert_array_equal(segments, one_scan)
    assert steps == [6, 6, 2]
    with pytest.raises(MethodError, match="segment_size"):
        sample_latent_inputs(problem, theta_draws, key, initial_Z=start, sweeps=2, segment_size=0)


def test_sweeps_are_traceable_and_vmappable(three_points):
    problem, theta, _ = three_points
    run = jax.jit(jax.vmap(lambda key, Z: latent_inputs_sweeps(problem, theta, key, Z, 5)))
    Z, info = run(jax.random.split(jax.random.key(5), 3), np.zeros((3, 3, 1)))
    assert Z.shape == (3, 3, 1) and info.log_likelihood.shape == (3,)
    assert not bool(info.gave_up.any()) and int(info.num_shrinks.min()) >= 0
    for c in range(3):
        np.testing.assert_allclose(info.log_likelihood[c], collapsed_log_likelihood(problem, theta, Z[c]), rtol=1e-10)


def test_rejects_bad_arguments(three_points):
    problem, theta, _ = three_points
    with pytest.raises(MethodError, match="sweeps"):
        sample_latent_inputs(problem, np.zeros((1, 2, 3)), jax.random.key(0), initial_Z=np.zeros((3, 1)), sweeps=0)
    with pytest.raises(MethodError, match="shape"):
        ess_chain(problem, theta, jax.random.key(0), np.zeros((4, 1)), num_samples=3)
