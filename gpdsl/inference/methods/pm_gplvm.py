"""The ``pm-gplvm`` method: exact Bayesian inference for the hyperparameters of a GPLVM (Gadd, Wade & Shah 2021).

Pseudo-marginal adaptive Metropolis-within-Gibbs (Alg. 1) on the hyperparameters ``xi`` of the supervised
GPLVM (``Z ~ gp(X, k_z); F ~ gp(Z, k_f); Y ~ normal(F, s)``), or of any GPLVM gpdsl's variational EM fits:

1. variational EM gives the approximate MAP point ``xi_ML`` and the variational parameters there;
2. each chain starts at ``xi_ML`` plus ``N(0, start_noise^2)`` on the unconstrained scale;
3. every block proposal finds an importance distribution of the latent inputs at the proposed ``xi`` alone, from a
   fixed start (never from the chain's state, which would make the estimate depend on it): by default the Laplace
   approximation of the exact ``p(Z | Y, X, xi)`` (:mod:`gpdsl.inference.mcmc.gplvm_laplace`), or, as the paper
   does, the E-step's ``q(Z)`` from the ``xi_ML`` optimum; and estimates ``p(Y | X, xi)`` without bias by
   importance sampling from it (:mod:`gpdsl.inference.mcmc.gplvm_estimate`);
4. the chain keeps its estimate until a proposal is accepted
   (:mod:`gpdsl.inference.mcmc.blocked_metropolis`).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpdsl.settings import (
    SegmentedChainSettings,
    SettingError,
    option,
    require_choice,
    require_number,
    require_positive_int,
)

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

    num_importance: int = option(1000, "importance draws per marginal-likelihood estimate", metavar="Q")
    proposal: str = option("laplace", "importance distribution: the Laplace approximation of the exact p(Z | Y, xi), or "
                                      "the E-step's q(Z) (the paper's)", choices=PROPOSALS)
    laplace_starts: int = option(4, "mode searches per proposal of the Laplace proposal (a mixture of the modes)")
    laplace_iterations: int = option(1000, "L-BFGS iterations at most of each Laplace mode search")
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
        if self.num_inducing is not None:
            require_positive_int("num_inducing", self.num_inducing)
        require_number("initial_covariance", self.initial_covariance, 0, open_low=True)
        require_number("adapt_epsilon", self.adapt_epsilon, 0)
        require_number("start_noise", self.start_noise, 0)
        require_number("e_step_tol", self.e_step_tol, 0)
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


def run_pm_gplvm(model, data, settings: PMGPLVMSettings, context):
    """Run ``pm-gplvm`` (see the module docstring); returns a :class:`~gpdsl.results.method_output.MethodOutput`."""
    from gpdsl.inference.families.gplvm import gplvm_view
    from gpdsl.inference.methods.gplvm_chains import run_pm_gplvm_chains

    return run_pm_gplvm_chains(gplvm_view(model, data, context.facts), settings, context)
