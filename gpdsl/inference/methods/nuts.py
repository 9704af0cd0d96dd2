"""The ``nuts`` method: Stan's NUTS on the generated program (the baseline every engine is compared with).

model + data -> generated Stan program -> runner (cmdstanpy when CmdStan is installed, else PyStan in a
subprocess) -> :class:`~gpdsl.results.method_output.MethodOutput`.

The program's generated quantities give the pointwise ``log_likelihood`` and the ``posterior_predictive``
replicates of every observed variable (for GP regression, f integrated out, the exact leave-one-out
predictive densities; see :mod:`gpdsl.backends.stan.codegen`). Missing outcomes (NaN) are left out of the
likelihood through index arrays of the observed entries: the pointwise log-likelihood covers the observed entries
alone, the replicates every entry (at the missing ones, imputations). Predictions at new inputs of latent-GP and
GP-regression models are computed from NUTS's draws by the engines' code
(:mod:`gpdsl.inference.methods.draw_groups`), joint over the new points or point by point as for every sampler
(``context.predictive``); other models are refused before anything runs. A model with a Hilbert-space approximate GP
gets the paper's diagnostics of its length-scale draws in ``report.warnings`` (:mod:`gpdsl.inference.hsgp_diagnostics`,
shown by ``gpdsl summary``).
"""

from __future__ import annotations


import numpy as np

from gpdsl.backends.stan.codegen import generate_stan
from gpdsl.backends.stan.runners import sample_stan
from gpdsl.backends.stan.stanc import check_program
from gpdsl.errors import MethodError
from gpdsl.inference.hsgp_diagnostics import hsgp_warnings
from gpdsl.settings.sampling import NUTSSettings


def nuts_refusal(model, facts, settings: NUTSSettings) -> MethodError | None:
    """Why Stan cannot run ``model``: what the program generator refuses (an external likelihood, ...), or None."""
    try:
        generate_stan(model)
    except MethodError as error:
        return error
    return None


def run_nuts(model, data, settings: NUTSSettings, context):
    """Sample a model with Stan's NUTS.

    Parameters
    ----------
    model : Model
        The checked model; every parameter needs a prior.
    data : dict
        Validated data (see :func:`gpdsl.data.io.load_data`).
    settings : NUTSSettings
    context : RunContext
        Seed, progress and new inputs.

    Returns
    -------
    MethodOutput
        Draws of every parameter and sampled latent variable (and of an HSGP latent's basis weights, ``<f>_z``), the
        pointwise log-likelihood and replicates of
        every observed variable, predictions at new inputs, Stan's sampler statistics, and timings:
        ``compile`` (build), ``warmup`` and ``sampling`` (the sampling call's wall time split in the
        proportion of the elapsed times Stan's chains report).
    """
    from gpdsl.results.method_output import MethodOutput

    from gpdsl.data.missing import observed_masks

    program = generate_stan(model, missing=tuple(observed_masks(model, data)))
    check_program(program.code, model.name)
    fit = sample_stan(program.code, program.stan_data(model, data), chains=settings.chains, warmup=settings.warmup,
                      draws=settings.draws, seed=context.seed, adapt_delta=settings.adapt_delta,
                      max_depth=settings.max_depth, progress=context.progress, backend=settings.backend,
                      thin=settings.thin)
    names = [n for n in list(model.parameters) + list(model.latents) if n in fit.draws]
    weights = {f"{v.name}_z": v.weights for v in program.variables.values() if v.kind in ("hsgp", "state_space")}
    running = fit.sampling_time if fit.sampling_time is not None else fit.wall_time
    share = fit.warmup_share if fit.warmup_share is not None else 0.0
    timings = {"compile": fit.wall_time - running, "warmup": running * share,
               "sampling": running * (1.0 - share), "total": fit.wall_time}
    posterior = {n: fit.draws[n] for n in names}
    posterior.update({name: fit.draws[stan] for name, stan in weights.items()})  # an HSGP's weights (predictions)
    output = MethodOutput(posterior, fit.sample_stats, timings=timings,
                          attrs={"backend": fit.backend}, versions=dict(fit.versions))
    warnings = hsgp_warnings(model, data, output.posterior)
    if warnings:
        output.report.setdefault("warnings", []).extend(warnings)
    output.log_likelihood = {name: fit.draws[stan] for name, stan in program.log_likelihood.items()}
    output.posterior_predictive = {name: _as_declared(fit.draws[stan], model.data[name].type.base)
                                   for name, stan in program.replicates.items()}
    if context.new_inputs is not None:
        from gpdsl.inference.methods.draw_groups import add_draw_groups

        add_draw_groups(output, model, data, context, pointwise=False)
    return output


def _as_declared(values, base: str) -> np.ndarray:
    """Draws of a generated quantity in the dtype of the data it replicates (Stan's CSV holds ints as reals)."""
    values = np.asarray(values)
    return np.rint(values).astype(np.int64) if base == "int" else values.astype(np.float64)
