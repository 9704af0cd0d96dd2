"""The ``pm`` and ``mcmc-ep`` methods: Metropolis-Hastings on the hyperparameters of a latent-GP model.

``pm`` is exact: the marginal likelihood p(y | theta) is estimated without bias by importance sampling
from a Laplace or EP approximation (Filippone & Girolami 2014, Alg. 1). ``mcmc-ep`` uses the EP
approximate marginal itself (approximate, as in the paper's MCMC-EP baseline).

Under a normal likelihood that integrates the GP out (GP regression, dense or state-space) ``p(y | theta)`` is
exact (a Cholesky factorisation, or the Kalman filter in ``O(N)``) and ``pm`` is adaptive random-walk Metropolis on
it (Haario et al. 2001; :mod:`gpdsl.inference.mcmc.blocked_metropolis` with one block, frozen after warmup): the
approximation and the importance draws play no part, and ``f`` is drawn from its Gaussian conditional afterwards
(the family's draw groups, as for NUTS).
"""

from __future__ import annotations

from gpdsl.ir.families import GP_REGRESSION, STATE_SPACE_REGRESSION
from gpdsl.likelihoods.approximation_needs import approximation_refusal
from gpdsl.settings.sampling import MCMCEPSettings, PseudoMarginalSettings

EXACT_MARGINAL_FAMILIES = (GP_REGRESSION, STATE_SPACE_REGRESSION)
"""The families on which ``pm`` samples the hyperparameters on the exact marginal likelihood."""
MARGINAL_ADAPTATION_START = 200
"""Warmup draws (at most half of warmup) after which ``pm``'s walk on an exact marginal follows their covariance."""

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
    """``(init, step, extract)`` of ``pm`` on a latent-GP view, or on a GP regression view (its exact marginal)."""
    from gpdsl.inference.families.gp_regression import GPRegression

    if isinstance(problem, GPRegression):
        return exact_marginal_engine(problem, settings)
    return _engine(problem, settings, settings.approximation, settings.num_importance, approximate=False)


def exact_marginal_engine(problem, settings: PseudoMarginalSettings):
    """``(init, step, extract)`` of adaptive Metropolis on ``log p(y | theta) + log p(theta)`` of a GP regression
    view (:class:`~gpdsl.inference.families.gp_regression.GPRegression`).

    The walk's covariance is ``(0.5 * 2.38)^2 / p I`` (``pm``'s starting scale), or ``proposal_covariance``, until
    ``min(MARGINAL_ADAPTATION_START, warmup / 2)`` warmup draws are in, then ``2.38^2 / p`` times theirs, and from then on a
    global scale on it is tuned towards ``target_acceptance`` (Andrieu & Thoms 2008, Alg. 4); nothing
    adapts after warmup, nor at all with ``proposal_covariance``."""
    from gpdsl.inference.mcmc.blocked_metropolis import make_blocked_metropolis
    from gpdsl.inference.mcmc.mh import MHInfo

    p = sum(block.size for block in problem.theta_blocks)
    fixed = settings.proposal_covariance is not None
    start = settings.proposal_covariance if fixed else (0.5 * 2.38) ** 2 / p
    g0 = 2**31 - 1 if fixed else max(1, min(MARGINAL_ADAPTATION_START, settings.warmup // 2))

    def log_terms(_key, theta, _current):
        return (problem.log_marginal(theta), problem.log_prior(theta)), ()

    init, blocked_step = make_blocked_metropolis(log_terms, [range(p)], initial_covariance=start, g0=g0,
                                                 adapt_after_warmup=False,
                                                 target_acceptance=None if fixed else settings.target_acceptance)

    def step(rng_key, state, adapting=False):
        state, info = blocked_step(rng_key, state, adapting)
        return state, MHInfo(info.accepted[0], info.acceptance_rate[0])

    extract = lambda s: {"theta": s.mh.position, "log_marginal": s.mh.log_density[0]}  # noqa: E731
    return init, step, extract


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
    import numpy as np

    from gpdsl.inference.families.gp_regression import gp_regression_view
    from gpdsl.inference.mcmc.blocked_metropolis import proposal_covariances
    from gpdsl.inference.mcmc.pseudo_marginal import proposal_covariance_of
    from gpdsl.inference.methods.draw_groups import add_draw_groups
    from gpdsl.inference.methods.latent_chains import run_latent_chains, view

    if context.family in EXACT_MARGINAL_FAMILIES:
        problem = gp_regression_view(model, data, context.facts)
        output = run_latent_chains(
            problem, engine(problem, settings), settings, context, keep_latent=False,
            report=lambda result: {"proposal_covariance":
                                   np.asarray(proposal_covariances(result.final_state)[0]).tolist()})
        add_draw_groups(output, model, data, context)
        return output
    problem = view(model, data, context, grid=approximation == "laplace" and engine is pm_engine)
    output = run_latent_chains(
        problem, engine(problem, settings), settings, context, keep_latent=settings.sample_latent,
        report=lambda result: {"proposal_covariance": proposal_covariance_of(result.final_state).tolist()})
    add_draw_groups(output, model, data, context, approximation=approximation, tol=settings.tol)
    return output


