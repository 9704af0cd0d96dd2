"""The ``svi-gplvm`` method: the Bayesian GPLVM by Adam on minibatches of the uncollapsed bound.

The fit (:mod:`gpdsl.inference.variational.minibatch_gplvm`) is stored as variational EM's is
(:func:`~gpdsl.inference.methods.vem.vem_output`: ``q(X)``, the inducing inputs and the hyperparameters as one
draw, ``lp`` the whole-data uncollapsed bound, ``bound_trace`` the mean minibatch estimate of each chunk of
steps), and predicts as it does (``--predict`` with new outputs fits ``q(X*)``).
"""

from __future__ import annotations

from gpdsl.inference.progress import stage
from gpdsl.settings.fitting import SVIGPLVMSettings


def run_svi_gplvm(model, data, settings: SVIGPLVMSettings, context):
    """Fit the Bayesian GPLVM the registry classified (``context.facts``) by Adam on minibatches."""
    from gpdsl.inference.families.gplvm import gplvm_view
    from gpdsl.inference.methods.vem import fitted_output
    from gpdsl.inference.variational.minibatch_gplvm import as_vem_fit, fit_minibatch_gplvm

    problem = gplvm_view(model, data, context.facts)
    vem_settings = settings.vem_settings(context.seed)
    with stage(f"minibatch variational GPLVM: {settings.noise_fixed_steps + settings.steps} Adam steps",
               enabled=context.progress):
        fit = fit_minibatch_gplvm(problem, vem_settings, batch_size=settings.batch_size,
                                  noise_fixed_steps=settings.noise_fixed_steps, steps=settings.steps,
                                  learning_rate=settings.learning_rate, chunk=settings.chunk, seed=context.seed,
                                  progress=context.progress, checkpoint=context.checkpoint,
                                  identity=context.checkpoint_identity)
    return fitted_output(model, as_vem_fit(problem, vem_settings, fit, settings.learning_rate, settings.batch_size),
                         context)


def svi_gplvm_report(results, model, settings: SVIGPLVMSettings):
    """The fit's report (:class:`~gpdsl.results.report.RunReport`): Adam's outcome and the final bound."""
    from gpdsl.results.report import number, optimiser, optimiser_report

    return optimiser_report(results, f"minibatch variational GPLVM (Adam, {settings.batch_size} rows a step, "
                                     f"M = {settings.num_inducing})", f"final bound {number(optimiser(results), 'bound')}")
