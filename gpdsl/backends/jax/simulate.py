"""Forward simulation from a model: hyperparameters from their priors, latent values, then data.

Used for simulation-based calibration and for simulated case-study data.

A Student-t process is the normal scale mixture of its MVT: one mixing scale ``w = (nu - 2) / chi2_nu`` per
process, ``f = sqrt(w) L z`` (``L L' = K``), and its observations ``y = f + sqrt(w) s e``: the noise shares the
mixing scale, so ``y ~ MVT(nu, 0, K + s^2 I)`` with that covariance, the model's density.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.backends.jax.lowering import JaxModel
from gpdsl.backends.jax.truncated_draws import draw_within, restricts
from gpdsl.errors import MethodError
from gpdsl.ir import nodes as ir
from gpdsl.likelihoods import LIKELIHOODS
from gpdsl.numerics.linalg import cholesky
from gpdsl.priors import PRIORS


def _draw(statement, key, args, shape, bounds):
    """One draw of the built-in prior or likelihood of ``statement``, by its object's sampler; a prior restricted
    to the declared ``bounds`` of its variable where they cut into its support."""
    likelihood = isinstance(statement, ir.LikelihoodStatement)
    distribution = statement.distribution
    element = (LIKELIHOODS if likelihood else PRIORS).get(distribution.name)
    if element is None or element.sample is None:
        raise MethodError(f"cannot simulate from '{distribution.name}'")
    if not likelihood and restricts(element, distribution, *bounds):
        return draw_within(element, key, shape, args, *bounds)
    return element.sample(key, shape, *args)


def simulate(jax_model: JaxModel, key, fixed: dict | None = None, observe: bool = True) -> tuple[dict, dict]:
    """Draw every unobserved variable from its prior, then the observed data from the likelihood.

    A prior on a variable whose declared bounds cut into its support is drawn restricted to them
    (:mod:`gpdsl.backends.jax.truncated_draws`), as the model's density is.

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
    mixing = {}  # id(likelihood of a Student-t process) -> its mixing scale
    processes = {id(node.likelihood): node.name for node in jax_model.process_nodes}
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
            elif isinstance(statement, ir.StudentTProcessStatement):
                value, mixing[target.name] = _student_t_process_draw(jax_model, statement, scope, sub)
            elif id(statement) in processes:
                process = processes[id(statement)]
                sigma = jnp.asarray(jax_model.evaluate(statement.distribution.arg("sigma"), scope))
                value = env[process] + jnp.sqrt(mixing[process]) * sigma * jax.random.normal(sub, shape)
            elif isinstance(statement, ir.ExternalLikelihood):
                raise MethodError(f"cannot simulate '{target.name}' from an external likelihood", statement.span)
            else:
                args = [jnp.asarray(jax_model.evaluate(v, scope)) for _, v in statement.distribution.args]
                declared = variables[target.name].type
                value = _draw(statement, sub, args, shape, (declared.lower, declared.upper))
            env[target.name] = env[target.name].at[index].set(value) if index else value
        store[target.name] = env[target.name]
    return truth, observed


def _student_t_process_draw(jax_model: JaxModel, statement: ir.StudentTProcessStatement, env, key):
    """``f = sqrt(w) L z`` and the mixing scale ``w = (nu - 2) / chi2_nu`` of a Student-t process."""
    nu = jnp.asarray(jax_model.evaluate(statement.dof, env), dtype=float)
    mixing_key, value_key = jax.random.split(key)
    w = (nu - 2) / (2.0 * jax.random.gamma(mixing_key, nu / 2))
    L = cholesky(jax_model.gp_covariance(statement, env))
    return jnp.sqrt(w) * (L @ jax.random.normal(value_key, (L.shape[0],))), w


def _loop_bindings(jax_model: JaxModel, loops, env):
    if not loops:
        yield {}
        return
    loop, rest = loops[0], loops[1:]
    start, stop = int(jax_model.evaluate(loop.start, env)), int(jax_model.evaluate(loop.stop, env))
    for value in range(start, stop + 1):
        for inner in _loop_bindings(jax_model, rest, {**env, loop.variable: value}):
            yield {loop.variable: value, **inner}
