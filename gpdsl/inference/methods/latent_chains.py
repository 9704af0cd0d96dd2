"""What the Markov chain methods for latent-GP models share: starting points, the chain loop, outputs.

``pm``, ``mcmc-ep`` and ``gibbs`` each build an engine (``init(rng_key, theta)``, ``step(rng_key,
state)``) on the :class:`~gpdsl.inference.families.latent_gp.LatentGP` view; from there the run is the
same: hyperparameters drawn from their priors (one row per chain, as in Filippone & Girolami 2014),
the driver's compiled chains, and draws turned into a :class:`~gpdsl.results.method_output.MethodOutput`
(whose pointwise and prediction groups :mod:`gpdsl.inference.methods.draw_groups` then adds).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.backends.jax.simulate import simulate
from gpdsl.inference.driver import run_chains
from gpdsl.inference.families.latent_gp import LatentGP, latent_gp_view
from gpdsl.ir.families import HSGP_LATENT_GP, LATENT_GP, LATENT_GP_EXTERNAL, STATE_SPACE_LATENT_GP
from gpdsl.results.method_output import MethodOutput

STAT_NAMES = ("acceptance_rate", "accepted", "cubic_ops", "num_shrinks", "approximation_converged",
              "num_evaluations", "proposed_log_marginal")


def prior_initial_thetas(problem: LatentGP, key, chains: int, initial_values=None) -> jnp.ndarray:
    """Unconstrained hyperparameters drawn from their priors, one row per chain (as in the paper); those named in
    ``initial_values`` (constrained, by name) are set to them in every chain."""
    fixed = dict(initial_values or {})

    def draw(sub):
        truth, _ = simulate(problem.jax_model, sub, observe=False)
        values = {name: truth[name] for name in problem.theta_names}
        for name, value in fixed.items():
            values[name] = jnp.broadcast_to(jnp.asarray(value, jnp.float64), jnp.shape(values[name]))
        return problem.unconstrain_theta(values)

    return jax.jit(jax.vmap(draw))(jax.random.split(key, chains))


def view(model, data, context, grid: bool = True) -> LatentGP:
    """The latent-GP view of the model the registry classified (``context.facts``): over the basis weights for a
    Hilbert-space approximate GP (:mod:`gpdsl.inference.families.hsgp`); with ``grid``, over the whitened grid vector
    for a latent GP on a full grid with a separable kernel (:mod:`gpdsl.inference.families.latent_grid`)."""
    if context.family == HSGP_LATENT_GP:
        from gpdsl.inference.families.hsgp import hsgp_view

        return hsgp_view(model, data, context.facts, allow_external=context.allow_external)
    if context.family == STATE_SPACE_LATENT_GP:
        from gpdsl.inference.families.state_space_latent import state_space_latent_view

        return state_space_latent_view(model, data, context.facts, allow_external=context.allow_external)
    if grid and context.family in (LATENT_GP, LATENT_GP_EXTERNAL):
        from gpdsl.inference.families.latent_grid import grid_latent_view

        return grid_latent_view(model, data, context.facts, allow_external=context.allow_external)
    return latent_gp_view(model, data, context.facts, allow_external=context.allow_external)


def run_latent_chains(problem: LatentGP, engine, settings, context, *, keep_latent: bool,
                      report=None) -> MethodOutput:
    """Run ``engine = (init, step, extract)`` from prior draws and collect a method output.

    Parameters
    ----------
    problem : LatentGP
    engine : tuple
        ``init(rng_key, theta)``, ``step(rng_key, state)`` and ``extract(state)`` giving a dict with
        ``theta`` and ``f`` (and ``log_marginal`` when the engine estimates it).
    settings : ChainSettings
        Chains, warmup and draws.
    context : RunContext
        Seed, progress, checkpoint and new inputs.
    keep_latent : bool
        Store the draws of f in the posterior.
    report : callable, optional
        ``report(chain_result) -> dict`` of facts for the results' report.
    """
    init, step, extract = engine
    key = jax.random.PRNGKey(context.seed)
    key_init, key_estimate, key_run = jax.random.split(key, 3)
    thetas = prior_initial_thetas(problem, key_init, settings.chains, settings.initial_values)
    states = jax.jit(jax.vmap(init))(jax.random.split(key_estimate, settings.chains), thetas)
    result = run_chains(step, states, key_run, settings.warmup, settings.draws, extract=extract, thin=settings.thin,
                        progress=context.progress, segment_size=settings.segment_size,
                        describe=theta_describer(problem, lambda state: extract(state)["theta"]),
                        **context.chain_checkpoint())
    theta_draws = np.asarray(result.draws["theta"])
    f_draws = np.asarray(result.draws["f"]) if keep_latent else None
    stats = {name: np.asarray(getattr(result.infos, name)) for name in STAT_NAMES if hasattr(result.infos, name)}
    if "log_marginal" in result.draws:
        stats["log_marginal"] = np.asarray(result.draws["log_marginal"])
    output = theta_output(problem, theta_draws, f_draws, stats)
    output.timings = dict(result.timings)
    output.report = {**chain_report(result), **(report(result) if report else {})}
    return output


def chain_report(result) -> dict:
    """What every chain method reports from the driver: the iteration a resumed run started from, and the chains
    (from 1) that did not move in warmup (``stuck_chains``) with a sentence naming them (``warnings``)."""
    report = {"resumed_at": result.timings.get("resumed_at", 0)}
    if result.stuck_chains:
        report.update(stuck_chains=[chain + 1 for chain in result.stuck_chains], warnings=[result.stuck_message])
    return report


def theta_describer(problem, theta_of):
    """``describe(state) -> {name: constrained value}`` of the hyperparameters ``theta_of(state)`` (unconstrained),
    which the driver shows for a chain that cannot start or is stuck."""
    def describe(state):
        values, _ = problem.constrain(jnp.asarray(theta_of(state)))
        return {name: values[name] for name in problem.theta_names}

    return describe


def theta_output(problem: LatentGP, theta_draws: np.ndarray, f_draws: np.ndarray | None,
                 sample_stats: dict) -> MethodOutput:
    """Constrained, named draws of unconstrained ``theta`` (and of f) as a method output."""
    chains, num_draws = theta_draws.shape[:2]
    flat = jnp.reshape(jnp.asarray(theta_draws), (chains * num_draws, -1))
    values = jax.vmap(lambda t: problem.constrain(t)[0])(flat)
    posterior = {name: np.reshape(np.asarray(values[name]), (chains, num_draws) + np.shape(values[name])[1:])
                 for name in problem.theta_names}
    if f_draws is not None:
        posterior.update(problem.split(problem.with_mean(theta_draws, f_draws)))
    return MethodOutput(posterior, sample_stats, versions={"jax": jax.__version__})

