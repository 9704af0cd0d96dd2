"""NUTS through Stan: model + data -> generated program -> runner -> results in the common format."""

from __future__ import annotations

import json

import numpy as np

from gpdsl.backends.stan.codegen import generate_stan
from gpdsl.backends.stan.runners import sample_stan
from gpdsl.backends.stan.stanc import check_program
from gpdsl.errors import MethodError
from gpdsl.ir.nodes import Model
from gpdsl.results.build import build_results


def require_priors(model: Model, method: str) -> None:
    """Refuse a sampler on a model with parameters that have no prior, naming them."""
    missing = model.unpriored_parameters()
    if missing:
        names = ", ".join(f"'{n}'" for n in missing)
        raise MethodError(
            f"{method} samples every parameter and needs a prior on each; {names} "
            f"{'has' if len(missing) == 1 else 'have'} none",
            hint="add priors beside the parameters (e.g. 'real<lower=0> s2 ~ lognormal(0, 1);'), "
                 "or use a method that point-estimates them")


def data_groups(model: Model, data: dict) -> tuple[dict, dict, dict]:
    """Observed data (likelihood targets), constant data (the rest but sizes) and their dims.

    Size symbols are not stored as variables: they are the lengths of the dims named after them.
    """
    observed_names = {s.target.name for s in model.likelihoods()}
    observed, constant, dims = {}, {}, {}
    for name, var in model.data.items():
        if name in model.sizes:
            continue
        value = np.asarray(data[name])
        (observed if name in observed_names else constant)[name] = value
        dims[name] = list(var.type.dim_names(name))
    return observed, constant, dims


def sample_nuts(model: Model, data: dict, *, backend: str = "auto", chains: int = 4, warmup: int = 1000,
                draws: int = 1000, seed: int | None = None, adapt_delta: float = 0.8, max_depth: int = 10,
                progress: bool = True):
    """Sample a model with Stan's NUTS and return results (ArviZ InferenceData or DataTree).

    Parameters
    ----------
    model : Model
        The checked model; every parameter needs a prior.
    data : dict
        Validated data (see :func:`gpdsl.data_io.load_data`).
    backend : {"auto", "pystan", "cmdstanpy"}
        Stan interface; ``"auto"`` prefers CmdStan when installed.
    chains, warmup, draws, seed, adapt_delta, max_depth
        NUTS settings, as in CmdStan.
    progress : bool
        Show compilation and sampling progress on stderr.
    """
    require_priors(model, "NUTS")
    program = generate_stan(model)
    check_program(program.code, model.name)
    fit = sample_stan(program.code, program.stan_data(model, data), chains=chains, warmup=warmup,
                      draws=draws, seed=seed, adapt_delta=adapt_delta, max_depth=max_depth,
                      progress=progress, backend=backend)
    names = [n for n in list(model.parameters) + list(model.latents) if n in fit.draws]
    variables = {**model.parameters, **model.latents}
    posterior = {n: fit.draws[n] for n in names}
    dims = {n: list(variables[n].type.dim_names(n)) for n in names}
    observed, constant, data_dims = data_groups(model, data)
    dims.update(data_dims)
    settings = {k: v for k, v in fit.settings.items() if k != "init"}
    attrs = {
        "method": "nuts", "backend": fit.backend, "settings": json.dumps(settings), "seed": seed,
        "wall_time": fit.wall_time, "sampling_time": fit.sampling_time, "model_hash": model.source_hash,
        "model_name": model.name, "max_tree_depth": max_depth, **{f"{k}_version": v for k, v in fit.versions.items()},
    }
    return build_results(posterior, dims=dims, sample_stats=fit.sample_stats, observed_data=observed,
                         constant_data=constant, attrs=attrs)
