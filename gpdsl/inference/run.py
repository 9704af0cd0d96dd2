"""Running gpdsl's own engines on a model and turning their draws into results.

Methods for models with one latent GP vector and a factorised likelihood (see
:func:`~gpdsl.inference.families.latent_gp.latent_gp`):

``pm``
    pseudo-marginal MH for the hyperparameters (importance sampling with a Laplace or EP proposal);
``mcmc-ep``
    MH on the EP approximate marginal likelihood (approximate, not exact);
``gibbs``
    elliptical slice sampling of f alternated with SA, AA, SURR or SURR-slice updates of theta;
``ep-ml``
    type-II maximum likelihood on the EP marginal (a point estimate, stored as one draw).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.backends.jax.simulate import simulate
from gpdsl.backends.stan.nuts import data_groups
from gpdsl.errors import MethodError
from gpdsl.inference.driver import run_chains
from gpdsl.inference.families.latent_gp import LatentGP, latent_gp
from gpdsl.inference.mcmc.gibbs import THETA_UPDATES, make_gibbs
from gpdsl.inference.mcmc.pseudo_marginal import (
    make_pseudo_marginal,
    proposal_covariance_of,
)
from gpdsl.ir.nodes import Model
from gpdsl.results.arviz_compat import root_attrs
from gpdsl.results.build import build_results

ENGINE_METHODS = ("pm", "mcmc-ep", "gibbs", "ep-ml")


@dataclass
class EngineSettings:
    """Options of the engines (each method reads the ones that concern it).

    Attributes
    ----------
    approximation : {"ep", "laplace"}
        Importance distribution of ``pm``.
    num_importance : int
        ``N_imp`` of ``pm``.
    target_acceptance : float
        Acceptance rate the random-walk scale is tuned towards during warmup.
    sample_latent : bool
        ``pm``/``mcmc-ep``: also sample f by ESS given theta (for predictions from f).
    theta_update : {"sa", "aa", "surr", "surr_slice"}
        ``gibbs``: the hyperparameter update.
    repeat_f, repeat_theta : int
        ``gibbs``: updates of f and of theta per iteration (Table 3 of the paper uses 20 each).
    surrogate_variance : float
        ``gibbs`` with SURR: the diagonal surrogate noise.
    tol : float or None
        Convergence tolerance of Laplace/EP (default ``n / 1e4``).
    proposal_covariance : list of lists, optional
        ``pm``/``mcmc-ep``: a fixed random-walk covariance on the unconstrained hyperparameters (no
        adaptation), e.g. :func:`adapted_proposal_covariance` of an earlier run.
    """

    approximation: str = "ep"
    num_importance: int = 1
    target_acceptance: float = 0.25
    sample_latent: bool = False
    theta_update: str = "surr"
    repeat_f: int = 1
    repeat_theta: int = 1
    surrogate_variance: float = 1.0
    tol: float | None = None
    proposal_covariance: list | None = None


def prior_initial_thetas(problem: LatentGP, key, chains: int) -> jnp.ndarray:
    """Unconstrained hyperparameters drawn from their priors, one row per chain (as in the paper)."""
    def draw(sub):
        truth, _ = simulate(problem.jax_model, sub)
        return problem.unconstrain_theta({name: truth[name] for name in problem.theta_names})

    return jax.jit(jax.vmap(draw))(jax.random.split(key, chains))


def _engine(problem: LatentGP, method: str, settings: EngineSettings):
    if method in ("pm", "mcmc-ep"):
        init, step = make_pseudo_marginal(
            problem, "ep" if method == "mcmc-ep" else settings.approximation, settings.num_importance,
            settings.target_acceptance, sample_latent=settings.sample_latent, tol=settings.tol,
            use_approximate_marginal=method == "mcmc-ep", proposal_covariance=settings.proposal_covariance)
        extract = lambda s: {"theta": s.theta, "f": s.f, "log_marginal": s.log_marginal}  # noqa: E731
        return (lambda key, theta: init(key, theta)), step, extract
    if settings.theta_update not in THETA_UPDATES:
        raise MethodError(f"unknown hyperparameter update '{settings.theta_update}'; use one of "
                          f"{', '.join(THETA_UPDATES)}")
    init, step = make_gibbs(problem, settings.theta_update, settings.repeat_f, settings.repeat_theta,
                            settings.target_acceptance, surrogate_variance=settings.surrogate_variance)
    extract = lambda s: {"theta": s.latent.theta, "f": s.latent.f}  # noqa: E731
    return (lambda key, theta: init(theta)), step, extract


def sample_engine(model: Model, data: dict, method: str, settings: EngineSettings | None = None, *,
                  chains: int = 4, warmup: int = 1000, draws: int = 1000, seed: int | None = None,
                  progress: bool = True, checkpoint_path=None, new_inputs=None):
    """Run one of gpdsl's engines and return results in the common format.

    Parameters
    ----------
    model : Model
        The checked model.
    data : dict
        Validated data.
    method : {"pm", "mcmc-ep", "gibbs", "ep-ml"}
        The engine (see the module docstring).
    settings : EngineSettings, optional
        Engine options.
    chains, warmup, draws, seed : int
        Chains (vectorised), warmup and sampling iterations per chain, random seed.
    progress : bool
        Show a progress bar.
    checkpoint_path : path, optional
        Write the draws so far after each compiled segment (atomically).
    new_inputs : array_like, optional
        Inputs ``(m, d)`` at which to predict class probabilities; stored in the ``predictions``
        group as ``<y>_prob`` with dims ``(chain, draw, <N>_new)``.
    """
    if method not in ENGINE_METHODS:
        raise MethodError(f"unknown method '{method}'; gpdsl's engines are {', '.join(ENGINE_METHODS)}")
    settings = settings or EngineSettings()
    if settings.proposal_covariance is not None and method not in ("pm", "mcmc-ep"):
        raise MethodError(f"a fixed proposal covariance (--proposal-from) is for pm and mcmc-ep, not {method}")
    started = time.perf_counter()
    sample_f = method == "gibbs"
    problem = latent_gp(model, data, method, marginalise=not sample_f)
    key = jax.random.PRNGKey(0 if seed is None else seed)
    key_init, key_estimate, key_run = jax.random.split(key, 3)
    thetas = prior_initial_thetas(problem, key_init, chains)
    if method == "ep-ml":
        from gpdsl.inference.optimise.ep_ml import ep_type2_ml

        theta, log_marginal, report = ep_type2_ml(problem, thetas, tol=settings.tol)
        theta_draws = np.asarray(theta)[None, None, :]
        stats = {"log_marginal": np.asarray([[log_marginal]])}
        extra = {"optimizer": report}
        f_draws = None
    else:
        init, step, extract = _engine(problem, method, settings)
        # jitted: one compilation instead of one per operation of the vmapped initialisation
        states = jax.jit(jax.vmap(init))(jax.random.split(key_estimate, chains), thetas)
        result = run_chains(step, states, key_run, warmup, draws, extract=extract, progress=progress,
                            checkpoint_path=checkpoint_path)
        theta_draws = np.asarray(result.draws["theta"])
        f_draws = np.asarray(result.draws["f"]) if sample_f or settings.sample_latent else None
        stats = _sample_stats(result)
        if "log_marginal" in result.draws:
            stats["log_marginal"] = np.asarray(result.draws["log_marginal"])
        extra = {"timings": result.timings}
        if method in ("pm", "mcmc-ep"):
            extra["proposal_covariance"] = proposal_covariance_of(result.final_state).tolist()
    predictions = None
    if new_inputs is not None:
        predictions = _predictions(problem, method, settings, theta_draws, f_draws, new_inputs)
    return engine_results(model, data, problem, method, settings, theta_draws, f_draws, stats,
                          seed=seed, wall_time=time.perf_counter() - started, extra=extra, predictions=predictions)


def adapted_proposal_covariance(results) -> list:
    """The random-walk covariance a ``pm`` or ``mcmc-ep`` run adapted, averaged over its chains.

    Pass it as ``EngineSettings(proposal_covariance=...)`` to run other chains with the same, fixed
    proposal (``gpdsl sample --proposal-from FIT.nc``).

    Parameters
    ----------
    results
        Results of :func:`sample_engine` (or read back from NetCDF).

    Returns
    -------
    list of lists, shape (p, p)

    Raises
    ------
    MethodError
        When the results do not come from a ``pm`` or ``mcmc-ep`` run of gpdsl.
    """
    attrs = root_attrs(results)
    report = json.loads(attrs.get("engine_report", "{}"))
    if "proposal_covariance" not in report:
        raise MethodError(f"these results (method {attrs.get('method', 'unknown')}) hold no adapted proposal; "
                          "it comes from a run with --method pm or mcmc-ep")
    return np.mean(np.asarray(report["proposal_covariance"], dtype=float), axis=0).tolist()


def _predictions(problem: LatentGP, method: str, settings: EngineSettings, theta_draws, f_draws, new_inputs):
    from gpdsl.inference.predict.latent_gp import (
        predict_from_latent_draws,
        predict_from_theta_draws,
    )

    if f_draws is not None:
        probabilities = predict_from_latent_draws(problem, theta_draws, f_draws, new_inputs)
    else:
        approximation = settings.approximation if method == "pm" else "ep"
        probabilities = predict_from_theta_draws(problem, theta_draws, new_inputs, approximation, settings.tol)
    target = problem.node.likelihood.target.name
    points = problem.node.statement.inputs.index_shape[0]
    return {f"{target}_prob": probabilities}, {f"{target}_prob": [f"{points}_new"]}


def _sample_stats(result) -> dict:
    infos = result.infos
    names = {"acceptance_rate": "acceptance_rate", "accepted": "accepted", "cubic_ops": "cubic_ops",
             "num_shrinks": "num_shrinks", "approximation_converged": "approximation_converged",
             "num_evaluations": "num_evaluations", "proposed_log_marginal": "proposed_log_marginal"}
    return {ours: np.asarray(getattr(infos, theirs)) for theirs, ours in names.items() if hasattr(infos, theirs)}


def engine_results(model: Model, data: dict, problem: LatentGP, method: str, settings: EngineSettings,
                   theta_draws: np.ndarray, f_draws: np.ndarray | None, sample_stats: dict, *, seed, wall_time,
                   extra: dict | None = None, predictions: tuple[dict, dict] | None = None):
    """Constrained, named draws of an engine as results (ArviZ groups, dims named after sizes)."""
    chains, num_draws = theta_draws.shape[:2]
    flat = jnp.reshape(jnp.asarray(theta_draws), (chains * num_draws, -1))
    values = jax.vmap(lambda t: problem.theta_values(t)[0])(flat)
    posterior, dims = {}, {}
    for name in problem.theta_names:
        var = model.parameters[name]
        posterior[name] = np.reshape(np.asarray(values[name]), (chains, num_draws) + np.shape(values[name])[1:])
        dims[name] = list(var.type.dim_names(name))
    if f_draws is not None:
        latent = model.latents[problem.name]
        posterior[problem.name] = f_draws
        dims[problem.name] = list(latent.type.dim_names(problem.name))
    observed, constant, data_dims = data_groups(model, data)
    dims.update(data_dims)
    attrs = {"method": method, "settings": json.dumps(asdict(settings)), "seed": seed, "wall_time": wall_time,
             "model_hash": model.source_hash, "model_name": model.name, "engine": "gpdsl"}
    if extra:
        attrs["engine_report"] = json.dumps(extra, default=float)
    if predictions is not None:
        dims.update(predictions[1])
    return build_results(posterior, dims=dims, sample_stats=sample_stats, observed_data=observed,
                         constant_data=constant, attrs=attrs,
                         predictions=None if predictions is None else predictions[0])
