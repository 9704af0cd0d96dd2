"""The ``gibbs`` method: elliptical slice sampling of f alternated with SA, AA, SURR or SURR-slice
updates of the hyperparameters (Murray & Adams 2010; the baselines of Filippone & Girolami 2014)."""

from __future__ import annotations

from dataclasses import dataclass

from gpdsl.settings import SegmentedChainSettings, option, require_choice, require_number, require_positive_int

THETA_UPDATES = ("sa", "aa", "surr", "surr_slice", "sdss", "fixed_nu")


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


def run_gibbs(model, data, settings: GibbsSettings, context):
    """Run ``gibbs``; returns a :class:`~gpdsl.results.method_output.MethodOutput` with draws of f, the pointwise
    log-likelihood and replicates, and predictions at new inputs (:mod:`~gpdsl.inference.methods.draw_groups`)."""
    from gpdsl.inference.methods.draw_groups import add_draw_groups
    from gpdsl.inference.methods.latent_chains import run_latent_chains, view

    problem = view(model, data, context)
    output = run_latent_chains(problem, gibbs_engine(problem, settings), settings, context, keep_latent=True)
    add_draw_groups(output, model, data, context)
    return output


def gibbs_engine(problem, settings: GibbsSettings):
    """``(init, step, extract)`` of ``gibbs`` on a latent-GP view."""
    from gpdsl.inference.mcmc.gibbs import make_gibbs

    init, step = make_gibbs(problem, settings.theta_update, settings.repeat_f, settings.repeat_theta,
                            settings.target_acceptance, surrogate_variance=settings.surrogate_variance)
    extract = lambda s: {"theta": s.latent.theta, "f": s.latent.f}  # noqa: E731
    return init, step, extract
