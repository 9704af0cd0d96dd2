"""The view of a sequential latent GP model that the sequential sampler and the full baseline work on.

``f ~ gp((t, X), k)`` over a grid of T time points by N inputs, with a likelihood per time step in a
loop (``for (i in 1:T) y[i] ~ lik(f[i], ...)``; Tegner et al. 2018). Every data variable whose leading
dimension is the time size T (``t``, ``X``, ``y``, ...) is *stepped*: a window of steps ``start..stop-1``
is the model with T = ``stop - start`` and those variables sliced, so that

- :meth:`SequentialGP.latent_gp` is the ordinary latent-GP view of steps ``0..t-1`` (the initial sample
  S_1, and the full-sampling baseline on ``f_1:t``), and
- :class:`StepFunctions` gives, for a window of ``w`` earlier steps and the current one, the conditional
  GP prior of ``f_t`` given the earlier ``f`` (eq. 6) and the log likelihood of step t alone, with the
  window's data as arguments: one compiled program serves every step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.backends.jax.lowering import JaxModel, constrain_blocks, lower
from gpdsl.inference.families.hyperparameters import HyperparameterBlocks
from gpdsl.inference.families.latent_gp import LatentGP
from gpdsl.ir import nodes as ir
from gpdsl.ir.structure import GPNode
from gpdsl.numerics.linalg import cholesky, solve_triangular


@dataclass
class SequentialGP(HyperparameterBlocks):
    """A latent GP over ``(t, x)`` with one likelihood term per time step.

    Attributes
    ----------
    model : ir.Model
    data : dict
        The validated data of all T steps.
    node : GPNode
        The latent GP (its statement's inputs are ``(t, X)``).
    time_size : str
        The size symbol of the time dimension (``T``).
    steps, n : int
        T, and the number of latent values per step (N).
    stepped : tuple of str
        The data variables whose leading dimension is the time.
    likelihood : ir.Statement
        The likelihood statement, inside one loop over the steps.
    loop_variable : str
        That loop's variable.
    allow_external : bool
        Whether an external likelihood may run.
    """

    model: ir.Model
    data: dict
    node: GPNode
    time_size: str
    steps: int
    n: int
    stepped: tuple[str, ...]
    likelihood: ir.Statement
    loop_variable: str
    allow_external: bool = False
    theta_blocks: list = field(default_factory=list)
    _lowered: dict = field(default_factory=dict, repr=False)

    def __post_init__(self):
        self.theta_blocks = [b for b in self.lowered(1).blocks if b.role == "parameter"]

    @property
    def name(self) -> str:
        """The latent GP's name."""
        return self.node.name

    @property
    def theta_dim(self) -> int:
        return sum(b.size for b in self.theta_blocks)

    @cached_property
    def jax_model(self) -> JaxModel:
        """The lowering of the first step (for the hyperparameters' priors)."""
        return self.lowered(1)

    def window(self, start: int, stop: int) -> dict:
        """The stepped data of steps ``start..stop-1`` (0-based), by name."""
        return {name: np.asarray(self.data[name])[start:stop] for name in self.stepped}

    def lowered(self, length: int) -> JaxModel:
        """The model lowered on ``length`` steps (the first ones' data; windows pass their own)."""
        if length not in self._lowered:
            data = {**self.data, **self.window(0, length), self.time_size: length}
            self._lowered[length] = lower(self.model, data, "centred", allow_external=self.allow_external,
                                          marginalise=False)
        return self._lowered[length]

    def latent_gp(self, steps: int) -> LatentGP:
        """The latent-GP view of steps ``0..steps-1``: ``f_1:steps`` sampled jointly."""
        jax_model = self.lowered(steps)
        node = next(n for n in jax_model.gp_nodes if n.name == self.name)
        kind = self.likelihood.distribution.name if isinstance(self.likelihood, ir.LikelihoodStatement) \
            else "external"
        y = np.asarray(jax_model.data[self.likelihood.target.name])
        return LatentGP(jax_model, node, self.theta_blocks, self.theta_dim, steps * self.n, kind, y)

    def functions(self, window: int) -> "StepFunctions":
        """The step functions with ``window`` earlier steps in the conditional prior."""
        return StepFunctions(self, window)


@dataclass(frozen=True)
class StepFunctions:
    """The conditional prior and the likelihood of one step, given ``window`` earlier steps' ``f``.

    Each function takes ``data``, the stepped data of the ``window + 1`` steps (the current one last),
    as traced arrays.
    """

    view: SequentialGP
    window: int

    @property
    def jax_model(self) -> JaxModel:
        return self.view.lowered(self.window + 1)

    def environment(self, theta, data: dict, f=None) -> dict:
        values, _ = constrain_blocks(theta, self.view.theta_blocks)
        env = {**self.jax_model.data, **data, **values}
        if f is not None:
            env[self.view.name] = jnp.reshape(f, (self.window + 1, self.view.n))
        return env

    def prior(self, theta, data: dict, f_previous) -> tuple[jax.Array, jax.Array]:
        """Mean and lower Cholesky factor of ``f_t | f_{t-window:t-1}, theta`` (eq. 6); the marginal prior
        of ``f_t`` when ``window`` is 0. ``f_previous`` has shape ``(window * n,)``."""
        K = self.jax_model.gp_covariance(self.view.node.statement, self.environment(theta, data))
        split = self.window * self.view.n
        chol = cholesky(K)
        if split == 0:
            return jnp.zeros(self.view.n), chol
        # K = L L^T in blocks: f_t | f_prev has mean L21 L11^{-1} f_prev and Cholesky factor L22
        return chol[split:, :split] @ solve_triangular(chol[:split, :split], f_previous, lower=True), chol[split:, split:]

    def new_conditional(self, theta, data: dict, f_window, X_new) -> tuple[jax.Array, jax.Array]:
        """Mean and covariance of ``f_t`` at new inputs ``X_new`` (``(m, D)``, of the current step) given ``f`` of the
        window's ``window + 1`` steps (``f_window``, shape ``((window + 1) * n,)``) under the same GP."""
        env = self.environment(theta, data)
        statement = self.view.node.statement
        kernel = self.jax_model.gp_kernel(statement, env)
        points = self.jax_model.gp_inputs(statement, env)
        time = jnp.asarray(self.jax_model.evaluate(statement.inputs.components[0], env), dtype=float)[-1]
        new = jnp.concatenate([jnp.full((X_new.shape[0], 1), time), jnp.asarray(X_new, dtype=float)], axis=1)
        chol = cholesky(self.jax_model.gp_covariance(statement, env))
        a = solve_triangular(chol, kernel(points, new), lower=True)
        mean = a.T @ solve_triangular(chol, f_window, lower=True)
        return mean, kernel(new) - a.T @ a

    def log_likelihood(self, f_t, theta, data: dict, f_previous) -> jax.Array:
        """``log p(y_t | f_t, theta)``: the likelihood statement at the window's last step alone."""
        f = jnp.concatenate([f_previous, f_t])
        env = self.environment(theta, data, f)
        return self.jax_model.statement_log_density(self.view.likelihood, env,
                                                    {self.view.loop_variable: self.window + 1})


def sequential_view(model: ir.Model, data: dict, node: GPNode, allow_external: bool = False) -> SequentialGP:
    """The :class:`SequentialGP` of a model of the sequential family, whose facts are its GP ``node``
    (:func:`gpdsl.ir.family_forms.sequential_form` checked the times, the per-step values and the likelihood's
    loop)."""
    statement = node.statement
    time_size = statement.inputs.components[0].type.dims[0]
    var = model.latents[node.name]
    loops = next(loops for s, loops in model.walk() if s is node.likelihood)
    sizes = {name: int(data[name]) for name in model.sizes}
    stepped = tuple(name for name, declared in model.data.items()
                    if declared.type.shape and declared.type.shape[0] == time_size)
    return SequentialGP(model, data, node, time_size, sizes[time_size], var.type.concrete_shape(sizes)[1], stepped,
                        node.likelihood, loops[0].variable, allow_external)
