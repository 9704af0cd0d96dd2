"""The ``pm`` and ``mcmc-ep`` methods: Metropolis-Hastings on the hyperparameters of a latent-GP model.

``pm`` is exact: the marginal likelihood p(y | theta) is estimated without bias by importance sampling
from a Laplace or EP approximation (Filippone & Girolami 2014, Alg. 1). ``mcmc-ep`` uses the EP
approximate marginal itself (approximate, as in the paper's MCMC-EP baseline).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from gpdsl.errors import MethodError
from gpdsl.settings import (SegmentedChainSettings, option, require_choice, require_covariance, require_number,
                            require_positive_int)

APPROXIMATIONS = ("ep", "laplace")
EP_STARTS = ("frozen", "reference", "zero")


def proposal_from_file(path: str) -> list:
    """The random-walk covariance a ``pm``/``mcmc-ep`` results file adapted (``--proposal-from``)."""
    from gpdsl.results.io import read_netcdf

    return adapted_proposal_covariance(read_netcdf(path))


@dataclass(frozen=True)
class MCMCEPSettings(SegmentedChainSettings):
    """Settings of ``mcmc-ep`` (and the shared part of ``pm``'s).

    Attributes
    ----------
    target_acceptance : float
        Acceptance rate the random-walk scale is tuned towards during warmup.
    sample_latent : bool
        Also record f (stored in the posterior): with ``pm`` the importance draw each estimate selected in
        proportion to its weight, accepted or rejected with theta (exact joint draws of theta and f); with
        ``mcmc-ep`` a draw of EP's Gaussian (approximate). Only then do the results hold the pointwise
        ``log_likelihood`` and the ``posterior_predictive`` group, which need draws of f; predictions at new
        inputs come from the f draws, else from the Gaussian approximation at each theta draw.
    refresh_steps : int
        Elliptical slice steps under ``p(f | theta, y)`` applied to the recorded copy of f at each iteration
        (never fed back into the chain's state); 0 records the selected draw itself.
    ep_start : {"reference", "frozen", "zero"}
        EP in the sampling phase: EP started from the sites frozen at the end of warmup (the default), those
        sites used as they are (no sweep: 2 O(n^3) operations per proposal instead of about 4, but the proposal
        degrades away from where they were computed; on the Pima demo, whose sigma spans 0.8-11, the smallest
        bulk ESS fell from 1107 to 52), or EP from zero sites at every proposal (the paper's setting). All
        keep ``pm`` exact; ``mcmc-ep`` needs EP's own marginal, so there ``frozen`` runs as ``reference``.
    tol : float or None
        Convergence tolerance of Laplace/EP (default ``n / 1e4``).
    proposal_covariance : list of lists or None
        A fixed random-walk covariance on the unconstrained hyperparameters (nothing is adapted).
    """

    target_acceptance: float = option(0.25, "acceptance rate the proposal scale is tuned towards during warmup")
    sample_latent: bool = option(False, "also record the latent f: pm keeps the importance draw its estimate "
                                        "selected, exact jointly with theta (needed for the log_likelihood and "
                                        "posterior_predictive groups)")
    refresh_steps: int = option(1, "elliptical slice steps of the recorded f per iteration, never fed back into "
                                   "the chain (0: the selected draw itself)")
    ep_start: str = option("reference", "EP in the sampling phase: EP started from the sites frozen at the end of "
                                        "warmup, those sites as they are (faster where the posterior is narrow), or EP "
                                        "from zero sites (the paper's)", choices=EP_STARTS)
    tol: float | None = option(None, "Laplace/EP convergence: change in squared norm of f (default n/1e4)")
    proposal_covariance: list | None = option(
        None, "reuse the random-walk covariance an earlier pm/mcmc-ep run adapted (averaged over its chains); "
              "nothing is adapted, warmup only burns in", flag="--proposal-from", metavar="FIT.nc",
        parse=proposal_from_file, reads_file=True)

    def __post_init__(self):
        super().__post_init__()
        require_number("target_acceptance", self.target_acceptance, 0, 1, open_low=True, open_high=True)
        require_number("tol", self.tol, 0, open_low=True, optional=True)
        require_positive_int("refresh_steps", self.refresh_steps, allow_zero=True)
        require_choice("EP start", self.ep_start, EP_STARTS)
        if self.proposal_covariance is not None:
            require_covariance("proposal_covariance", self.proposal_covariance)


@dataclass(frozen=True)
class PseudoMarginalSettings(MCMCEPSettings):
    """Settings of ``pm`` (see :class:`MCMCEPSettings` for the shared ones).

    Attributes
    ----------
    approximation : {"ep", "laplace"}
        The Gaussian approximation used as importance distribution.
    num_importance : int
        ``N_imp``, importance samples per marginal-likelihood estimate.
    """

    approximation: str = option("ep", "the Gaussian approximation used as importance distribution",
                                choices=APPROXIMATIONS)
    num_importance: int = option(1, "importance samples per marginal-likelihood estimate", metavar="N_IMP")

    def __post_init__(self):
        super().__post_init__()
        require_choice("approximation", self.approximation, APPROXIMATIONS)
        require_positive_int("num_importance", self.num_importance)


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

    problem = view(model, data, context)
    output = run_latent_chains(
        problem, engine(problem, settings), settings, context, keep_latent=settings.sample_latent,
        report=lambda result: {"proposal_covariance": proposal_covariance_of(result.final_state).tolist()})
    add_draw_groups(output, model, data, context, approximation=approximation, tol=settings.tol)
    return output


def adapted_proposal_covariance(results) -> list:
    """The random-walk covariance a ``pm`` or ``mcmc-ep`` run adapted, averaged over its chains.

    Pass it as ``proposal_covariance`` of :class:`PseudoMarginalSettings` to run other chains with the
    same, fixed proposal (``gpdsl sample --proposal-from FIT.nc``).

    Parameters
    ----------
    results
        Results of a ``pm`` or ``mcmc-ep`` run (or read back from NetCDF).

    Returns
    -------
    list of lists, shape (p, p)

    Raises
    ------
    MethodError
        When the results do not come from a ``pm`` or ``mcmc-ep`` run of gpdsl.
    """
    from gpdsl.results.arviz_compat import root_attrs

    attrs = root_attrs(results)
    report = json.loads(attrs.get("report", "{}"))
    if "proposal_covariance" not in report:
        raise MethodError(f"these results (method {attrs.get('method', 'unknown')}) hold no adapted proposal; "
                          "it comes from a run with --method pm or mcmc-ep")
    return np.mean(np.asarray(report["proposal_covariance"], dtype=float), axis=0).tolist()
