"""The ``pm`` and ``mcmc-ep`` methods: Metropolis-Hastings on the hyperparameters of a latent-GP model.

``pm`` is exact: the marginal likelihood p(y | theta) is estimated without bias by importance sampling
from a Laplace or EP approximation (Filippone & Girolami 2014, Alg. 1). ``mcmc-ep`` uses the EP
approximate marginal itself (approximate, as in the paper's MCMC-EP baseline).
"""

from __future__ import annotations

from gpdsl.likelihoods.approximation_needs import approximation_refusal
from gpdsl.settings.sampling import MCMCEPSettings, PseudoMarginalSettings

EP_ALTERNATIVES = "use --method pm --approximation laplace, or --method gibbs"
"""What ``mcmc-ep`` and ``ep-ml``, which have EP only, suggest for a model EP cannot run and Laplace can."""


def pm_refusal(model, facts, settings: PseudoMarginalSettings) -> str | None:
    """Why ``pm`` with ``settings`` cannot run the latent-GP model of ``facts``, or None."""
    return approximation_refusal(facts, settings.approximation)


def ep_refusal(model, facts, settings) -> str | None:
    """Why a method on the EP approximation alone (``mcmc-ep``, ``ep-ml``) cannot run the model, or None; the
    message suggests ``pm --approximation laplace`` only where Laplace runs the model."""
    laplace_runs = approximation_refusal(facts, "laplace") is None
    return approximation_refusal(facts, "ep", EP_ALTERNATIVES if laplace_runs else "use --method gibbs")


def run_pm(model, data, settings: PseudoMarginalSettings, context):
    """Run ``pm`` (see the module docstring); returns a :class:`~gpdsl.results.method_output.MethodOutput`."""
    return _run(model, data, settings, context, pm_engine, settings.approximation)


def run_mcmc_ep(model, data, settings: MCMCEPSettings, context):
    """Run ``mcmc-ep`` (see the module docstring)."""
    return _run(model, data, settings, context, mcmc_ep_engine, "ep")


def pm_engine(problem, settings: PseudoMarginalSettings):
    """``(init, step, extract)`` of ``pm`` on a latent-GP view."""
    return _engine(problem, settings, settings.approximation, settings.num_importance, approximate=False)


def mcmc_ep_engine(problem, settings: MCMCEPSettings):
    """``(init, step, extract)`` of ``mcmc-ep`` on a latent-GP view."""
    return _engine(problem, settings, "ep", 1, approximate=True)


def _engine(problem, settings, approximation, num_importance, approximate):
    from gpdsl.inference.mcmc.pseudo_marginal import make_pseudo_marginal

    init, step = make_pseudo_marginal(
        problem, approximation, num_importance, settings.target_acceptance, sample_latent=settings.sample_latent,
        tol=settings.tol, use_approximate_marginal=approximate, proposal_covariance=settings.proposal_covariance,
        ep_start=settings.ep_start, refresh_steps=settings.refresh_steps)
    extract = lambda s: {"theta": s.theta, "f": s.f, "log_marginal": s.log_marginal}  # noqa: E731
    return init, step, extract


def _run(model, data, settings, context, engine, approximation):
    from gpdsl.inference.mcmc.pseudo_marginal import proposal_covariance_of
    from gpdsl.inference.methods.draw_groups import add_draw_groups
    from gpdsl.inference.methods.latent_chains import run_latent_chains, view

    problem = view(model, data, context, grid=approximation == "laplace" and engine is pm_engine)
    output = run_latent_chains(
        problem, engine(problem, settings), settings, context, keep_latent=settings.sample_latent,
        report=lambda result: {"proposal_covariance": proposal_covariance_of(result.final_state).tolist()})
    add_draw_groups(output, model, data, context, approximation=approximation, tol=settings.tol)
    return output


