"""The ``sgpr`` method: sparse GP regression by Titsias's (2009) collapsed variational bound.

The inducing inputs, kernel hyperparameters and noise maximise the bound (plus the log prior of the
hyperparameters that have one; :mod:`gpdsl.inference.variational.sgpr_fit`). The fit is stored like a
one-draw posterior (``chain = 1``, ``draw = 1``): the hyperparameters, and the inducing inputs as
``inducing_inputs`` (dims ``(M, <input dim>)``); ``sample_stats`` holds ``lp`` (the objective), ``bound``
and ``bound_trace`` (the objective after each iteration, dim ``iteration``); the optimiser's report is
under ``report.optimizer``. With new inputs (``--predict``) the ``predictions`` group holds the
predictive ``<y>_mean`` and ``<y>_variance`` (noise included) and ``<f>_variance`` (noise excluded), dim
``<N>_new``, as ``ml``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from gpdsl.errors import MethodError
from gpdsl.settings import (initial_values_from_cli, option, require_choice, require_number,
                            require_positive_int)

OPTIMIZERS = ("lbfgs", "adam")
SCALINGS = ("blocks", "scalar")
INDUCING_INITS = ("kmeans", "random")


@dataclass(frozen=True)
class SGPRSettings:
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
    initial_values : dict
        Constrained starting values of hyperparameters by name (the others start at 1, or inside their
        bounds).
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
    learning_rate : float
        Adam's step size.
    noise_fixed_steps, steps : int
        Adam's two phases (moments reset between them). The noise is the parameter behind the likelihood's
        ``sigma`` (``sigma = s``, ``sqrt(s)``, ``inv_sqrt(s)`` or ``exp(s)``); nothing is held when it is another
        expression.
    chunk : int
        Adam steps per compiled chunk: progress and the checkpoint (``--checkpoint``) are written after each.
    jitter : float
        Added to the diagonal of ``K(Z)``.
    seed : int
        Seed of the inducing-input initialisation (the run's seed replaces it).
    """

    num_inducing: int = option(100, "inducing inputs", metavar="M")
    inducing_init: str = option("kmeans", "initial inducing inputs: k-means centres or a random subset of the "
                                          "training inputs (seeded)", choices=INDUCING_INITS)
    fix_inducing: bool = option(False, "hold the inducing inputs at their initial values")
    initial_values: dict = option({}, "initial value of a hyperparameter (repeatable; vectors as v1,v2,...)",
                                  flag="--init-value", metavar="NAME=VALUE", repeat=True,
                                  parse=initial_values_from_cli)
    optimizer: str = option("lbfgs", "lbfgs on the whole bound, or adam with the schedule --noise-fixed-steps then "
                                     "--steps", choices=OPTIMIZERS)
    scaling: str = option("blocks", "L-BFGS's initial inverse Hessian: one scale per hyperparameter coordinate and "
                                    "per input column of the inducing inputs, or one for all (scalar, as L-BFGS-B)",
                          choices=SCALINGS)
    max_iterations: int = option(1000, "L-BFGS iterations")
    max_evaluations: int = option(15000, "bound-and-gradient evaluations")
    ftol: float = option(2.220446049250313e-09, "L-BFGS relative-reduction tolerance")
    gtol: float = option(1e-5, "L-BFGS largest-gradient-component tolerance")
    restarts: int = option(5, "L-BFGS restarts after a stop short of gtol (while the bound improves)")
    learning_rate: float = option(0.01, "Adam's learning rate")
    noise_fixed_steps: int = option(2000, "Adam steps with the noise held at its initial value (0: none)")
    steps: int = option(5000, "Adam steps with every parameter free, after --noise-fixed-steps (fresh moments)")
    chunk: int = option(100, "Adam steps per compiled chunk: progress and the checkpoint are written after each")
    jitter: float = option(1e-8, "jitter added to the diagonal of K(Z)")
    seed: int = option(0, "seed (replaced by the run's)", cli=False)

    def __post_init__(self):
        require_choice("optimizer", self.optimizer, OPTIMIZERS)
        require_choice("inducing-input initialisation", self.inducing_init, INDUCING_INITS)
        require_choice("L-BFGS scaling", self.scaling, SCALINGS)
        if not isinstance(self.initial_values, dict):
            raise MethodError(f"initial_values must be a dict of name to value; got {self.initial_values!r}")
        for name in ("num_inducing", "max_iterations", "max_evaluations", "steps", "chunk"):
            require_positive_int(name, getattr(self, name))
        require_positive_int("restarts", self.restarts, allow_zero=True)
        require_positive_int("noise_fixed_steps", self.noise_fixed_steps, allow_zero=True)
        require_number("ftol", self.ftol, 0)
        require_number("gtol", self.gtol, 0)
        require_number("learning_rate", self.learning_rate, 0, open_low=True)
        require_number("jitter", self.jitter, 0)


def run_sgpr(model, data, settings: SGPRSettings, context):
    """Run ``sgpr``; returns a one-draw :class:`~gpdsl.results.method_output.MethodOutput`."""
    from gpdsl.inference.families.gp_regression import gp_regression_view
    from gpdsl.inference.variational.sgpr_fit import fit_sgpr

    problem = gp_regression_view(model, data, context.facts)
    fit = fit_sgpr(problem, replace(settings, seed=context.seed), progress=context.progress,
                   checkpoint=context.checkpoint, identity=context.checkpoint_identity)
    output = sgpr_output(fit)
    if context.new_inputs is not None:
        output.predictions, dims = sgpr_predictions(fit, context.new_inputs)
        output.dims.update(dims)
    output.state = fit
    return output


def inducing_dims(problem) -> list[str]:
    """Dimension names of the inducing inputs: ``M`` and the inputs' column dimension."""
    dim = problem.node.statement.inputs.dim
    return ["M", dim if isinstance(dim, str) and dim.isidentifier() else "input_dim"]


def sgpr_output(fit):
    """The :class:`~gpdsl.results.method_output.MethodOutput` of an SGPR fit (see the module docstring)."""
    import jax

    from gpdsl.results.method_output import MethodOutput

    posterior = {name: np.asarray(value)[None, None] for name, value in fit.hyperparameters().items()}
    posterior["inducing_inputs"] = np.asarray(fit.inducing)[None, None]
    stats = {"lp": np.asarray([[fit.objective]]), "bound": np.asarray([[fit.bound]]),
             "bound_trace": np.asarray(fit.trace)[None, None]}
    dims = {"inducing_inputs": inducing_dims(fit.problem), "bound_trace": ["iteration"]}
    return MethodOutput(posterior, stats, timings={"sampling": fit.report["seconds"]},
                        report={"optimizer": fit.report}, dims=dims,
                        attrs={"inference": "sparse variational GP regression, Titsias's collapsed bound (one "
                                            "draw: the point estimate; inducing_inputs: the fitted Z)"},
                        versions={"jax": jax.__version__})


def sgpr_predictions(fit, new_inputs) -> tuple[dict, dict]:
    """The predictions group of an SGPR fit at new inputs, and its dims (those of ``ml``)."""
    from gpdsl.inference.methods.ml import regression_predictions

    return regression_predictions(fit.problem, fit.predict(new_inputs), fit.predict(new_inputs, include_noise=False))
