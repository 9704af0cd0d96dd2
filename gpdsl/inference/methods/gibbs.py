"""The ``gibbs`` method: elliptical slice sampling of f alternated with SA, AA, SURR or SURR-slice
updates of the hyperparameters (Murray & Adams 2010; the baselines of Filippone & Girolami 2014)."""

from __future__ import annotations


from gpdsl.settings.sampling import GibbsSettings


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
