"""The schedules several methods share: Markov chains, Adam's two phases, L-BFGS's stopping rules.

A method's settings class derives from the schedule its engine runs, so that every method of one kind has the
same flags with the same checks.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpdsl.errors import MethodError
from gpdsl.settings.fields import (LARGEST_INT, RunPlan, SettingError, initial_values_from_cli, option,
                                   require_number, require_positive_int)


@dataclass(frozen=True)
class ChainSettings:
    """Settings every Markov chain method shares.

    Attributes
    ----------
    chains : int
        Independent chains.
    warmup : int
        Warmup (adaptation, burn-in) iterations per chain, not kept.
    draws : int
        Kept iterations per chain.
    thin : int
        Keep every ``thin``-th iteration after warmup (Stan's ``thin``): ``draws * thin`` iterations run, the first
        of each ``thin`` kept, as Stan keeps them; what a method computes per kept draw (draws of ``f``, replicates, predictions) is
        computed for those alone.
    """

    chains: int = option(4, "independent chains")
    warmup: int = option(1000, "warmup iterations per chain (adaptation; not kept)")
    draws: int = option(1000, "kept draws per chain")
    thin: int = option(1, "keep every thin-th iteration after warmup (Stan's thin: draws x thin iterations run)")

    def __post_init__(self):
        require_positive_int("chains", self.chains)
        require_positive_int("warmup", self.warmup, allow_zero=True)
        require_positive_int("draws", self.draws)
        require_positive_int("thin", self.thin)
        if self.warmup + self.draws * self.thin > LARGEST_INT:
            raise SettingError("warmup", f"+ draws x thin must be at most {LARGEST_INT}: iterations are counted in 32 "
                                         f"bits (Stan's and gpdsl's alike); got {self.warmup} + {self.draws} x "
                                         f"{self.thin}")

    def run_plan(self) -> RunPlan:
        """Chains of ``N x N`` kernel matrices, and their draws."""
        return RunPlan(self.chains, self.draws)


@dataclass(frozen=True)
class SegmentedChainSettings(ChainSettings):
    """Settings of the chain methods gpdsl's driver runs (:func:`gpdsl.inference.driver.run_chains`).

    Attributes
    ----------
    segment_size : int
        Iterations per compiled segment; progress and the checkpoint (``--checkpoint``) are written after each.
        The draws do not depend on it.
    initial_values : dict
        Hyperparameters every chain starts at, by name (constrained values; one value for a whole vector, or one
        per element); the others start where the method starts them (a draw from their priors, or the
        variational fit's estimate).
    """

    segment_size: int = option(100, "iterations per compiled segment: progress and the checkpoint are written "
                                    "after each (the draws do not depend on it)")
    initial_values: dict = option({}, "start every chain at this value of a hyperparameter (repeatable; vectors as "
                                      "v1,v2,...; default: where the method starts them)", flag="--init-value",
                                  metavar="NAME=VALUE", repeat=True, parse=initial_values_from_cli)

    def __post_init__(self):
        super().__post_init__()
        require_positive_int("segment_size", self.segment_size)
        if not isinstance(self.initial_values, dict):
            raise MethodError(f"initial_values must be a dict of name to value; got {self.initial_values!r}")

    def run_plan(self) -> RunPlan:
        """Chains of ``N x N`` kernel matrices, their draws, and where the chains start."""
        return replace(super().run_plan(), initial_values=self.initial_values)


@dataclass(frozen=True)
class AdamScheduleSettings:
    """Settings every method fitted by Adam over de Souza's (2020) schedule shares
    (:mod:`gpdsl.inference.optimise.adam`): ``noise_fixed_steps`` with the likelihood's scale held, then ``steps``
    with everything free, fresh moments in each phase.

    Attributes
    ----------
    noise_fixed_steps, steps : int
        The two phases' steps.
    learning_rate : float
        Adam's step size.
    chunk : int
        Adam steps per compiled chunk: progress and the checkpoint (``--checkpoint``) are written after each.
    initial_values : dict
        Constrained starting values of hyperparameters by name.
    seed : int
        Seed of the start and of any minibatches and samples (the run's seed replaces it).
    """

    noise_fixed_steps: int = option(2000, "Adam steps with the likelihood's scale held at its initial value (0: none)")
    steps: int = option(5000, "Adam steps with every parameter free, after --noise-fixed-steps (fresh moments)")
    learning_rate: float = option(0.01, "Adam's step size")
    chunk: int = option(100, "Adam steps per compiled chunk: progress and the checkpoint are written after each")
    initial_values: dict = option({}, "initial value of a hyperparameter (repeatable; vectors as v1,v2,...)",
                                  flag="--init-value", metavar="NAME=VALUE", repeat=True,
                                  parse=initial_values_from_cli)
    seed: int = option(0, "seed (replaced by the run's)", cli=False)

    def __post_init__(self):
        if not isinstance(self.initial_values, dict):
            raise MethodError(f"initial_values must be a dict of name to value; got {self.initial_values!r}")
        require_positive_int("noise_fixed_steps", self.noise_fixed_steps, allow_zero=True)
        require_positive_int("steps", self.steps)
        require_positive_int("chunk", self.chunk)
        require_number("learning_rate", self.learning_rate, 0, open_low=True)
        require_positive_int("seed", self.seed, allow_zero=True)

    def run_plan(self) -> RunPlan:
        """Where the fit starts; the methods fitted by Adam are sparse or variational (no ``N x N`` kernel)."""
        return RunPlan(full_kernel=False, initial_values=self.initial_values)


@dataclass(frozen=True)
class LBFGSSettings:
    """L-BFGS's stopping rules (:mod:`gpdsl.inference.optimise.lbfgs`), shared by every method it fits.

    Attributes
    ----------
    max_iterations, max_evaluations : int
        L-BFGS iterations and objective-and-gradient evaluations.
    ftol, gtol : float
        Relative-reduction and largest-gradient-component tolerances (SciPy's L-BFGS-B defaults).
    restarts : int
        Restarts from the end point after a stop short of ``gtol``, while the objective improves.
    """

    max_iterations: int = option(1000, "L-BFGS iterations")
    max_evaluations: int = option(15000, "bound-and-gradient evaluations")
    ftol: float = option(2.220446049250313e-09, "L-BFGS relative-reduction tolerance")
    gtol: float = option(1e-5, "L-BFGS largest-gradient-component tolerance")
    restarts: int = option(5, "L-BFGS restarts after a stop short of gtol (while the bound improves)")

    def __post_init__(self):
        for name in ("max_iterations", "max_evaluations"):
            require_positive_int(name, getattr(self, name))
        require_positive_int("restarts", self.restarts, allow_zero=True)
        require_number("ftol", self.ftol, 0)
        require_number("gtol", self.gtol, 0)
