"""The run of ``pm-gplvm``: the variational start, the chains of blocked pseudo-marginal MH, the outputs."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.errors import MethodError
from gpdsl.inference.driver import run_chains
from gpdsl.inference.families.gplvm import GPLVMProblem
from gpdsl.inference.mcmc.blocked_metropolis import (
    check_blocks,
    make_blocked_metropolis,
)
from gpdsl.inference.mcmc.gplvm_estimate import make_estimate
from gpdsl.inference.methods.latent_chains import theta_output
from gpdsl.inference.methods.pm_gplvm import PMGPLVMSettings
from gpdsl.inference.methods.vem import VEMSettings
from gpdsl.inference.variational.e_step import make_e_step
from gpdsl.inference.variational.gp_prior_q import GPPriorGaussian
from gpdsl.inference.variational.vem import VEMFit, fit_vem_starts

PER_BLOCK_STATS = {"accepted": "block_accepted", "acceptance_rate": "block_acceptance_rate"}
PROPOSAL_STATS = {"log_marginal": "proposed_log_marginal", "bound": "e_step_bound",
                  "e_step_iterations": "e_step_iterations", "effective_draws": "effective_draws"}


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
    return VEMSettings(num_inducing=inducing, starts=settings.vem_starts, seed=seed)


def make_log_terms(problem: GPLVMProblem, settings: PMGPLVMSettings, fit: VEMFit):
    """``(rng_key, theta) -> ((log p_hat(Y | theta), log p(theta) + log Jacobian), Estimate)``."""
    updates = settings.e_step
    if updates == "auto":
        updates = "sites" if isinstance(problem.latent_q(), GPPriorGaussian) else "lbfgs"
    e_step = make_e_step(problem, fit.settings, start=(fit.params.latent, fit.params.inducing),
                         max_iterations=settings.e_step_iterations, updates=updates, tol=settings.e_step_tol)
    estimate = make_estimate(problem, e_step, settings.num_importance, symmetrise=settings.symmetrise,
                             defensive=settings.defensive)

    def log_terms(rng_key, theta):
        result = estimate(rng_key, theta)
        _, log_jacobian = problem.constrain(theta)
        return (result.log_marginal, problem.log_hyperprior(theta) + log_jacobian), result

    return log_terms


def run_pm_gplvm_chains(problem: GPLVMProblem, settings: PMGPLVMSettings, context):
    """Fit the variational start, run the chains, and collect a :class:`~gpdsl.results.method_output.MethodOutput`."""
    blocks, block_names = block_indices(problem, settings.blocks)
    if not problem.observed.all():
        raise MethodError(f"pm-gplvm needs every entry of '{problem.output}' observed; "
                          f"{int((~problem.observed).sum())} are missing (NaN)")
    fit = fit_vem_starts(problem, variational_settings(problem, settings, context.seed), progress=context.progress)
    log_terms = make_log_terms(problem, settings, fit)
    init, step = make_blocked_metropolis(
        log_terms, blocks, initial_covariance=settings.initial_covariance, g0=settings.g0,
        epsilon=settings.adapt_epsilon, adapt_after_warmup=settings.adapt_after_warmup)
    key_start, key_init, key_run = jax.random.split(jax.random.PRNGKey(context.seed), 3)
    theta_ml = jnp.asarray(fit.params.theta)
    starts = theta_ml + settings.start_noise * jax.random.normal(key_start, (settings.chains, theta_ml.size))
    states = jax.jit(jax.vmap(init))(jax.random.split(key_init, settings.chains), starts)
    result = run_chains(step, states, key_run, settings.warmup, settings.draws,
                        extract=lambda s: {"theta": s.position, "log_marginal": s.mh.log_density[0],
                                           "log_prior": s.mh.log_density[1]},
                        progress=context.progress, checkpoint_path=context.checkpoint)
    output = theta_output(problem, np.asarray(result.draws["theta"]), None, _sample_stats(result))
    output.dims.update({name: ["block"] for name in (*PER_BLOCK_STATS.values(), *PROPOSAL_STATS.values())})
    output.timings = dict(result.timings)
    output.report = _report(problem, fit, block_names, result)
    return output


def _sample_stats(result) -> dict:
    draws, infos = result.draws, result.infos
    stats = {"log_marginal": np.asarray(draws["log_marginal"]),
             "lp": np.asarray(draws["log_marginal"]) + np.asarray(draws["log_prior"]),
             "acceptance_rate": np.asarray(infos.acceptance_rate).mean(axis=-1)}
    stats.update({name: np.asarray(getattr(infos, field)) for field, name in PER_BLOCK_STATS.items()})
    stats.update({name: np.asarray(getattr(infos.proposed, field)) for field, name in PROPOSAL_STATS.items()})
    return stats


def _report(problem: GPLVMProblem, fit: VEMFit, block_names, result) -> dict:
    accepted = np.asarray(result.infos.accepted)
    return {
        "blocks": block_names,
        "block_acceptance": accepted.mean(axis=(0, 1)).tolist(),
        "proposal_covariances": [np.asarray(c).tolist() for c in result.final_state.covariances],
        "variational_start": {"bound": float(fit.bound),
                              "hyperparameters": {k: np.asarray(v).tolist() for k, v in fit.hyperparameters().items()}},
        "resumed_at": result.timings.get("resumed_at", 0),
    }
