"""SA, AA, SURR and SURR-slice within ESS Gibbs against the exact posterior of a length-scale."""

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gpdsl.api import check_text
from gpdsl.inference.driver import run_chains
from gpdsl.inference.families.latent_gp import latent_gp
from gpdsl.inference.mcmc.gibbs import make_gibbs
from gpdsl.inference.mcmc.hyper_updates import (
    aa_step,
    latent_position,
    sa_step,
    surr_slice_step,
    surr_step,
)
from gpdsl.numerics.linalg import mvn_logpdf_chol

MODEL = """
data { int N; vector[N] x; vector[N] y; }
parameters { real<lower=0> ell ~ gamma(2, 2); }
model { f ~ gp(x, rbf(lengthscale = ell)); y ~ normal(f, 0.3); }
"""
NOISE_VARIANCE = 0.09
NUM_CHAINS = 4


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)
    x = np.linspace(0, 9, 10)
    y = np.sin(x) + 0.3 * rng.standard_normal(10)
    return latent_gp(check_text(MODEL)[0], {"N": 10, "x": x, "y": y}, marginalise=False)


@pytest.fixture(scope="module")
def exact(problem):
    """Posterior of ell by quadrature over log ell: mean and the quartiles."""
    grid = np.linspace(-6.0, 4.0, 4001)
    y = jnp.asarray(problem.y)

    def log_posterior(u):
        theta = u[None]
        chol = jnp.linalg.cholesky(problem.covariance(theta) + NOISE_VARIANCE * jnp.eye(problem.n))
        return problem.log_prior(theta) + mvn_logpdf_chol(y, chol)

    log_density = np.asarray(jax.vmap(log_posterior)(jnp.asarray(grid)))
    density = np.exp(log_density - log_density.max())
    density /= np.trapezoid(density, grid)
    cdf = np.concatenate([[0.0], np.cumsum(0.5 * (density[1:] + density[:-1]) * np.diff(grid))])
    quartiles = np.exp(np.interp([0.25, 0.5, 0.75], cdf, grid))
    return {"mean": np.trapezoid(np.exp(grid) * density, grid), "quartiles": quartiles}


SCHEDULES = {
    "sa": {"repeat_f": 5, "repeat_theta": 5, "num_draws": 5000},
    "aa": {"repeat_f": 5, "repeat_theta": 5, "num_draws": 5000},
    "surr": {"repeat_f": 1, "repeat_theta": 1, "num_draws": 5000},
    "surr_slice": {"repeat_f": 1, "repeat_theta": 1, "num_draws": 3000},
}


@pytest.mark.parametrize("update", list(SCHEDULES))
def test_gibbs_recovers_the_exact_length_scale_posterior(problem, exact, update):
    schedule = dict(SCHEDULES[update])
    num_draws = schedule.pop("num_draws")
    init, step = make_gibbs(problem, update, surrogate_variance=NOISE_VARIANCE, **schedule)
    starts = jax.vmap(init)(jax.random.split(jax.random.key(6), NUM_CHAINS), jnp.zeros((NUM_CHAINS, 1)))
    result = run_chains(step, starts, jax.random.key(7), num_draws // 2, num_draws, segment_size=num_draws // 2,
                        progress=False)
    ell = np.exp(result.draws["theta"][..., 0])
    assert ell.shape == (NUM_CHAINS, num_draws)
    assert float(az.ess(ell)) > 100, "too few effective draws for a meaningful comparison"

    error = abs(ell.mean() - exact["mean"])
    mcse = float(az.mcse(ell))
    print(f"{update}: E[ell] {ell.mean():.4f} exact {exact['mean']:.4f} MCSE {mcse:.4f}")
    assert error < 4 * mcse
    for probability, quartile in zip([0.25, 0.5, 0.75], exact["quartiles"]):
        below = (ell <= quartile).astype(float)
        mcse = float(az.mcse(below))
        print(f"{update}: P(ell <= {quartile:.3f}) {below.mean():.4f} exact {probability} MCSE {mcse:.4f}")
        assert abs(below.mean() - probability) < 4 * mcse

    infos = result.infos
    if update == "surr_slice":
        assert np.all(infos.accepted == 1.0) and infos.num_evaluations.min() >= 3
        np.testing.assert_array_equal(infos.cubic_ops, 1 + 2 * infos.num_evaluations)
    else:
        rate = float(infos.acceptance_rate.mean())
        assert 0.1 < rate < 0.5, f"acceptance {rate} far from the 0.25 target"
        expected_ops = {"sa": 1, "aa": 1, "surr": 3}[update] * schedule["repeat_theta"]
        assert np.all(infos.cubic_ops == expected_ops)


def test_updates_keep_the_cached_factor_and_likelihood_consistent(problem):
    position = latent_position(problem, jnp.asarray([0.1]), jnp.asarray(np.sin(np.linspace(0, 9, 10))))
    updates = {
        "sa": lambda key, p: sa_step(key, p, problem, 0.5),
        "aa": lambda key, p: aa_step(key, p, problem, 0.5),
        "surr": lambda key, p: surr_step(key, p, problem, 0.5, surrogate_variance=jnp.full(10, 0.2)),
        "surr_slice": lambda key, p: surr_slice_step(key, p, problem, 0.5, surrogate_variance=lambda t: 0.2 + 0 * t,
                                                     direction="random"),
    }
    for name, update in updates.items():
        current, moved = position, 0
        for key in jax.random.split(jax.random.key(3), 10):
            current, info = jax.jit(update)(key, current)
            moved += int(info.accepted)
            np.testing.assert_allclose(current.chol_K, jnp.linalg.cholesky(problem.covariance(current.theta)),
                                       rtol=1e-10, atol=1e-12, err_msg=name)
            assert float(current.loglik) == pytest.approx(float(problem.log_likelihood(current.f, current.theta)),
                                                          rel=1e-9), name
        assert moved > 0, name
        if name == "sa":
            np.testing.assert_array_equal(current.f, position.f)


def test_unknown_update_is_refused(problem):
    with pytest.raises(ValueError, match="theta_update"):
        make_gibbs(problem, "nuts")
