"""The pseudo-marginal chain's draws of (theta, f) are exact posterior draws (issue 13, item 2).

On a small GP probit (n = 30, sigma and one length-scale) pm with ``sample_latent`` (Laplace and EP
importance densities) is compared with a long ESS-within-Gibbs run on the joint posterior of
``(theta, f)``: the statistics ``f' K(theta)^-1 f / n`` and ``mean(f^2) / sigma``, and the class
probabilities predicted from the f draws at new inputs, must agree within four combined Monte Carlo
standard errors. An f that is moved after theta ignoring it has ``f' K^-1 f / n`` in the thousands.

A long statistical run (minutes): slow tier. The default tier keeps the construction's unit tests in
``tests/inference/mcmc/test_pseudo_marginal.py`` (the selected f moves exactly when the proposal is accepted).
"""

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gpdsl.api import check_text
from gpdsl.inference.driver import run_chains
from gpdsl.inference.families.latent_gp import latent_gp
from gpdsl.inference.mcmc.gibbs import make_gibbs
from gpdsl.inference.mcmc.pseudo_marginal import make_pseudo_marginal
from gpdsl.inference.predict.latent_gp import predict_from_latent_draws
from gpdsl.numerics.linalg import cholesky, solve_triangular

MODEL = """
data { int N; int D; matrix[N, D] X; array[N] int<lower=0, upper=1> y; }
parameters {
  real<lower=0> sigma ~ gamma(1.2, 0.2);
  real<lower=0> tau ~ gamma(1, 1 / sqrt(D));
}
model { f ~ gp(X, sigma * rbf(lengthscale = tau)); y ~ bernoulli_probit(f); }
"""
N = 30
CHAINS = 4
NEW_INPUTS = np.array([[0.1, 0.1], [0.5, 0.5], [0.9, 0.2], [0.3, 0.8], [1.2, 1.2]])


def probit_problem():
    """n = 30 inputs in the unit square, labels from a smooth function plus probit noise."""
    model, _ = check_text(MODEL)
    rng = np.random.default_rng(11)
    X = rng.uniform(size=(N, 2))
    latent = 1.5 * np.sin(4 * X[:, 0]) - 1.5 * X[:, 1] + 0.5
    y = (latent + rng.standard_normal(N) > 0).astype(int)
    return latent_gp(model, {"N": N, "D": 2, "X": X, "y": y})


@pytest.fixture(scope="module")
def problem():
    return probit_problem()


def statistics(problem, theta_draws, f_draws) -> dict:
    """Per draw: ``f' K^-1 f / n``, ``mean(f^2) / sigma`` and the class probabilities at NEW_INPUTS."""
    def per_draw(theta, f):
        whitened = solve_triangular(cholesky(problem.covariance(theta)), f, lower=True)
        sigma = problem.constrain(theta)[0]["sigma"]
        return jnp.sum(whitened ** 2) / N, jnp.mean(f ** 2) / sigma

    chains, draws = theta_draws.shape[:2]
    flat = jax.jit(jax.vmap(per_draw))(jnp.reshape(theta_draws, (chains * draws, -1)),
                                       jnp.reshape(f_draws, (chains * draws, -1)))
    quadratic, scaled_square = (np.reshape(np.asarray(v), (chains, draws)) for v in flat)
    probabilities = predict_from_latent_draws(problem, theta_draws, f_draws, NEW_INPUTS)
    table = {"f' K^-1 f / n": quadratic, "mean(f^2) / sigma": scaled_square}
    table.update({f"p(y = 1 | x_new[{i + 1}])": probabilities[..., i] for i in range(len(NEW_INPUTS))})
    return table


def gibbs_statistics(problem):
    """The statistics from 4 ESS-within-Gibbs chains (AA, 5 + 5 updates per iteration) of 1000 + 10000."""
    init, step = make_gibbs(problem, "aa", repeat_f=5, repeat_theta=5)
    starts = jax.vmap(init)(jax.random.split(jax.random.key(20), CHAINS), jnp.zeros((CHAINS, 2)))
    result = run_chains(step, starts, jax.random.key(21), 1000, 10000, segment_size=2500, progress=False)
    return statistics(problem, np.asarray(result.draws["theta"]), np.asarray(result.draws["f"]))


@pytest.fixture(scope="module")
def gibbs_reference(problem):
    return gibbs_statistics(problem)


def pm_statistics(problem, approximation, num_importance, engine=make_pseudo_marginal):
    init, step = engine(problem, approximation, num_importance, sample_latent=True)
    starts = jax.vmap(init)(jax.random.split(jax.random.key(30), CHAINS), jnp.zeros((CHAINS, 2)))
    result = run_chains(step, starts, jax.random.key(31), 500, 4000, segment_size=1500, progress=False,
                        extract=lambda s: {"theta": s.theta, "f": s.f})
    return statistics(problem, np.asarray(result.draws["theta"]), np.asarray(result.draws["f"]))


def disagreements(pm: dict, reference: dict) -> list[str]:
    """Statistics whose means differ by more than four combined MCSE (each printed)."""
    failures = []
    for name, values in pm.items():
        other = reference[name]
        for label, draws in (("pm", values), ("gibbs", other)):
            assert float(az.ess(draws)) > 200, f"{label}: too few effective draws of {name}"
        bound = 4 * np.hypot(float(az.mcse(values)), float(az.mcse(other)))
        difference = abs(values.mean() - other.mean())
        print(f"{name:24} pm {values.mean():9.4f} gibbs {other.mean():9.4f} |diff| {difference:.4f} bound {bound:.4f}")
        if not difference < bound:
            failures.append(name)
    return failures


@pytest.mark.slow
@pytest.mark.parametrize("approximation, num_importance", [("laplace", 4), ("ep", 8)])
def test_pm_latent_draws_match_a_long_gibbs_run(problem, gibbs_reference, approximation, num_importance):
    failures = disagreements(pm_statistics(problem, approximation, num_importance), gibbs_reference)
    assert not failures, f"pm's (theta, f) draws disagree with Gibbs on {failures}"
