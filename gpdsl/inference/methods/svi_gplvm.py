"""The ``svi-gplvm`` method: the Bayesian GPLVM by Adam on minibatches of the uncollapsed bound.

The fit (:mod:`gpdsl.inference.variational.minibatch_gplvm`) is stored as variational EM's is
(:func:`~gpdsl.inference.methods.vem.vem_output`: ``q(X)``, the inducing inputs and the hyperparameters as one
draw, ``lp`` the whole-data uncollapsed bound, ``bound_trace`` the mean minibatch estimate of each chunk of
steps), and predicts as it does (``--predict`` with new outputs fits ``q(X*)``).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpdsl.settings import AdamScheduleSettings, option, require_choice, require_number, require_positive_int

INITIALISATIONS = ("pca", "random")


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
        from gpdsl.inference.methods.vem import VEMSettings

        return VEMSettings(num_inducing=self.num_inducing, init=self.init, init_variance=self.init_variance,
                           initial_values=self.initial_values, seed=seed)


def run_svi_gplvm(model, data, settings: SVIGPLVMSettings, context):
    """Fit the Bayesian GPLVM the registry classified (``context.facts``) by Adam on minibatches."""
    from gpdsl.inference.families.gplvm import gplvm_view
    from gpdsl.inference.methods.vem import vem_output, vem_predictions
    from gpdsl.inference.variational.minibatch_gplvm import as_vem_fit, fit_minibatch_gplvm

    problem = gplvm_view(model, data, context.facts)
    vem_settings = settings.vem_settings(context.seed)
    fit = fit_minibatch_gplvm(problem, vem_settings, batch_size=settings.batch_size,
                              noise_fixed_steps=settings.noise_fixed_steps, steps=settings.steps,
                              learning_rate=settings.learning_rate, chunk=settings.chunk, seed=context.seed,
                              progress=context.progress, checkpoint=context.checkpoint,
                              identity=context.checkpoint_identity)
    vem_fit = as_vem_fit(problem, vem_settings, fit, settings.learning_rate, settings.batch_size)
    output = vem_output(model, vem_fit)
    if context.new_inputs is not None:
        output.predictions, prediction_dims = vem_predictions(model, vem_fit, context.new_inputs)
        output.dims.update(prediction_dims)
    output.state = vem_fit
    return output
