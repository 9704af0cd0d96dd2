"""The settings of the fitting methods (``gpdsl fit``): ml, ep-ml, vem, sgpr, svgp, svi-gplvm, dmgp, dsdgp.

Each class is the method's registry entry's ``settings`` (:mod:`gpdsl.registry`): its fields are the method's
flags, validated on creation. They live below the engines, which read them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


from gpdsl.errors import MethodError
from gpdsl.settings.fields import (RunPlan, initial_values_from_cli, option, require_choice, require_number,
                                   require_positive_int)
from gpdsl.settings.schedules import AdamScheduleSettings, LBFGSSettings


@dataclass(frozen=True)
class MLSettings(LBFGSSettings):
    """Settings of ``ml``.

    Attributes
    ----------
    initial_values : dict
        Constrained starting values of hyperparameters by name (the others start at 1, or inside their
        bounds).
    max_iterations : int
        L-BFGS iterations.
    max_evaluations : int
        Objective-and-gradient evaluations.
    ftol, gtol : float
        Relative-reduction and largest-gradient-component tolerances (SciPy's L-BFGS-B defaults).
    restarts : int
        Restarts from the end point after a stop short of ``gtol``, while the objective improves.
    """

    initial_values: dict = option({}, "initial value of a hyperparameter (repeatable; vectors as v1,v2,...)",
                                  flag="--init-value", metavar="NAME=VALUE", repeat=True,
                                  parse=initial_values_from_cli)

    def __post_init__(self):
        if not isinstance(self.initial_values, dict):
            raise MethodError(f"initial_values must be a dict of name to value; got {self.initial_values!r}")
        super().__post_init__()

    def run_plan(self) -> RunPlan:
        """``N x N`` kernel matrices, from ``initial_values``."""
        return RunPlan(initial_values=self.initial_values)




@dataclass(frozen=True)
class EPMLSettings:
    """Settings of ``ep-ml``.

    Attributes
    ----------
    starts : int
        Starting points drawn from the priors (the best optimum is kept).
    tol : float or None
        EP convergence tolerance (default ``n / 1e4``).
    """

    starts: int = option(4, "starting points drawn from the priors (the best optimum is kept)")
    tol: float | None = option(None, "Laplace/EP convergence: change in squared norm of f (default n/1e4)")

    def __post_init__(self):
        require_positive_int("starts", self.starts)
        require_number("tol", self.tol, 0, open_low=True, optional=True)

    def run_plan(self) -> RunPlan:
        """``N x N`` kernel matrices, and the starting points drawn from the priors."""
        return RunPlan(repeats=((f"the starting points (--starts {self.starts})", self.starts, "parameters"),))




PSI_METHODS = ("analytic", "unscented", "gauss_hermite", "monte_carlo")


INITIALISATIONS = ("pca", "random")


SCALINGS = ("blocks", "scalar")


@dataclass(frozen=True)
class VEMSettings(LBFGSSettings):
    """Settings of variational EM.

    Attributes
    ----------
    psi : {"analytic", "unscented", "gauss_hermite", "monte_carlo"}
        How the Psi statistics are computed.
    gh_nodes : int
        Gauss-Hermite nodes per latent dimension (``gh_nodes ** Q`` points).
    mc_samples : int
        Monte Carlo draws per point (drawn once per fit).
    num_inducing : int
        Inducing inputs ``M`` (at most ``N``).
    init : {"pca", "random"}
        Initial variational means: PCA of the outputs scaled to unit variance, or standard normal draws.
    init_variance : float, optional
        Initial variational variances: 0.5 by default (Damianou et al.; de Souza uses 0.1). With a GP
        prior on the latent inputs, the median initial variance, 0.18 by default (vargplvm).
    ard_heuristic : bool
        Initialise ARD inverse squared length-scales to ``1 / (max - min)^2`` of the initial means per
        dimension (length-scales to ``max - min``), as in Sec. 5 of Damianou et al.
    initial_values : dict
        Initial values of hyperparameters by name (override the heuristics).
    warmup_iterations : int
        The first iterations hold the likelihood's noise variance and the kernel's variances at their
        initial values while ``q(X)``, the inducing inputs and the other hyperparameters move (vargplvm's
        ``initVardistIters``): left free from the start, the noise variance rises tenfold in the first
        iterations and the weakest latent dimensions collapse onto the prior for good. 0: none.
        Counted in ``max_iterations``.
    scaling : {"blocks", "scalar"}
        L-BFGS's initial inverse Hessian: one scale per block of coordinates (the means, the variances
        and the inducing inputs of each latent dimension, and each hyperparameter), or one scale for
        all coordinates as L-BFGS-B (:func:`gpdsl.inference.optimise.lbfgs.minimize`).
    memory : int
        L-BFGS's correction pairs. 50 by default, where L-BFGS-B keeps 10: on oil flow (N = 1000, Q = 10, M =
        30) the fit ends about 500 nats higher (8511 against 8004), reaching GPy's optimum as soon, although
        each iteration's two-loop recursion then costs about as much as the bound's evaluation
        (``case_studies/souza2020_ugplvm/bench_results.md``).
    max_iterations : int
        L-BFGS iterations.
    max_evaluations : int
        Bound-and-gradient evaluations.
    ftol, gtol : float
        L-BFGS's relative-reduction and largest-gradient-component tolerances (as in SciPy's L-BFGS-B).
    restarts : int
        When L-BFGS stops before ``max_iterations`` without meeting ``gtol`` (a failed line search or
        a stalled reduction), restart it from its end point with a fresh memory, at most this many
        times and only while the bound improves by more than ``ftol`` (relative).
    starts : int
        Independent fits from different initialisations, the one of highest bound kept: the first from
        ``init``, the others from random means with seeds ``seed + 1``, ``seed + 2``, ... The bound is
        multimodal (latent inputs with a GP prior especially), and different starts can end far apart.
    seed : int
        Seed of the inducing-input subset, random initialisation and Monte Carlo draws (the run's seed
        replaces it).
    """

    psi: str = option("analytic", "Psi statistics: analytic (rbf, linear, sums), or the unscented transform, "
                                  "Gauss-Hermite or Monte Carlo for any kernel", choices=PSI_METHODS)
    gh_nodes: int = option(2, "Gauss-Hermite nodes per latent dimension")
    mc_samples: int = option(10, "Monte Carlo draws per point (fixed per fit)")
    num_inducing: int = option(20, "inducing inputs", metavar="M")
    init: str = option("pca", "initial latent means", choices=INITIALISATIONS)
    init_variance: float | None = option(None, "initial latent variances (default 0.5; with a GP prior on the "
                                                "latents, their median, default 0.18)")
    ard_heuristic: bool = option(True, "do not initialise ARD weights from the spread of the initial means",
                                 negate="--no-ard-heuristic")
    initial_values: dict = option({}, "initial value of a hyperparameter (repeatable; vectors as v1,v2,...)",
                                  flag="--init-value", metavar="NAME=VALUE", repeat=True,
                                  parse=initial_values_from_cli)
    warmup_iterations: int = option(50, "first iterations with the noise and kernel variances held at their "
                                        "initial values (vargplvm's initVardistIters; 0: none)")
    scaling: str = option("blocks", "L-BFGS's initial inverse Hessian: one scale per block of coordinates "
                                    "(each latent dimension's means, variances, inducing inputs; each "
                                    "hyperparameter) or one for all (scalar, as L-BFGS-B)", choices=SCALINGS)
    memory: int = option(50, "L-BFGS correction pairs kept")
    ftol: float = option(1e-10, "L-BFGS relative-reduction tolerance")
    gtol: float = option(1e-6, "L-BFGS largest-gradient-component tolerance")
    starts: int = option(1, "independent fits (the first from --init, the others from random means), the one of "
                            "highest bound kept")
    seed: int = option(0, "seed (replaced by the run's)", cli=False)

    def __post_init__(self):
        require_choice("Psi-statistic method", self.psi, PSI_METHODS)
        require_choice("initialisation", self.init, INITIALISATIONS)
        require_choice("L-BFGS scaling", self.scaling, SCALINGS)
        for name in ("gh_nodes", "mc_samples", "num_inducing", "memory", "starts"):
            require_positive_int(name, getattr(self, name))
        require_positive_int("warmup_iterations", self.warmup_iterations, allow_zero=True)
        if self.init_variance is not None:
            require_number("init_variance", self.init_variance, 0, open_low=True)
        super().__post_init__()

    def psi_method(self):
        """The Psi-statistic rule these settings name."""
        from gpdsl.kernels.psi import PsiMethod

        return PsiMethod(self.psi, nodes=self.gh_nodes, samples=self.mc_samples)

    def run_plan(self) -> RunPlan:
        """``M`` inducing inputs (no ``N x N`` kernel), the Gauss-Hermite nodes of the Psi statistics, and where the
        fit starts."""
        nodes = self.gh_nodes if self.psi == "gauss_hermite" else None
        return RunPlan(full_kernel=False, inducing=self.num_inducing, quadrature_nodes=nodes,
                       initial_values=self.initial_values)




OPTIMIZERS = ("lbfgs", "adam")


INDUCING_INITS = ("kmeans", "random")


@dataclass(frozen=True)
class SGPRSettings(AdamScheduleSettings, LBFGSSettings):
    """Settings of ``sgpr``.

    Attributes
    ----------
    num_inducing : int
        Inducing inputs ``M`` (at most the number of training points).
    inducing_init : {"kmeans", "random"}
        Initial inducing inputs: k-means centres of the training inputs (k-means++ start, seeded), or a
        random subset of them (:mod:`gpdsl.inference.variational.inducing_inputs`).
    fix_inducing : bool
        Hold the inducing inputs at their initial values.
    optimizer : {"lbfgs", "adam"}
        L-BFGS on the whole bound, or Adam with the two-phase schedule (``noise_fixed_steps`` with the
        noise held, then ``steps`` with everything free, fresh moments).
    scaling : {"blocks", "scalar"}
        L-BFGS's initial inverse Hessian: one scale per hyperparameter coordinate and per input column of the
        inducing inputs, or one for all (as L-BFGS-B). On the 10,000-point benchmark ``blocks`` reaches GPy's
        final bound in 48 iterations, ``scalar`` stops short of it after 370.
    max_iterations, max_evaluations : int
        L-BFGS iterations and bound-and-gradient evaluations.
    ftol, gtol : float
        L-BFGS's relative-reduction and largest-gradient-component tolerances.
    restarts : int
        L-BFGS restarts after a stop short of ``gtol`` (while the bound improves).
    noise_fixed_steps, steps, learning_rate, chunk, initial_values, seed
        As :class:`~gpdsl.settings.AdamScheduleSettings`: Adam's two phases (the parameters the likelihood's
        ``sigma`` reads held in the first), its step size; constrained starting values of hyperparameters by name
        (the others start at 1, or inside their bounds); the seed of the inducing-input initialisation.
    jitter : float
        Added to the diagonal of ``K(Z)``.
    """

    num_inducing: int = option(100, "inducing inputs", metavar="M")
    inducing_init: str = option("kmeans", "initial inducing inputs: k-means centres or a random subset of the "
                                          "training inputs (seeded)", choices=INDUCING_INITS)
    fix_inducing: bool = option(False, "hold the inducing inputs at their initial values")
    optimizer: str = option("lbfgs", "lbfgs on the whole bound, or adam with the schedule --noise-fixed-steps then "
                                     "--steps", choices=OPTIMIZERS)
    scaling: str = option("blocks", "L-BFGS's initial inverse Hessian: one scale per hyperparameter coordinate and "
                                    "per input column of the inducing inputs, or one for all (scalar, as L-BFGS-B)",
                          choices=SCALINGS)
    jitter: float = option(1e-8, "jitter added to the diagonal of K(Z)")

    def __post_init__(self):
        AdamScheduleSettings.__post_init__(self)
        require_choice("optimizer", self.optimizer, OPTIMIZERS)
        require_choice("inducing-input initialisation", self.inducing_init, INDUCING_INITS)
        require_choice("L-BFGS scaling", self.scaling, SCALINGS)
        require_positive_int("num_inducing", self.num_inducing)
        LBFGSSettings.__post_init__(self)
        require_number("jitter", self.jitter, 0)

    def run_plan(self) -> RunPlan:
        """Adam's plan with ``M`` inducing inputs."""
        return replace(AdamScheduleSettings.run_plan(self), inducing=self.num_inducing)




@dataclass(frozen=True)
class SVGPSettings(AdamScheduleSettings):
    """Settings of ``svgp``.

    Attributes
    ----------
    num_inducing : int
        Inducing inputs ``M`` (at most the number of observed points).
    batch_size : int
        Points per step, drawn with replacement (0, or at least the number of points: the whole data).
    inducing_init : {"kmeans", "random"}
        Initial inducing inputs: k-means centres of the training inputs, or a random subset of them.
    fix_inducing : bool
        Hold the inducing inputs at their initial values.
    whiten : bool
        ``q`` over ``v = L^-1 u`` (``L L^T = K(Z)``, prior ``N(0, I)``) rather than over ``u``.
    natural_gradient : bool
        Move ``q(u)`` by natural-gradient steps (Salimbeni et al. 2018) and the rest by Adam, instead of all by Adam.
    natural_step : float
        The natural-gradient step size ``gamma`` (1 reaches the optimal ``q(u)`` in one full-batch step under a
        Gaussian likelihood; Salimbeni et al. use 0.1 for others).
    noise_fixed_steps, steps, learning_rate, chunk, initial_values, seed
        As :class:`~gpdsl.settings.AdamScheduleSettings`; the first phase holds the hyperparameters the likelihood's
        arguments other than the latent one read (its scale or dispersion), and is empty by default.
    jitter : float
        Added to the diagonal of ``K(Z)``.
    """

    noise_fixed_steps: int = option(0, "Adam steps with the likelihood's other parameters (scale, dispersion) held at "
                                       "their initial values (0: none)")
    num_inducing: int = option(100, "inducing inputs", metavar="M")
    batch_size: int = option(0, "points per minibatch (0: all)")
    inducing_init: str = option("kmeans", "initial inducing inputs: k-means centres or a random subset of the "
                                          "training inputs (seeded)", choices=INDUCING_INITS)
    fix_inducing: bool = option(False, "hold the inducing inputs at their initial values")
    whiten: bool = option(True, "q(u) over u itself, not over the whitened v = L^-1 u", negate="--no-whiten")
    natural_gradient: bool = option(False, "natural-gradient steps for q(u) (Salimbeni et al. 2018), Adam for the rest")
    natural_step: float = option(0.1, "natural-gradient step size gamma")
    jitter: float = option(1e-8, "jitter added to the diagonal of K(Z)")

    def __post_init__(self):
        super().__post_init__()
        require_positive_int("num_inducing", self.num_inducing)
        require_positive_int("batch_size", self.batch_size, allow_zero=True)
        require_choice("inducing-input initialisation", self.inducing_init, INDUCING_INITS)
        require_number("natural_step", self.natural_step, 0, 1, open_low=True)
        require_number("jitter", self.jitter, 0)

    def run_plan(self) -> RunPlan:
        """Adam's plan with ``M`` inducing inputs."""
        return replace(AdamScheduleSettings.run_plan(self), inducing=self.num_inducing)


@dataclass(frozen=True)
class SVIGPLVMSettings(AdamScheduleSettings):
    """Settings of ``svi-gplvm``.

    Attributes
    ----------
    num_inducing : int
        Inducing inputs ``M``.
    batch_size : int
        Rows per Adam step (the whole data when at least ``N``).
    init : {"pca", "random"}
        Initial latent means (as ``vem``).
    init_variance : float, optional
        Initial latent variances (as ``vem``; default 0.5).
    noise_fixed_steps, steps, learning_rate, chunk, initial_values, seed
        As :class:`~gpdsl.settings.AdamScheduleSettings` (the seed is that of the start and the minibatches).
    """

    num_inducing: int = option(20, "inducing inputs", metavar="M")
    batch_size: int = option(100, "rows per Adam step (the whole data when at least N)")
    init: str = option("pca", "initial latent means", choices=INITIALISATIONS)
    init_variance: float | None = option(None, "initial latent variances (default 0.5)")

    def __post_init__(self):
        super().__post_init__()
        require_choice("initialisation", self.init, INITIALISATIONS)
        for name in ("num_inducing", "batch_size"):
            require_positive_int(name, getattr(self, name))
        if self.init_variance is not None:
            require_number("init_variance", self.init_variance, 0, open_low=True)

    def vem_settings(self, seed: int):
        """The variational EM settings of the starting point."""
        return VEMSettings(num_inducing=self.num_inducing, init=self.init, init_variance=self.init_variance,
                           initial_values=self.initial_values, seed=seed)

    def run_plan(self) -> RunPlan:
        """Adam's plan with ``M`` inducing inputs."""
        return replace(AdamScheduleSettings.run_plan(self), inducing=self.num_inducing)




@dataclass(frozen=True)
class DMGPSettings(AdamScheduleSettings):
    """Settings of ``dmgp``.

    Attributes
    ----------
    num_inducing : int
        Inducing inputs of the output layer, ``m_u``.
    num_inducing_fields : int
        Pseudo-inputs of the projection fields, ``m_v``.
    noise_fixed_steps, steps, learning_rate, chunk, initial_values, seed
        As :class:`~gpdsl.settings.AdamScheduleSettings` (the seed is that of the k-means starts).
    """

    num_inducing: int = option(50, "inducing inputs of the output layer (m_u)")
    num_inducing_fields: int = option(25, "pseudo-inputs of the projection fields W (m_v)")

    def __post_init__(self):
        super().__post_init__()
        require_positive_int("num_inducing", self.num_inducing)
        require_positive_int("num_inducing_fields", self.num_inducing_fields)

    def run_plan(self) -> RunPlan:
        """Adam's plan with ``M`` inducing inputs."""
        return replace(AdamScheduleSettings.run_plan(self), inducing=self.num_inducing)




@dataclass(frozen=True)
class DSDGPSettings(AdamScheduleSettings):
    """Settings of ``dsdgp``.

    Attributes
    ----------
    num_inducing : int
        Inducing inputs per layer.
    noise_fixed_steps, steps, learning_rate, chunk, initial_values, seed
        As :class:`~gpdsl.settings.AdamScheduleSettings` (the seed is that of the k-means start and the samples).
    batch_size : int
        Points per minibatch (0: the whole data set).
    predict_samples : int
        Draws through the layers whose mixture the predictive moment-matches.
    """

    num_inducing: int = option(50, "inducing inputs per layer")
    batch_size: int = option(0, "points per minibatch (0: all)")
    predict_samples: int = option(200, "draws through the layers for the moment-matched predictive")

    def __post_init__(self):
        super().__post_init__()
        require_positive_int("num_inducing", self.num_inducing)
        require_positive_int("batch_size", self.batch_size, allow_zero=True)
        require_positive_int("predict_samples", self.predict_samples)

    def run_plan(self) -> RunPlan:
        """Adam's plan with ``M`` inducing inputs."""
        return replace(AdamScheduleSettings.run_plan(self), inducing=self.num_inducing)
