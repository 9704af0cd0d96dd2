"""The pseudo-marginal sampler of the supervised GPLVM (Gadd, Wade & Shah 2021): the estimate, the blocked
adaptive Metropolis-within-Gibbs chain and the ``pm-gplvm`` method, against Monte Carlo over the latents."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gpdsl.api import load_model, run
from gpdsl.data.io import load_data
from gpdsl.errors import MethodError
from gpdsl.settings import SettingError
from gpdsl.inference.families.gplvm import gplvm_problem
from gpdsl.inference.mcmc.blocked_metropolis import (
    check_blocks,
    make_blocked_metropolis,
)
from gpdsl.inference.mcmc.gplvm_estimate import collapsed_log_likelihood, make_estimate, variational_proposal
from gpdsl.inference.mcmc.gplvm_laplace import laplace_proposal, make_laplace
from gpdsl.settings import PMGPLVMSettings
from gpdsl.settings import VEMSettings
from gpdsl.inference.variational.e_step import make_e_step
from gpdsl.inference.variational.vem import fit_vem

NOISE_SD = 0.5
TINY = f"""
data {{
  int N; int Q; int D;
  matrix[N, 1] X;
  matrix[N, D] Y;
}}
parameters {{
  real<lower=0> s1 ~ gamma(4, 8);
}}
latent {{
  matrix[N, Q] Z;
}}
model {{
  Z ~ gp(X, rbf(variance = 1, inv_ls2 = s1) + white(1e-6));
  F ~ gp(Z, rbf(variance = 1, inv_ls2 = 1));
  Y ~ normal(F, {NOISE_SD});
}}
"""


@pytest.fixture(scope="module")
def tiny():
    """N = 6, one latent dimension, one output drawn from the model itself; the one hyperparameter s1 free."""
    rng = np.random.default_rng(3)
    x = np.linspace(0.0, 3.0, 6)
    z = np.sin(x)
    K_f = np.exp(-0.5 * (z[:, None] - z[None]) ** 2) + NOISE_SD**2 * np.eye(6)
    Y = np.linalg.cholesky(K_f) @ rng.normal(size=(6, 1))
    model = load_model(TINY)
    data = {"N": 6, "Q": 1, "D": 1, "X": x[:, None], "Y": Y}
    values, _ = load_data(data, model)
    return model, data, gplvm_problem(model, values), x, Y


def marginal_by_prior_sampling(x, Y, s1_values, draws: int, seed: int = 9):
    """``log p(Y | X, s1)`` and its relative standard error: the plain Monte Carlo average of ``p(Y | Z)`` over
    ``Z ~ p(Z | X, s1)``, in NumPy, one set of normal draws shared by every ``s1``.

    (Gauss-Hermite over the prior's principal axes, and adaptive Gauss-Hermite at the posterior's modes, both
    drift by about 0.1 in log as nodes are added on this problem: the likelihood is a thin ridge. Plain Monte
    Carlo with millions of draws is the reference whose error is known.)
    """
    normals = np.random.default_rng(seed).normal(size=(draws, x.size))
    logs, errors = [], []
    for s1 in np.atleast_1d(s1_values):
        K_z = np.exp(-0.5 * s1 * (x[:, None] - x[None]) ** 2) + (1e-6 + 1e-8) * np.eye(x.size)
        values = []
        for chunk in np.array_split(normals, max(1, draws // 200_000)):
            Z = chunk @ np.linalg.cholesky(K_z).T
            C = np.exp(-0.5 * (Z[:, :, None] - Z[:, None, :]) ** 2) + (NOISE_SD**2 + 1e-8) * np.eye(x.size)
            L = np.linalg.cholesky(C)
            alpha = np.linalg.solve(L, np.broadcast_to(Y, (len(Z),) + Y.shape))
            values.append(-0.5 * np.sum(alpha**2, axis=(1, 2))
                          - Y.shape[1] * np.sum(np.log(np.diagonal(L, axis1=1, axis2=2)), axis=1)
                          - 0.5 * Y.size * np.log(2 * np.pi))
        log_likelihood = np.concatenate(values)
        top = log_likelihood.max()
        ratio = np.exp(log_likelihood - top)
        logs.append(top + np.log(ratio.mean()))
        errors.append(ratio.std() / np.sqrt(draws) / ratio.mean())
    return np.asarray(logs), np.asarray(errors)


def test_collapsed_likelihood_is_the_gaussian_density_of_each_output(tiny):
    _, _, problem, x, Y = tiny
    Z = np.sin(x)[:, None] + 0.1
    theta = problem.unconstrain_theta({"s1": 0.5})
    C = np.exp(-0.5 * (Z - Z.T) ** 2) + (NOISE_SD**2 + 1e-8) * np.eye(6)
    expected = sum(-0.5 * y @ np.linalg.solve(C, y) - 0.5 * np.linalg.slogdet(2 * np.pi * C)[1] for y in Y.T)
    assert float(collapsed_log_likelihood(problem, theta, jnp.asarray(Z))) == pytest.approx(expected, abs=1e-8)


def e_step_from_a_fit(problem):
    settings = VEMSettings(num_inducing=6, max_iterations=300)
    fit = fit_vem(problem, settings)
    return fit, make_e_step(problem, settings, start=(fit.params.latent, fit.params.inducing), max_iterations=200,
                            updates="sites", tol=1e-7)


def proposal_of(problem, kind: str, **options):
    """The variational proposal of a fit's E-step, or the Laplace proposal searched from the fit's means."""
    fit, e_step = e_step_from_a_fit(problem)
    if kind == "laplace":
        return laplace_proposal(problem, make_laplace(problem, fit.mean), **options)
    return variational_proposal(problem, e_step, **options)


@pytest.mark.parametrize("kind", ["variational", "laplace"])
def test_the_estimate_is_unbiased_for_the_marginal_likelihood_itself(tiny, kind):
    """The mean of many estimates of p(Y | X, s1), not of its log, equals the reference within 4 standard errors
    (the reference's own relative error is below 0.2%); with few importance draws the mean of the log estimates
    falls clearly below it (Jensen)."""
    _, _, problem, x, Y = tiny
    proposal = proposal_of(problem, kind, defensive=0.1)
    theta = problem.unconstrain_theta({"s1": 0.5})
    (exact,), (reference_error,) = marginal_by_prior_sampling(x, Y, 0.5, 4_000_000)
    assert reference_error < 0.002
    for draws, replicates in ((4, 20000), (50, 10000)):
        estimate = jax.jit(jax.vmap(make_estimate(problem, proposal, draws), in_axes=(0, None)))
        logs = np.asarray(estimate(jax.random.split(jax.random.PRNGKey(draws), replicates), theta).log_marginal)
        ratios = np.exp(logs - exact)
        standard_error = ratios.std() / np.sqrt(ratios.size)
        assert abs(ratios.mean() - 1.0) < 4 * standard_error, (draws, ratios.mean(), standard_error)
        assert standard_error < 0.05
    assert np.mean(logs) < exact - 5 * logs.std() / np.sqrt(logs.size)


def test_without_the_mirror_image_and_the_prior_the_estimate_misses_mass_in_practice(tiny):
    """p(Z | Y) has two mirror-image modes; ``q`` covers one, and without the prior in the mixture its weights
    have a heavy tail: the mean of 10000 estimates is far below p(Y | X, s1) (what the defaults repair)."""
    _, _, problem, x, Y = tiny
    proposal = proposal_of(problem, "variational", symmetrise=False)
    theta = problem.unconstrain_theta({"s1": 0.5})
    (exact,), _ = marginal_by_prior_sampling(x, Y, 0.5, 1_000_000)
    estimate = jax.jit(jax.vmap(make_estimate(problem, proposal, 50), in_axes=(0, None)))
    logs = np.asarray(estimate(jax.random.split(jax.random.PRNGKey(2), 10000), theta).log_marginal)
    assert np.exp(logs - exact).mean() < 0.6


@pytest.mark.parametrize("kind", ["variational", "laplace"])
def test_the_log_estimate_has_small_variance_with_a_thousand_draws(tiny, kind):
    _, _, problem, _, _ = tiny
    proposal = proposal_of(problem, kind, defensive=0.1)
    theta = problem.unconstrain_theta({"s1": 0.5})
    estimate = jax.jit(jax.vmap(make_estimate(problem, proposal, 1000), in_axes=(0, None)))
    logs = np.asarray(estimate(jax.random.split(jax.random.PRNGKey(1), 200), theta).log_marginal)
    # about 0.05 here (a sample variance of 200 replicates: +-10% or more); Doucet et al. ask for below 1-2
    assert logs.var() < 0.1


def test_blocked_metropolis_samples_a_known_gaussian_and_adapts_its_covariance():
    """A correlated 3-D Gaussian in blocks (0, 1) and (2,): moments within 4 MCSE; each block's proposal covariance
    follows 2.38^2 / d times the target's block covariance."""
    import arviz as az

    from gpdsl.inference.driver import run_chains

    covariance = np.array([[1.0, 0.8, 0.0], [0.8, 1.0, 0.3], [0.0, 0.3, 2.0]])
    precision = jnp.asarray(np.linalg.inv(covariance))

    def log_terms(key, theta, current):
        return (-0.5 * theta @ precision @ theta,), {"value": theta[0]}

    init, step = make_blocked_metropolis(log_terms, [[0, 1], [2]], g0=100)
    states = jax.vmap(init)(jax.random.split(jax.random.PRNGKey(0), 4), jnp.zeros((4, 3)))
    result = run_chains(step, states, jax.random.PRNGKey(1), 1000, 4000, progress=False,
                        extract=lambda s: s.position)
    draws = np.asarray(result.draws)
    for i, sd in enumerate(np.sqrt(np.diag(covariance))):
        mcse = float(az.mcse(draws[..., i]))
        assert abs(draws[..., i].mean()) < 4 * mcse
        mcse_sd = float(az.mcse(draws[..., i], method="sd"))
        assert abs(draws[..., i].std() - sd) < 4 * mcse_sd
    conditional_first_block = 2.38**2 / 2 * covariance[:2, :2]
    adapted = np.asarray(result.final_state.covariances[0]).mean(axis=0)
    assert np.allclose(adapted, conditional_first_block, rtol=0.25, atol=0.1)


@pytest.mark.parametrize("vectorised", [True, False])
def test_delayed_acceptance_samples_the_target_whatever_the_surrogate(vectorised):
    """The first stage screens by a Gaussian of another mean and scale; the chain still has the target's moments
    (within 4 MCSE), a proposal the first stage stops is never accepted, and some are stopped."""
    import arviz as az

    from gpdsl.inference.driver import run_chains
    from gpdsl.inference.mcmc.blocked_metropolis import Screen

    covariance = np.array([[1.0, 0.6], [0.6, 2.0]])
    precision = jnp.asarray(np.linalg.inv(covariance))

    def evaluate(theta):
        shifted = theta - jnp.array([0.5, -0.3])
        return (-0.5 * jnp.sum(shifted ** 2) / 1.7,), {"screen": jnp.sum(theta)}

    def log_terms(key, theta, current, screened):
        return (-0.5 * theta @ precision @ theta,), {"value": screened["screen"]}

    screen = Screen(evaluate, lambda screened, current: {"value": screened["screen"]})
    init, step = make_blocked_metropolis(log_terms, [[0], [1]], g0=100, screen=screen)
    states = jax.vmap(init)(jax.random.split(jax.random.PRNGKey(0), 4), jnp.zeros((4, 2)))
    result = run_chains(step, states, jax.random.PRNGKey(1), 1000, 5000, progress=False,
                        extract=lambda s: s.position, vectorised=vectorised)
    draws = np.asarray(result.draws)
    for i, sd in enumerate(np.sqrt(np.diag(covariance))):
        assert abs(draws[..., i].mean()) < 4 * float(az.mcse(draws[..., i]))
        assert abs(draws[..., i].std() - sd) < 4 * float(az.mcse(draws[..., i], method="sd"))
    screened, accepted = np.asarray(result.infos.screened), np.asarray(result.infos.accepted)
    assert not (accepted & ~screened).any() and 0.2 < screened.mean() < 0.95


def test_a_rejected_proposal_keeps_the_current_estimate():
    """The state's terms change only when a proposal is accepted (never re-estimated)."""
    calls = []

    def log_terms(key, theta, current):
        calls.append(1)
        noise = jax.random.normal(key)
        return (-0.5 * jnp.sum(theta**2) + noise,), {"noise": noise}

    init, step = make_blocked_metropolis(log_terms, [[0], [1]])
    state = init(jax.random.PRNGKey(0), jnp.zeros(2))
    for k in range(30):
        new, info = step(jax.random.PRNGKey(k + 1), state)
        if not bool(info.accepted.any()):
            assert float(new.mh.log_density[0]) == float(state.mh.log_density[0])
        state = new


def test_blocks_must_split_the_coordinates():
    with pytest.raises(MethodError, match="exactly one block"):
        check_blocks([[0, 1], [1, 2]], 3)
    with pytest.raises(MethodError, match="exactly one block"):
        check_blocks([[0]], 2)
    with pytest.raises(MethodError, match="at least one"):
        check_blocks([[0, 1], []], 2)


@pytest.mark.parametrize("correlation, delayed, proposal, refreshes", [
    pytest.param(0.0, False, "variational", 0, marks=pytest.mark.slow), (0.95, False, "variational", 0),
    pytest.param(0.95, True, "variational", 0, marks=pytest.mark.slow), (0.95, True, "laplace", 0),
    (0.95, True, "laplace", 2), pytest.param(0.0, False, "variational", 1, marks=pytest.mark.slow)])
def test_pm_gplvm_chain_recovers_the_grid_posterior_of_one_hyperparameter(tiny, correlation, delayed, proposal,
                                                                          refreshes):
    """Posterior mean and sd of s1 from 4 chains within 4 MCSE of the posterior on a grid (the marginal likelihood
    at each grid point by :func:`marginal_by_prior_sampling`); with and without refreshes of the draws' variates."""
    import arviz as az

    model, data, _, x, Y = tiny
    settings = PMGPLVMSettings(chains=4, warmup=300, draws=1500, num_importance=200, g0=100, num_inducing=6,
                               e_step_iterations=200, e_step_tol=1e-6, correlation=correlation,
                               delayed_acceptance=delayed, proposal=proposal, noise_refreshes=refreshes)
    results = run(model, data, "pm-gplvm", settings, seed=5)
    draws = np.asarray(results.posterior["s1"])
    grid = np.linspace(0.01, 2.5, 80)
    log_posterior = marginal_by_prior_sampling(x, Y, grid, 100_000)[0] + 3 * np.log(grid) - 8 * grid
    weights = np.exp(log_posterior - log_posterior.max())
    weights /= weights.sum()
    mean = np.sum(weights * grid)
    sd = np.sqrt(np.sum(weights * (grid - mean) ** 2))
    assert abs(draws.mean() - mean) < 4 * float(az.mcse(draws)), (draws.mean(), mean, float(az.mcse(draws)))
    assert abs(draws.std() - sd) < 4 * float(az.mcse(draws, method="sd")), (draws.std(), sd)
    assert np.asarray(results.sample_stats["block_acceptance_rate"]).shape == (4, 1500, 1)
    assert 0.1 < float(results.sample_stats["acceptance_rate"].mean()) < 0.9


def test_unknown_or_repeated_block_names_are_refused_before_the_fit(tiny):
    model, data, _, _, _ = tiny
    with pytest.raises(MethodError, match="bogus, which is not a hyperparameter; the hyperparameters are s1"):
        run(model, data, "pm-gplvm", PMGPLVMSettings(blocks=[["bogus"]]), seed=1)
    with pytest.raises(MethodError, match="s1 \\(2 times\\)"):
        run(model, data, "pm-gplvm", PMGPLVMSettings(blocks=[["s1"], ["s1"]]), seed=1)
    with pytest.raises(MethodError, match="num_importance"):
        PMGPLVMSettings(num_importance=0)


def test_cli_samples_latents_predicts_and_writes_groups_loo_reads(tmp_path):
    """``gpdsl sample --method pm-gplvm`` on the supervised GPLVM: hyperparameters and latent inputs in the posterior,
    acceptance per block, a pointwise log_likelihood ArviZ's LOO reads, replicates, and predictions at new inputs."""
    import json
    import subprocess
    import sys

    from gpdsl.results import arviz_compat, read_netcdf

    x = np.linspace(0.0, 4 * np.pi, 12)
    Y = np.stack([np.cos(x), np.sin(x)], axis=1) * 0.6 + 0.05 * np.random.default_rng(0).normal(size=(12, 2))
    data, new = tmp_path / "data.json", tmp_path / "new.json"
    data.write_text(json.dumps({"N": 12, "Q": 1, "D": 2, "X": x[:, None].tolist(), "Y": (Y - Y.mean(0)).tolist()}))
    new.write_text(json.dumps({"X": [[1.0], [2.5], [7.0]]}))
    out = tmp_path / "pm.nc"
    done = subprocess.run(
        [sys.executable, "-m", "gpdsl.cli", "sample", "models/supervised_gplvm.gpm", "--data", str(data), "--method",
         "pm-gplvm", "--chains", "2", "--warmup", "20", "--draws", "30", "--num-importance", "50", "--block",
         "s1,theta", "--block", "theta_S,noise", "--latent-sweeps", "5", "--predict", str(new), "--out", str(out),
         "--seed", "4", "--quiet"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    results = read_netcdf(out)
    groups = arviz_compat.groups(results)
    assert groups["posterior"]["Z"].shape == (2, 30, 12, 1)
    assert groups["sample_stats"]["block_acceptance_rate"].shape == (2, 30, 2)
    assert groups["log_likelihood"]["Y"].shape == (2, 30, 12, 2)
    assert groups["posterior_predictive"]["Y"].shape == (2, 30, 12, 2)
    assert groups["predictions"]["Y_new"].shape == (2, 30, 3, 2)
    assert np.all(np.asarray(groups["predictions"]["Y_new_variance"]) > 0)
    assert np.isfinite(arviz_compat.loo(results)["elpd_loo"])


def test_estimate_spread_summarises_replicates_against_the_number_of_draws(tiny):
    """The running estimates at q = S are the estimates themselves; their variance falls as q grows."""
    from gpdsl.inference.mcmc.estimate_variance import estimate_spread

    _, _, problem, _, _ = tiny
    proposal = proposal_of(problem, "variational", defensive=0.1)
    theta = problem.unconstrain_theta({"s1": 0.5})
    spread = estimate_spread(problem, proposal, theta, 200, 400, jax.random.PRNGKey(3))
    direct = jax.jit(jax.vmap(make_estimate(problem, proposal, 200), in_axes=(0, None)))
    logs = np.asarray(direct(jax.random.split(jax.random.PRNGKey(4), 400), theta).log_marginal)
    assert spread.draws[-1] == 200 and spread.variance.shape == (200,)
    assert abs(spread.mean[-1] - logs.mean()) < 4 * np.sqrt(spread.variance[-1] / 400 + logs.var() / 400)
    assert spread.variance[-1] < spread.variance[9]
    assert spread.p10[-1] <= spread.median[-1] <= spread.p90[-1]


def test_pm_variance_command_prints_the_variance_and_plots(tmp_path, tiny):
    import json

    from gpdsl.cli import main

    _, data, _, _, _ = tiny
    path = tmp_path / "data.json"
    path.write_text(json.dumps({k: np.asarray(v).tolist() for k, v in data.items()}))
    model = tmp_path / "tiny.gpm"
    model.write_text(TINY)
    assert main(["pm-variance", str(model), "--data", str(path), "--replicates", "50", "--num-importance", "100",
                 "--seed", "2", "--png", str(tmp_path / "spread.png")]) == 0
    assert (tmp_path / "spread.png").stat().st_size > 1000
    assert main(["pm-variance", str(model), "--data", str(path), "--draw", "1", "2"]) == 1


def test_warm_start_is_offered_only_as_an_approximate_option(tiny):
    """The warm-started chain starts each E-step from the current q (fewer iterations) and says it is not exact."""
    from gpdsl.results.method_output import results_json

    model, data, _, _, _ = tiny
    common = dict(chains=2, warmup=20, draws=20, num_importance=20, num_inducing=6, latent_sweeps=0,
                  e_step_tol=1e-8, e_step_iterations=300, correlation=0.0, proposal="variational")
    exact = run(model, data, "pm-gplvm", PMGPLVMSettings(**common), seed=2)
    warm = run(model, data, "pm-gplvm", PMGPLVMSettings(warm_start=True, **common), seed=2)
    assert results_json(exact, "report")["exact"] is True
    assert results_json(warm, "report")["exact"] is False
    iterations = lambda r: float(np.asarray(r.sample_stats["proposal_iterations"]).mean())  # noqa: E731
    assert iterations(warm) < iterations(exact)
    with pytest.raises(SettingError, match="warm_start.*proposal = 'variational'"):
        PMGPLVMSettings(warm_start=True, proposal="laplace")


def test_correlated_noise_keeps_the_standard_normal_and_its_correlation():
    from gpdsl.inference.mcmc.gplvm_estimate import correlated_noise, draw_noise

    noise = draw_noise(jax.random.PRNGKey(0), 4000, 2, 5)
    moved = correlated_noise(noise, jax.random.PRNGKey(1), 0.9)
    u, v = np.ravel(noise.normals), np.ravel(moved.normals)
    assert abs(v.std() - 1.0) < 0.01 and abs(np.corrcoef(u, v)[0, 1] - 0.9) < 0.01
    assert moved.picks.shape == noise.picks.shape and moved.flips.shape == noise.flips.shape


def test_a_refresh_moves_the_variates_at_fixed_xi_and_keeps_the_estimate_of_them(tiny):
    """After refreshes the state's ``log p_hat`` is the estimate of its new variates under the kept proposal, and a
    lucky estimate (the largest of 200 at one ``xi``) falls back towards the bulk of the estimates."""
    from gpdsl.inference.mcmc.gplvm_estimate import draw_noise, log_mean_weight, make_noise_refresh

    _, _, problem, _, _ = tiny
    laplace = make_laplace(problem, jnp.zeros((problem.num_points, problem.latent_dim)), starts=2)
    proposal = laplace_proposal(problem, laplace, defensive=0.1)
    estimate = make_estimate(problem, proposal, 20, keep_fitted=True)
    theta = jnp.asarray([0.0])

    def at(key):
        noise = draw_noise(key, 20, problem.latent_dim, problem.num_points)
        return estimate(key, theta, noise=noise)

    estimates = jax.jit(jax.vmap(at))(jax.random.split(jax.random.PRNGKey(0), 200))
    values = np.asarray(estimates.log_marginal)
    lucky = jax.tree.map(lambda leaf: leaf[int(np.argmax(values))], estimates)
    refresh = jax.jit(make_noise_refresh(proposal, 20, steps=25))
    refreshed = refresh(jax.random.PRNGKey(1), theta, lucky)
    again = log_mean_weight(proposal.log_weights(theta, lucky.fitted, refreshed.noise), 20)[0]
    assert np.isclose(float(refreshed.log_marginal), float(again))
    assert not np.allclose(np.asarray(refreshed.noise.normals), np.asarray(lucky.noise.normals))
    falls = [float(refresh(jax.random.PRNGKey(k), theta, lucky).log_marginal) for k in range(2, 12)]
    halfway = 0.5 * (values.max() + np.median(values))
    assert np.median(falls) < halfway, (np.median(falls), values.max(), np.median(values))
    with pytest.raises(SettingError, match="noise_refreshes"):
        PMGPLVMSettings(noise_refreshes=-1)
