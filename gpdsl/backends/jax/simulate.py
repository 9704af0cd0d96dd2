"""Forward simulation from a model: hyperparameters from their priors, latent values, then data.

Used for simulation-based calibration and for simulated case-study data.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.backends.jax.lowering import JaxModel
from gpdsl.errors import MethodError
from gpdsl.ir import nodes as ir
from gpdsl.likelihoods import LIKELIHOODS
from gpdsl.numerics.linalg import cholesky
from gpdsl.priors import PRIORS


def _draw(table: dict, name: str, key, args, shape):
    """One draw of the built-in prior or likelihood ``table[name]``, by its object's sampler."""
    element = table.get(name)
    sample = None if element is None else element.sample
    if sample is None:
        raise MethodError(f"cannot simulate from '{name}'")
    return sample(key, shape, *args)


def simulate(jax_model: JaxModel, key, fixed: dict | None = None, observe: bool = True) -> tuple[dict, dict]:
    """Draw every unobserved variable from its prior, then the observed data from the likelihood.

    Parameters
    ----------
    jax_model : JaxModel
        A lowering of the model with the non-observed data (inputs, sizes); observed data may hold any
        placeholder of the right shape.
    key : jax.Array
        Random key.
    fixed : dict, optional
        Values to use instead of drawing (e.g. a hyperparameter held at its true value).
    observe : bool
        Also draw the observed data; False draws only the unobserved variables (no external likelihood is
        then needed), and ``observed`` is empty.

    Returns
    -------
    truth : dict
        Drawn parameters and latent values by name.
    observed : dict
        Simulated data by name.
    """
    model = jax_model.model
    env = dict(jax_model.data)
    fixed = dict(fixed or {})
    env.update({k: jnp.asarray(v) for k, v in fixed.items()})
    variables = {**model.parameters, **model.latents, **model.data}
    truth, observed = {}, {}
    for statement, loops in model.walk():
        target = statement.target
        store = observed if isinstance(statement, (ir.LikelihoodStatement, ir.ExternalLikelihood)) else truth
        if store is observed and not observe:
            continue
        if target.name in fixed:
            truth[target.name] = env[target.name]
            continue
        if target.name not in store:
            shape = variables[target.name].type.concrete_shape(jax_model.sizes)
            dtype = jnp.int64 if variables[target.name].type.base == "int" else float
            env[target.name] = jnp.zeros(shape, dtype)
        for bound in _loop_bindings(jax_model, loops, env):
            scope = {**env, **bound}
            key, sub = jax.random.split(key)
            index = tuple(int(jax_model.evaluate(i, scope)) - 1 for i in target.indices)
            shape = target.type.concrete_shape(jax_model.sizes)
            if isinstance(statement, ir.GPStatement):
                L = cholesky(jax_model.gp_covariance(statement, scope))
                value = jnp.reshape(L @ jax.random.normal(sub, (L.shape[0], int(np.prod(shape)) // L.shape[0])),
                                    shape) + jax_model.gp_mean(statement, scope)
            elif isinstance(statement, ir.ExternalLikelihood):
                raise MethodError(f"cannot simulate '{target.name}' from an external likelihood", statement.span)
            else:
                args = [jnp.asarray(jax_model.evaluate(v, scope)) for _, v in statement.distribution.args]
                table = LIKELIHOODS if isinstance(statement, ir.LikelihoodStatement) else PRIORS
                value = _draw(table, statement.distribution.name, sub, args, shape)
            env[target.name] = env[target.name].at[index].set(value) if index else value
        store[target.name] = env[target.name]
    return truth, observed


def _loop_bindings(jax_model: JaxModel, loops, env):
    if not loops:
        yield {}
        return
    loop, rest = loops[0], loops[1:]
    start, stop = int(jax_model.evaluate(loop.start, env)), int(jax_model.evaluate(loop.stop, env))
    for value in range(start, stop + 1):
        for inner in _loop_bindings(jax_model, rest, {**env, loop.variable: value}):
            yield {loop.variable: value, **inner}
