"""The settings of the sampling methods (``gpdsl sample``): NUTS, pm, mcmc-ep, gibbs, pm-gplvm, sequential.

Each class is the method's registry entry's ``settings`` (:mod:`gpdsl.registry`): its fields are the method's
flags, validated on creation. They live below the engines, which read them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from gpdsl.errors import GpdslError, MethodError
from gpdsl.settings.fields import (RunPlan, SettingError, option, require_choice, require_covariance,
                                   require_number, require_positive_int)
from gpdsl.settings.schedules import ChainSettings, SegmentedChainSettings


BACKENDS = ("auto", "pystan", "cmdstanpy")


@dataclass(frozen=True)
class NUTSSettings(ChainSettings):
    """Settings of ``nuts``, as in CmdStan.

    Attributes
    ----------
    adapt_delta : float
        Target acceptance rate of the step-size adaptation.
    max_depth : int
        Maximum tree depth.
    backend : {"auto", "pystan", "cmdstanpy"}
        Stan interface; ``"auto"`` prefers CmdStan when installed.
    """

    adapt_delta: float = option(0.8, "target acceptance rate of NUTS's step-size adaptation")
    max_depth: int = option(10, "maximum tree depth of NUTS")
    backend: str = option("auto", "Stan interface (auto: CmdStan when installed, else PyStan)", choices=BACKENDS)

    def __post_init__(self):
        super().__post_init__()
        require_number("adapt_delta", self.adapt_delta, 0, 1, open_low=True, open_high=True)
        require_positive_int("max_depth", self.max_depth)
        require_choice("backend", self.backend, BACKENDS)


APPROXIMATIONS = ("ep", "laplace")


EP_STARTS = ("frozen", "reference", "zero")


def proposal_from_file(path: str) -> list:
    """The random-walk covariance a ``pm``/``mcmc-ep`` results file adapted (``--proposal-from``)."""
    from gpdsl.results.io import read_netcdf

    results = read_netcdf(path)
    try:
        return adapted_proposal_covariance(results)
    except GpdslError as error:
        raise MethodError(f"--proposal-from {path}: {error.message}", hint=error.hint) from None


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
                                        "from zero sites (the paper's); the Laplace approximation of an HSGP's weights "
                                        "starts its Newton steps from a mode kept the same way unless zero",
                           choices=EP_STARTS)
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

    def run_plan(self) -> RunPlan:
        """The chains' plan, and the importance draws of each estimate."""
        return replace(super().run_plan(), importance=self.num_importance)




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
    from gpdsl.results.method_output import results_json

    attrs = root_attrs(results)
    report = results_json(results, "report")
    if "proposal_covariance" not in report:
        raise MethodError(f"these results (method {attrs.get('method', 'unknown')}) hold no adapted proposal; "
                          "it comes from a run with --method pm or mcmc-ep")
    try:
        covariances = np.asarray(report["proposal_covariance"], dtype=float)
    except (TypeError, ValueError):
        covariances = None
    if covariances is None or covariances.ndim != 3:
        raise MethodError("attribute report is malformed (its proposal_covariance is not one matrix per chain)")
    return np.mean(covariances, axis=0).tolist()


THETA_UPDATES = ("sa", "aa", "surr", "surr_slice", "sdss", "fixed_nu")
UPDATE_VALUES = 4
"""Values a chain holds per update of one iteration (its key and statistics), for the memory check."""


@dataclass(frozen=True)
class GibbsSettings(SegmentedChainSettings):
    """Settings of ``gibbs``.

    Attributes
    ----------
    theta_update : {"sa", "aa", "surr", "surr_slice", "sdss", "fixed_nu"}
        The hyperparameter update given f; ``sdss`` (surrogate data) and ``fixed_nu`` (whitened f fixed)
        move the kernel's hyperparameters by ESS in z-space, then the likelihood's by ESS with f fixed
        (Tegner et al. 2018; they need Gaussian priors on the unconstrained scale, e.g.
        ``scaled_sigmoid_normal``).
    repeat_f, repeat_theta : int
        Updates of f and of theta per iteration (Table 3 of the paper uses 20 each).
    target_acceptance : float
        Acceptance rate the random-walk scale is tuned towards during warmup.
    surrogate_variance : float
        SURR: the diagonal surrogate noise S.
    """

    theta_update: str = option("surr", "the hyperparameter update given f", choices=THETA_UPDATES)
    repeat_f: int = option(1, "ESS updates of f per iteration")
    repeat_theta: int = option(1, "theta updates per iteration")
    target_acceptance: float = option(0.25, "acceptance rate the proposal scale is tuned towards during warmup")
    surrogate_variance: float = option(1.0, "SURR: the surrogate data's noise variance S")

    def __post_init__(self):
        super().__post_init__()
        require_choice("hyperparameter update", self.theta_update, THETA_UPDATES)
        require_positive_int("repeat_f", self.repeat_f)
        require_positive_int("repeat_theta", self.repeat_theta)
        require_number("target_acceptance", self.target_acceptance, 0, 1, open_low=True, open_high=True)
        require_number("surrogate_variance", self.surrogate_variance, 0, open_low=True)

    def run_plan(self) -> RunPlan:
        """The chains' plan, and each iteration's updates: a key and a few statistics per update."""
        updates = self.repeat_f + self.repeat_theta
        return replace(super().run_plan(), repeats=((
            f"the keys and statistics of each iteration's updates (--repeat-f {self.repeat_f} + --repeat-theta "
            f"{self.repeat_theta}, {UPDATE_VALUES} values each)", UPDATE_VALUES * updates, "values"),))


E_STEP_UPDATES = ("auto", "sites", "lbfgs")


PROPOSALS = ("laplace", "variational")


def blocks_from_cli(items) -> list:
    """``["s1,theta", "theta_S,noise"]`` (one ``--block`` each) as lists of names."""
    return [[name.strip() for name in item.split(",") if name.strip()] for item in items]


@dataclass(frozen=True)
class PMGPLVMSettings(SegmentedChainSettings):
    """Settings of ``pm-gplvm``.

    Attributes
    ----------
    segment_size : int
        As for the other chain methods, 10 by default where they take 100: an iteration runs an importance
        estimate per block (seconds on the paper's data), and the progress bar moves after each segment.
    num_importance : int
        Importance draws per estimate (the paper's ``Q = 1000``).
    proposal : {"laplace", "variational"}
        The importance distribution at each ``xi``. ``variational``, the paper's: ``q(Z)`` of the E-step at ``xi``.
        ``laplace``: the Gaussian at the mode of the exact posterior ``p(Z | Y, X, xi)`` with the Hessian there
        (:mod:`~gpdsl.inference.mcmc.gplvm_laplace`), the mode searched from the variational fit's means; no
        E-step runs. The E-step's ``q`` maximises a sparse bound that punishes uncertain latent inputs, so it is
        narrower than the posterior and, away from ``xi_ML``, elsewhere: on sinusoid case 2 at three ``xi``
        (``xi_ML``, a state of a stuck chain, NUTS's posterior median) its bound lay 40-50 nats below ``log p``,
        and ``Var[log p_hat]`` at Q = 1000 was 34 at the stuck state; with ``laplace`` it is 4.4, 2.0 and 0.5.
        Both are exact.
    laplace_starts : int
        Mode searches per ``xi`` of the Laplace proposal, a mixture of the modes found weighted by their Laplace
        evidence: from the variational means and from the most probable of 200 prior draws made from fixed
        normals. The posterior of the latent inputs has several modes, and which one a single search reaches
        changes abruptly with ``xi``: on sinusoid case 2 a single search's evidence jumped by up to 24 nats between
        ``xi`` 0.01 apart, and a chain stuck where its estimate had come out high.
    laplace_iterations : int
        L-BFGS iterations at most of each mode search.
    laplace_gtol : float
        A mode search stops when the largest component of its gradient (in whitened coordinates, where the
        posterior's curvature is at least 1) falls below this. On air quality at Q = 1000, 1e-2 instead of 1e-5
        halves the searches' iterations and moves the Laplace evidence by at most 0.01 nats.
    blocks : list of list of str
        Hyperparameters updated together, by name (vectors whole); every hyperparameter in exactly one
        block. Empty: one block of all. The paper's sinusoid runs use
        ``[["s1", "theta"], ["theta_S", "noise"]]``.
    symmetrise : bool
        Importance draws from ``q(Z)`` symmetrised through zero in each latent dimension, where ``p(Z | Y)`` has
        the mirror image of each mode for the usual kernels (:func:`~gpdsl.inference.mcmc.gplvm_estimate.make_estimate`).
    defensive : float
        Weight of the prior ``p(Z | X)`` mixed into the importance distribution, which bounds the weights.
    g0 : int
        States before the proposal covariance follows the chain (Haario et al.).
    initial_covariance : float
        ``Sigma_r^(0) = initial_covariance * I`` on the unconstrained scale.
    adapt_epsilon : float
        Diagonal added to the adapted covariance.
    adapt_after_warmup : bool
        Keep adapting after warmup, as Alg. 1 does.
    start_noise : float
        Standard deviation of the noise added to ``xi_ML`` (unconstrained scale) for each chain's start.
    e_step : {"auto", "sites", "lbfgs"}
        How the E-step optimises ``q(Z)``: natural-gradient site updates (latent inputs with a GP prior;
        inducing inputs held at the fit's) or L-BFGS over ``q`` and the inducing inputs. ``auto``: sites
        where they apply.
    correlation : float
        Correlated pseudo-marginal MH (Deligiannidis, Doucet & Pitt 2018): the normal variates behind the
        importance draws are part of the chain's state and move by ``rho u + sqrt(1 - rho^2) e`` at each proposal,
        so the current and the proposed estimates share most of their noise and a lucky high estimate no longer
        traps the chain. Exact for any ``rho`` in ``[0, 1)``; 0 draws them afresh, as the paper does. On sinusoid
        case 1 (4 chains x 1500 iterations) the default 0.99 gave R-hat 1.06 and a smallest bulk ESS of 97 where
        fresh draws gave 1.44 and 9 (chains stuck for up to 480 iterations).
    noise_refreshes : int
        Elliptical slice updates of those normal variates alone, at the current ``xi``, before each iteration
        (pseudo-marginal slice sampling, Murray & Graham 2016; :func:`~gpdsl.inference.mcmc.gplvm_estimate.make_noise_refresh`).
        Exact. A chain that accepted a lucky estimate otherwise holds it until a proposal's estimate matches it;
        the refresh lets it fall back. The proposal at ``xi`` is kept in the state, so an update costs a few
        estimates' weights (its slice's shrinks), not a mode search or an E-step. 0: none.
    delayed_acceptance : bool
        Delayed acceptance (:mod:`gpdsl.inference.mcmc.blocked_metropolis`): a proposal first meets the E-step's
        bound, or the Laplace approximation of ``log p(Y | X, xi)`` (plus the log prior), as a surrogate, and the importance estimate is made only
        for the proposals that pass; the second stage corrects by the ratio of the estimate to the bound. Exact as
        Alg. 1; the E-step still runs at every proposal and each estimate still uses Q draws. The chains then
        advance one after another on each device (``lax.map``), so a proposal stopped at the first stage costs
        only its E-step or mode search. Not with ``warm_start``.
    warm_start : bool
        APPROXIMATE: start each E-step from the current state's ``q`` instead of the fixed variational optimum.
        Fewer iterations, but the estimate then depends on the chain's state and the chain is no longer exact
        (the report says ``"exact": false``).
    e_step_iterations : int
        E-step iterations at most (the paper caps SCG at 1000).
    e_step_tol : float
        The E-step stops when an iteration raises the bound by less than this, relative.
    e_step_accelerate : bool
        Squared extrapolation of the E-step's site updates (SQUAREM); still a function of ``xi`` alone. At 8
        posterior draws of sinusoid case 1 it took the iterations from 68 to 44 on average (76 to 39 over a
        chain) and ended at a higher bound and a higher mean log estimate at every one.
    num_inducing : int or None
        Inducing inputs of the variational fit; default ``min(N, 50)``.
    vem_starts : int
        Independent variational fits for ``xi_ML`` (the best kept).
    latent_sweeps : int
        Elliptical slice steps of the latent inputs per kept draw (Alg. 2), warm-started along each chain:
        the posterior then holds the latent inputs, and the results a pointwise ``log_likelihood`` and a
        ``posterior_predictive`` group. 0: hyperparameters only.
    """

    segment_size: int = option(10, "iterations per compiled segment: progress and the checkpoint are written "
                                   "after each (the draws do not depend on it)")
    num_importance: int = option(1000, "importance draws per marginal-likelihood estimate", metavar="Q")
    proposal: str = option("laplace", "importance distribution: the Laplace approximation of the exact p(Z | Y, xi), or "
                                      "the E-step's q(Z) (the paper's)", choices=PROPOSALS)
    laplace_starts: int = option(4, "mode searches per proposal of the Laplace proposal (a mixture of the modes)")
    laplace_iterations: int = option(1000, "L-BFGS iterations at most of each Laplace mode search")
    laplace_gtol: float = option(1e-5, "a Laplace mode search stops when its largest gradient component (whitened "
                                       "coordinates) falls below this")
    blocks: list = option([], "hyperparameters updated together (repeatable, one block per flag; default: one "
                              "block of all)", flag="--block", metavar="NAME,NAME", repeat=True,
                          parse=blocks_from_cli)
    symmetrise: bool = option(True, "draw from q(Z) alone, not symmetrised through zero in each latent dimension",
                              negate="--no-symmetrise")
    defensive: float = option(0.1, "weight of the prior p(Z | X) in the importance distribution (bounds the weights)")
    g0: int = option(200, "states before the proposal covariance follows the chain")
    initial_covariance: float = option(0.01, "initial random-walk covariance (times I), unconstrained scale")
    adapt_epsilon: float = option(1e-6, "diagonal added to the adapted covariance")
    adapt_after_warmup: bool = option(True, "freeze the proposals at the end of warmup (Alg. 1 keeps adapting)",
                                      negate="--no-adapt-after-warmup")
    start_noise: float = option(0.1, "sd of the noise added to the variational estimate for each chain's start")
    e_step: str = option("auto", "E-step updates: natural-gradient sites (GP-prior latents) or L-BFGS",
                         choices=E_STEP_UPDATES)
    correlation: float = option(0.99, "correlated pseudo-marginal: the importance draws' normal variates move with "
                                      "this correlation at each proposal (0: fresh, as the paper)")
    noise_refreshes: int = option(0, "elliptical slice updates of the importance draws' normal variates at the "
                                     "current xi before each iteration (exact; frees a chain held by a lucky "
                                     "estimate; each costs a few estimates' weights, not a proposal's search)")
    delayed_acceptance: bool = option(False, "screen each proposal by the E-step's bound and estimate the marginal "
                                             "likelihood only for those that pass (exact; the paper estimates at "
                                             "every proposal)")
    warm_start: bool = option(False, "APPROXIMATE: start each E-step from the current state's q (faster; the chain "
                                     "is then not exact)")
    e_step_iterations: int = option(1000, "E-step iterations at most")
    e_step_tol: float = option(1e-4, "E-step relative tolerance on the bound")
    e_step_accelerate: bool = option(True, "plain E-step site updates, without squared extrapolation",
                                     negate="--no-e-step-accelerate")
    num_inducing: int | None = option(None, "inducing inputs of the variational fit (default min(N, 50))",
                                      metavar="M")
    vem_starts: int = option(1, "variational fits for the starting point, the best kept")
    latent_sweeps: int = option(20, "elliptical slice steps of the latent inputs per kept draw (0: do not sample "
                                    "them, and write no log_likelihood or posterior_predictive group)")

    def __post_init__(self):
        super().__post_init__()
        for name in ("num_importance", "g0", "e_step_iterations", "vem_starts", "laplace_iterations",
                     "laplace_starts"):
            require_positive_int(name, getattr(self, name))
        require_positive_int("latent_sweeps", self.latent_sweeps, allow_zero=True)
        require_positive_int("noise_refreshes", self.noise_refreshes, allow_zero=True)
        if self.num_inducing is not None:
            require_positive_int("num_inducing", self.num_inducing)
        require_number("initial_covariance", self.initial_covariance, 0, open_low=True)
        require_number("adapt_epsilon", self.adapt_epsilon, 0)
        require_number("start_noise", self.start_noise, 0)
        require_number("e_step_tol", self.e_step_tol, 0)
        require_number("laplace_gtol", self.laplace_gtol, 0, open_low=True)
        require_number("defensive", self.defensive, 0, 1, open_high=True)
        require_number("correlation", self.correlation, 0, 1, open_high=True)
        require_choice("E-step updates", self.e_step, E_STEP_UPDATES)
        require_choice("proposal", self.proposal, PROPOSALS)
        if self.warm_start and self.proposal != "variational":
            raise SettingError("warm_start", "starts the E-step from the current state's q; it needs proposal = "
                                             "'variational'")
        if self.delayed_acceptance and self.warm_start:
            raise SettingError("delayed_acceptance", "screens each proposal by an E-step at the proposal alone; it "
                                                     "cannot be combined with warm_start")
        for block in self.blocks:
            if not isinstance(block, list) or not block or not all(isinstance(name, str) and name for name in block):
                raise SettingError("blocks", f"must be non-empty lists of hyperparameter names (every block is); got "
                                             f"{self.blocks}")

    def run_plan(self) -> RunPlan:
        """The chains' plan with the variational fit's inducing inputs (no ``N x N`` kernel of the outputs) and
        the importance draws of each estimate."""
        return replace(super().run_plan(), full_kernel=False, inducing=self.num_inducing,
                       importance=self.num_importance, repeats=(
                           (f"the Hessians of the Laplace mode searches (--laplace-starts {self.laplace_starts})",
                            self.laplace_starts, "latent inputs squared"),
                           (f"the draws they start from (--laplace-starts {self.laplace_starts})",
                            self.laplace_starts, "latent inputs"),
                           (f"the keys and statistics of the latent sweeps of each kept draw (--latent-sweeps "
                            f"{self.latent_sweeps}, {UPDATE_VALUES} values each)", UPDATE_VALUES * self.latent_sweeps,
                            "values")))




SCHEMES = ("sequential", "full")


KAPPA_UPDATES = ("fixed_nu", "sdss")


SURROGATES = ("fixed", "curvature")


@dataclass(frozen=True)
class SequentialSettings:
    """Settings of ``sequential``.

    Attributes
    ----------
    states : int
        M, the states kept at every step.
    window : int
        tau, the earlier steps ``f_t``'s conditional prior is given (eq. 6).
    burn_in, thin : int
        The chain of step 1 (and of every step of the full scheme): ``burn_in + thin * states`` iterations,
        the first ``burn_in`` dropped, then every ``thin``-th kept.
    initial_repeat_f : int
        ESS updates of ``f`` per iteration of that chain.
    repeat_f : int
        ESS updates of ``f_t`` before Update 2 and again before Update 3 (steps t >= 2).
    final_repeat_f : int
        ESS updates of ``f_t`` after Update 3.
    surrogate_variance : float
        S of SDSS in the chain of step 1 (the noise variance for a Gaussian likelihood).
    surrogate : {"fixed", "curvature"}
        ``fixed``: S is ``surrogate_variance`` everywhere. ``curvature`` (spec decision 14, for a non-Gaussian
        likelihood): S's diagonal is the inverse curvature of ``-log p(y | f)``
        (:mod:`gpdsl.inference.mcmc.surrogate_curvature`), fixed for a whole chain or pass: for the chain of
        step 1 (and of every step of the full scheme) at ``f`` = its prior mean and the hyperparameters' prior
        mean; for a step t >= 2 with ``step_kappa_update = "sdss"`` at the mean of step ``t - 1``'s states and
        of their moment-matched hyperparameters.
    scheme : {"sequential", "full"}
        Alg. 1, or the full-sampling baseline.
    step_kappa_update : {"fixed_nu", "sdss"}
        Update 2 at steps t >= 2: fixed-nu ESS (Alg. 1) or SDSS (S as ``surrogate`` says), in z-space.
    pass_chains : int
        Chains threaded through the states of a step t >= 2, each through ``states / pass_chains`` consecutive
        ones, run in parallel over the host devices; chain g starts at the hyperparameters of state
        ``(g + 1) states / pass_chains`` of the step before. 1 (the default) is the paper's single chain.
    """

    states: int = option(1000, "M: the states kept at each step")
    window: int = option(1, "tau: the earlier steps f_t is conditioned on")
    burn_in: int = option(1000, "iterations of the step-1 chain dropped before thinning")
    thin: int = option(5, "keep every thin-th iteration of the step-1 chain")
    initial_repeat_f: int = option(3, "ESS updates of f per iteration of the step-1 chain")
    repeat_f: int = option(5, "ESS updates of f_t before the kappa update and again before the alpha update")
    final_repeat_f: int = option(0, "ESS updates of f_t after the alpha update")
    surrogate_variance: float = option(1.0, "SURR: the surrogate data's noise variance S")
    surrogate: str = option("fixed", "S of SDSS: fixed (the surrogate variance) or curvature (the inverse "
                                     "curvature of -log p(y | f), per element)", choices=SURROGATES)
    scheme: str = option("sequential", "sequential (Alg. 1) or full (Gibbs on f_1:t at every t)", choices=SCHEMES)
    step_kappa_update: str = option("fixed_nu", "the kappa update at steps t >= 2: fixed-nu ESS or SDSS",
                                    choices=KAPPA_UPDATES)
    pass_chains: int = option(1, "chains threaded in parallel through the states of each step t >= 2, each "
                                 "through states / pass-chains of them (1: the paper's single chain)")

    def __post_init__(self):
        require_positive_int("states", self.states)
        if self.states < 2:
            raise MethodError("states must be at least 2 (step t moment-matches the states of step t - 1)")
        require_positive_int("window", self.window)
        require_positive_int("burn_in", self.burn_in, allow_zero=True)
        require_positive_int("thin", self.thin)
        require_positive_int("initial_repeat_f", self.initial_repeat_f)
        require_positive_int("repeat_f", self.repeat_f)
        require_positive_int("final_repeat_f", self.final_repeat_f, allow_zero=True)
        require_number("surrogate_variance", self.surrogate_variance, 0, open_low=True)
        require_choice("surrogate", self.surrogate, SURROGATES)
        require_choice("scheme", self.scheme, SCHEMES)
        require_choice("step kappa update", self.step_kappa_update, KAPPA_UPDATES)
        require_positive_int("pass_chains", self.pass_chains)
        if self.states % self.pass_chains:
            raise MethodError(f"pass_chains = {self.pass_chains} does not divide states = {self.states}",
                              hint="choose a number of pass chains that divides the states")

    @property
    def chains(self) -> int:
        """One chain, threaded through the states of every step."""
        return 1

    def run_plan(self) -> RunPlan:
        """One chain's ``N x N`` kernel matrices at a time; the iterations of the step-1 chain and the updates of
        each iteration, a key and a few statistics each."""
        iterations = self.burn_in + self.thin * self.states
        updates = max(self.initial_repeat_f, 2 * self.repeat_f + self.final_repeat_f + 3)
        return RunPlan(repeats=(
            (f"the iterations of the step-1 chain (--burn-in {self.burn_in} + --thin {self.thin} x --states "
             f"{self.states}, {UPDATE_VALUES} values each)", UPDATE_VALUES * iterations, "values"),
            (f"the updates of f in one iteration (--initial-repeat-f {self.initial_repeat_f}, or 2 x --repeat-f "
             f"{self.repeat_f} + --final-repeat-f {self.final_repeat_f}; {UPDATE_VALUES} values each)",
             UPDATE_VALUES * updates, "values")))
