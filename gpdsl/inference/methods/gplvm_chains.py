"""The run of ``pm-gplvm``: the variational start, the chains of blocked pseudo-marginal MH, the outputs."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.errors import MethodError
from gpdsl.inference.driver import run_chains
from gpdsl.inference.families.gplvm import GPLVMProblem
from gpdsl.inference.mcmc.blocked_metropolis import (
    Screen,
    check_blocks,
    make_blocked_metropolis,
)
from gpdsl.inference.mcmc.gplvm_estimate import (
    ImportanceProposal,
    correlated_noise,
    draw_noise,
    make_estimate,
    make_noise_refresh,
    require_observed,
    variational_proposal,
)
from gpdsl.inference.mcmc.gplvm_laplace import laplace_proposal, make_laplace
from gpdsl.inference.methods.latent_chains import chain_report, theta_describer, theta_output
from gpdsl.inference.predict.gp_prior_latents import count_points
from gpdsl.inference.progress import counted, draw_stage, stage
from gpdsl.inference.variational.e_step import make_e_step
from gpdsl.inference.variational.gp_prior_q import GPPriorGaussian
from gpdsl.inference.variational.vem import VEMFit, fit_vem_starts
from gpdsl.inference.methods.pm_gplvm import PM_GPLVM_FAMILIES
from gpdsl.settings import PMGPLVMSettings, VEMSettings

PER_BLOCK_STATS = {"accepted": "block_accepted", "acceptance_rate": "block_acceptance_rate",
                   "screened": "block_screened"}
PROPOSAL_STATS = {"log_marginal": "proposed_log_marginal", "surrogate": "proposal_surrogate",
                  "iterations": "proposal_iterations", "effective_draws": "effective_draws"}


def block_indices(problem: GPLVMProblem, blocks: list) -> tuple[list[np.ndarray], list[list[str]]]:
    """Coordinates of ``theta`` of each block of hyperparameter names (all in one block when ``blocks`` is empty).

    Raises
    ------
    MethodError
        An unknown name, or a hyperparameter in no block or in two.
    """
    by_name = {b.name: b for b in problem.theta_blocks}
    names = blocks or [list(by_name)]
    unknown = sorted({name for block in names for name in block} - set(by_name))
    if unknown:
        raise MethodError(f"--block names {', '.join(unknown)}, which {'is' if len(unknown) == 1 else 'are'} not "
                          f"a hyperparameter; the hyperparameters are {', '.join(by_name)}")
    indices = [np.concatenate([by_name[name].start + np.arange(by_name[name].size) for name in block])
               for block in names]
    try:
        return check_blocks(indices, problem.theta_dim), names
    except MethodError:
        counts = {name: sum(block.count(name) for block in names) for name in by_name}
        wrong = [f"{name} ({count} times)" for name, count in counts.items() if count != 1]
        raise MethodError(f"every hyperparameter must be in exactly one block; {', '.join(wrong)}") from None


def variational_settings(problem: GPLVMProblem, settings: PMGPLVMSettings, seed: int) -> VEMSettings:
    """The settings of the variational fit that gives the starting point and the E-step's start."""
    inducing = settings.num_inducing or min(problem.num_points, 50)
    return VEMSettings(num_inducing=inducing, starts=settings.vem_starts, seed=seed,
                       initial_values=settings.initial_values)


def make_pm_e_step(problem: GPLVMProblem, settings: PMGPLVMSettings, fit: VEMFit):
    """``theta -> EStepResult``: the E-step of the chains, from the variational fit's optimum whatever ``theta``."""
    updates = settings.e_step
    if updates == "auto":
        updates = "sites" if isinstance(problem.latent_q(), GPPriorGaussian) else "lbfgs"
    return make_e_step(problem, fit.settings, start=(fit.params.latent, fit.params.inducing),
                       max_iterations=settings.e_step_iterations, updates=updates, tol=settings.e_step_tol,
                       accelerate=settings.e_step_accelerate)


def make_pm_proposal(problem: GPLVMProblem, settings: PMGPLVMSettings, fit: VEMFit) -> ImportanceProposal:
    """The importance proposal of the chains: the E-step's ``q`` (``"variational"``) or the Laplace approximation of
    the exact posterior of the latent inputs, searched from the variational fit's means (``"laplace"``)."""
    if settings.proposal == "laplace":
        laplace = make_laplace(problem, fit.mean, starts=settings.laplace_starts, seed=fit.settings.seed,
                               max_iterations=settings.laplace_iterations, gtol=settings.laplace_gtol)
        return laplace_proposal(problem, laplace, symmetrise=settings.symmetrise, defensive=settings.defensive)
    return variational_proposal(problem, make_pm_e_step(problem, settings, fit), symmetrise=settings.symmetrise,
                                defensive=settings.defensive)


def make_log_terms(problem: GPLVMProblem, settings: PMGPLVMSettings, fit: VEMFit, proposal=None):
    """``(rng_key, theta, current=None, screened=None) -> ((log p_hat(Y | theta), log p(theta) + log Jacobian),
    Estimate)``, and with ``settings.delayed_acceptance`` the :class:`Screen` whose proposal at ``theta`` is
    ``screened`` (else None). ``proposal`` defaults to :func:`make_pm_proposal`'s."""
    if proposal is None:
        proposal = make_pm_proposal(problem, settings, fit)
    refreshed = settings.noise_refreshes > 0
    estimate = make_estimate(problem, proposal, settings.num_importance, keep_q=settings.warm_start,
                             keep_fitted=refreshed)

    def log_prior(theta):
        _, log_jacobian = problem.constrain(theta)
        return problem.log_hyperprior(theta) + log_jacobian

    def log_terms(rng_key, theta, current=None, screened=None):
        start = current.q if settings.warm_start and current is not None else None
        noise = None
        if settings.correlation > 0.0 or refreshed:
            noise = (draw_noise(rng_key, settings.num_importance, problem.latent_dim, problem.num_points)
                     if current is None or settings.correlation == 0.0
                     else correlated_noise(current.noise, rng_key, settings.correlation))
        result = estimate(rng_key, theta, start, noise, fitted=screened)
        return (result.log_marginal, log_prior(theta)), result

    if not settings.delayed_acceptance:
        return log_terms, None

    def evaluate(theta):
        fitted = proposal.fit(theta)
        return (proposal.surrogate(fitted), log_prior(theta)), fitted

    def skipped(fitted, current):
        return current._replace(log_marginal=jnp.full_like(current.log_marginal, -jnp.inf),
                                surrogate=proposal.surrogate(fitted), iterations=proposal.iterations(fitted),
                                effective_draws=jnp.full_like(current.effective_draws, jnp.nan))

    return log_terms, Screen(evaluate, skipped)


def with_noise_refresh(step, refresh):
    """``step`` of the blocked chain preceded, at each iteration, by ``refresh`` of the current estimate's variates
    at the current ``xi`` (:func:`~gpdsl.inference.mcmc.gplvm_estimate.make_noise_refresh`)."""

    def refreshed_step(rng_key, state, adapting=False):
        key_refresh, key_step = jax.random.split(rng_key)
        estimate = refresh(key_refresh, state.position, state.extras)
        mh = state.mh._replace(log_density=(estimate.log_marginal, *state.mh.log_density[1:]))
        return step(key_step, state._replace(mh=mh, extras=estimate), adapting)

    return refreshed_step


def run_pm_gplvm_chains(problem: GPLVMProblem, settings: PMGPLVMSettings, context):
    """Fit the variational start, run the chains, and collect a :class:`~gpdsl.results.method_output.MethodOutput`."""
    blocks, block_names = block_indices(problem, settings.blocks)
    require_observed(problem, "pm-gplvm")
    shown = context.progress
    with stage(f"variational start: {counted(settings.vem_starts, 'fit')} by vem", enabled=shown):
        fit = fit_vem_starts(problem, variational_settings(problem, settings, context.seed), progress=shown)
    with stage(f"{settings.proposal} proposal", enabled=shown):
        proposal = make_pm_proposal(problem, settings, fit)
        log_terms, screen = make_log_terms(problem, settings, fit, proposal)
    init, step = make_blocked_metropolis(
        log_terms, blocks, initial_covariance=settings.initial_covariance, g0=settings.g0,
        epsilon=settings.adapt_epsilon, adapt_after_warmup=settings.adapt_after_warmup,
        report=lambda estimate: estimate._replace(q=None, noise=None, fitted=None), screen=screen)
    if settings.noise_refreshes:
        step = with_noise_refresh(step, make_noise_refresh(proposal, settings.num_importance,
                                                           settings.noise_refreshes))
    key_start, key_init, key_run, key_latent = jax.random.split(jax.random.PRNGKey(context.seed), 4)
    theta_ml = jnp.asarray(fit.params.theta)
    starts = theta_ml + settings.start_noise * jax.random.normal(key_start, (settings.chains, theta_ml.size))
    with stage(f"starting {counted(settings.chains, 'chain')}: compiling, and estimating p(Y | X, xi) at each start",
               enabled=shown):
        states = jax.block_until_ready(jax.jit(jax.vmap(init))(jax.random.split(key_init, settings.chains), starts))
    result = run_chains(step, states, key_run, settings.warmup, settings.draws, thin=settings.thin,
                        extract=lambda s: {"theta": s.position, "log_marginal": s.mh.log_density[0],
                                           "log_prior": s.mh.log_density[1]},
                        progress=context.progress, segment_size=settings.segment_size,
                        describe=theta_describer(problem, lambda state: state.position),
                        # the mode searches' gradients batched over chains would run batched LAPACK solves, which
                        # can hang jaxlib's CPU thread pool (gpdsl.numerics.linalg's note)
                        vectorised=not (settings.delayed_acceptance or settings.proposal == "laplace"),
                        **context.chain_checkpoint())
    theta_draws = np.asarray(result.draws["theta"])
    output = theta_output(problem, theta_draws, None, _sample_stats(result))
    output.dims.update({name: ["block"] for name in (*PER_BLOCK_STATS.values(), *PROPOSAL_STATS.values())})
    output.timings = dict(result.timings)
    output.report = _report(problem, fit, block_names, result, settings)
    if settings.latent_sweeps:
        add_latent_draws(output, problem, theta_draws, fit.mean, settings.latent_sweeps, key_latent, progress=shown)
    if context.new_inputs is not None:
        Z_draws = output.posterior.get(problem.latent)
        if Z_draws is None:
            raise MethodError("predictions need draws of the latent inputs; run with --latent-sweeps above 0")
        with draw_stage(f"predictions at {counted(count_points(context.new_inputs), 'new input')}", theta_draws,
                        shown):
            output.predictions, prediction_dims = draw_predictions(problem, theta_draws, Z_draws, context.new_inputs,
                                                                   jax.random.fold_in(key_latent, 1))
        output.dims.update(prediction_dims)
    return output


def add_latent_draws(output, problem: GPLVMProblem, theta_draws, initial_Z, sweeps: int, rng_key, *,
                     progress: bool = False) -> None:
    """Draws of the latent inputs given each kept ``theta`` (Alg. 2), and from them the pointwise log-likelihood
    (given a draw of ``F``) and replicates of the outputs, into ``output``; each stage shows a bar on standard
    error with ``progress``."""
    from gpdsl.inference.mcmc.latent_inputs_ess import sample_latent_inputs
    from gpdsl.inference.predict.supervised_gplvm import (
        log_likelihood,
        replicate_outputs,
    )

    key_z, key_f, key_y = jax.random.split(rng_key, 3)
    started = time.perf_counter()
    with draw_stage(f"latent inputs: {counted(sweeps, 'elliptical slice step')} per draw", theta_draws, progress):
        Z_draws = sample_latent_inputs(problem, theta_draws, key_z, initial_Z=initial_Z, sweeps=sweeps)
    output.posterior[problem.latent] = Z_draws
    with draw_stage("pointwise log-likelihood", theta_draws, progress):
        log_likelihoods = log_likelihood(problem, theta_draws, Z_draws, key_f, per_output=True)
    output.log_likelihood = {problem.output: log_likelihoods}
    with draw_stage("posterior predictive replicates", theta_draws, progress):
        output.posterior_predictive = {problem.output: replicate_outputs(problem, theta_draws, Z_draws, key_y)}
    output.report["latent_seconds"] = time.perf_counter() - started


def draw_predictions(problem: GPLVMProblem, theta_draws, Z_draws, new_inputs, rng_key) -> tuple[dict, dict]:
    """The predictions group at new inputs of the latent GP (eqs. 6-8): per draw one ``z*`` and one ``y*``, and the
    output GP's predictive mean and variance given that ``z*``."""
    from collections.abc import Mapping

    from gpdsl.inference.predict.supervised_gplvm import predict

    if isinstance(new_inputs, Mapping):
        names = [name for name in problem.latent_prior.statement.inputs.names if name]
        new_inputs = {name: new_inputs[name] for name in names if name in new_inputs}
    prediction = predict(problem, theta_draws, Z_draws, new_inputs, rng_key)
    model = problem.jax_model.model
    output, latent = problem.output, problem.latent
    point = f"{model.data[output].type.dim_names(output)[0]}_new"
    output_dims = [point, model.data[output].type.dim_names(output)[1]]
    latent_dims = [point, model.latents[latent].type.dim_names(latent)[1]]
    values = {f"{output}_new": prediction.sample, f"{output}_new_mean": prediction.mean,
              f"{output}_new_variance": prediction.variance, f"{latent}_new": prediction.latent_sample}
    dims = {f"{output}_new": output_dims, f"{output}_new_mean": output_dims, f"{output}_new_variance": [point],
            f"{latent}_new": latent_dims}
    return {name: np.asarray(value) for name, value in values.items()}, dims


def _sample_stats(result) -> dict:
    draws, infos = result.draws, result.infos
    stats = {"log_marginal": np.asarray(draws["log_marginal"]),
             "lp": np.asarray(draws["log_marginal"]) + np.asarray(draws["log_prior"]),
             "acceptance_rate": np.asarray(infos.acceptance_rate).mean(axis=-1)}
    stats.update({name: np.asarray(getattr(infos, field)) for field, name in PER_BLOCK_STATS.items()})
    stats.update({name: np.asarray(getattr(infos.proposed, field)) for field, name in PROPOSAL_STATS.items()})
    return stats


def _report(problem: GPLVMProblem, fit: VEMFit, block_names, result, settings: PMGPLVMSettings) -> dict:
    accepted = np.asarray(result.infos.accepted)
    return {
        "blocks": block_names,
        "block_acceptance": accepted.mean(axis=(0, 1)).tolist(),
        "proposal_covariances": [np.asarray(c).tolist() for c in result.final_state.covariances],
        "variational_start": {"bound": float(fit.bound),
                              "hyperparameters": {k: np.asarray(v).tolist() for k, v in fit.hyperparameters().items()}},
        **chain_report(result),
        "exact": not settings.warm_start,
        "correlation": settings.correlation,
        "noise_refreshes": settings.noise_refreshes,
        "delayed_acceptance": settings.delayed_acceptance,
        "proposal": settings.proposal,
        "block_screen_pass": np.asarray(result.infos.screened, dtype=float).mean(axis=(0, 1)).tolist(),
    }


def estimate_spread_at(model, data, settings: PMGPLVMSettings, seed: int, hyperparameters: dict | None,
                       replicates: int, num_importance: int | None = None):
    """The spread of the chains' estimate at one ``xi`` (:func:`~gpdsl.inference.mcmc.estimate_variance.estimate_spread`).

    The variational fit and the proposal are those of a ``pm-gplvm`` run with ``settings`` and ``seed`` (so the
    same as that run's). ``hyperparameters`` (constrained, by name) default to the variational estimate.

    Returns
    -------
    spread : EstimateSpread
    hyperparameters : dict
        Where it was computed.
    """
    from gpdsl.inference.families.gplvm import gplvm_view
    from gpdsl.inference.mcmc.estimate_variance import estimate_spread
    from gpdsl.ir.families import classify

    _, facts = classify(model).require(PM_GPLVM_FAMILIES, "pm-gplvm")
    problem = gplvm_view(model, data, facts)
    fit = fit_vem_starts(problem, variational_settings(problem, settings, seed))
    if hyperparameters is None:
        theta = jnp.asarray(fit.params.theta)
    else:
        unknown = sorted(set(problem.theta_names) - set(hyperparameters))
        if unknown:
            raise MethodError(f"no value for the hyperparameters {', '.join(unknown)}")
        theta = problem.unconstrain_theta({name: jnp.asarray(hyperparameters[name]) for name in problem.theta_names})
    spread = estimate_spread(problem, make_pm_proposal(problem, settings, fit), theta,
                             num_importance or settings.num_importance, replicates, jax.random.PRNGKey(seed + 1))
    values = {name: np.asarray(value).tolist() for name, value in problem.theta_values(theta).items()}
    return spread, values
