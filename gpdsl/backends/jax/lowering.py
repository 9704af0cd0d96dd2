"""Lowering of the typed IR to JAX model functions.

:func:`lower` turns a checked model and validated data into a :class:`JaxModel`: a flat unconstrained
parameter vector with its layout, the transforms to the constrained space with log-Jacobians, the joint
log density, and per-GP-node kernel and input builders that engines use directly.

Latent GP values are handled in one of three ways:

* marginalised (a ``normal`` likelihood with scalar noise on the latent plus terms free of it): integrated out, each
  column contributing ``MVN(y; offset, K + sigma^2 I)``;
* ``"whitened"`` (non-centred, the default): the free variable is ``<name>_raw ~ N(0, I)`` and
  ``<name> = L <name>_raw`` with ``L L^T = K``, as in the generated Stan program;
* ``"centred"``: the latent itself is the free variable, with density ``N(0, K)``.

A latent GP with the Hilbert-space approximation (``approx = hsgp(...)``) is never integrated out, whatever the
parameterisation: the free variable is its basis weights ``<name>_z ~ N(0, I)`` (role ``"hsgp_weights"``) and
``<name> = PHI (sqrt(S(omega)) .* <name>_z)`` plus its mean (:mod:`gpdsl.backends.jax.hsgp`), as in the generated
Stan program.

A latent GP in the state-space form (``approx = state_space``) integrated out under its ``normal`` likelihood contributes
the same Gaussian marginal by the Kalman filter along its sorted times (:mod:`gpdsl.kernels.kalman`,
``O(N)``), a periodic kernel by its truncated series. Sampled (under any other likelihood), whatever the
parameterisation, its free variable is its innovations ``<name>_z ~ N(0, I)`` (role ``"state_space_innovations"``,
``N d`` values) and ``<name>`` the state recursion driven by them plus its mean (:mod:`gpdsl.backends.jax.state_space`),
as in the generated Stan program.

A Student-t process ``f ~ student_t_process(nu, X, k)`` is always integrated out under its ``y ~ normal(f, s)``:
``MVT(y; nu, 0, K + s^2 I)`` with that covariance (:mod:`gpdsl.backends.jax.student_t_process`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.storage import compilation_cache
from gpdsl.backends.jax import densities
from gpdsl.backends.jax.hsgp import HSGPBasis, basis_size, hsgp_basis, hsgp_values
from gpdsl.backends.jax.state_space import latent_from_innovations
from gpdsl.kernels.kalman import TimeGrid, time_grid
from gpdsl.backends.jax.bijectors import (
    cholesky_corr_constrain, cholesky_corr_free_size, cholesky_corr_unconstrain, constrain, simplex_constrain,
    simplex_free_size, simplex_unconstrain, unconstrain)
from gpdsl.data.missing import observed_masks
from gpdsl.errors import DataError, MethodError
from gpdsl.ir import nodes as ir
from gpdsl.ir.approximations import STATE_SPACE
from gpdsl.ir.latent_hsgp import basis_sizes, is_latent_hsgp, is_weight_space_hsgp, latent_box, latent_inputs
from gpdsl.ir.state_space import series_layout, state_dimension
from gpdsl.ir.structure import GPNode, gp_nodes, parameter_bounds, student_t_process_nodes
from gpdsl.kernels import Kernel, build_kernel, kalman
from gpdsl.kernels.hsgp_features import HSGPFeatureKernel
from gpdsl.likelihoods import LIKELIHOODS
from gpdsl.numerics.linalg import cholesky, solve_triangular
from gpdsl.numerics import GP_JITTER
from gpdsl.ir.types import VarType, is_label_array

compilation_cache.enable()  # every lowered model's programs compile once per machine

PARAMETERISATIONS = ("whitened", "centred")
STANDARD_NORMAL_ROLES = ("latent_raw", "hsgp_weights", "state_space_innovations")
"""The roles of free variables with a standard normal prior, from which latent GP values are computed."""


@dataclass(frozen=True)
class Block:
    """One named block of the flat unconstrained vector.

    Attributes
    ----------
    name : str
        Free-variable name (a parameter, a latent, or ``<latent>_raw`` for whitened GP values).
    shape : tuple of int
        Concrete shape.
    start : int
        Offset in the flat vector.
    lower, upper : array or None
        Bounds of the constrained variable.
    role : str
        ``"parameter"``, ``"latent"``, ``"latent_raw"``, ``"hsgp_weights"`` or ``"state_space_innovations"``.
    structure : str or None
        ``"cholesky_factor_corr"`` for the Cholesky factor of a correlation matrix, whose ``K (K - 1) / 2``
        unconstrained coordinates map to a ``K x K`` matrix; ``"simplex"`` for a ``K``-simplex, from ``K - 1``
        coordinates; None for an elementwise (bounded) variable.
    """

    name: str
    shape: tuple[int, ...]
    start: int
    lower: np.ndarray | None
    upper: np.ndarray | None
    role: str
    structure: str | None = None

    @property
    def size(self) -> int:
        """The number of unconstrained coordinates."""
        if self.structure == "cholesky_factor_corr":
            return cholesky_corr_free_size(self.shape[-1])
        if self.structure == "simplex":
            return simplex_free_size(self.shape[-1])
        return int(np.prod(self.shape, dtype=int))

    @property
    def free_shape(self) -> tuple[int, ...]:
        """The shape of the unconstrained coordinates: :attr:`shape`, or ``(size,)`` for a structured variable."""
        return self.shape if self.structure is None else (self.size,)

    def constrain(self, u):
        """The constrained value of unconstrained coordinates ``u`` (of :attr:`free_shape`) and the log-Jacobian."""
        if self.structure == "cholesky_factor_corr":
            return cholesky_corr_constrain(u, self.shape[-1])
        if self.structure == "simplex":
            return simplex_constrain(u)
        return constrain(u, self.lower, self.upper)

    def unconstrain(self, x):
        """Inverse of :meth:`constrain` (without the Jacobian)."""
        if self.structure == "cholesky_factor_corr":
            return cholesky_corr_unconstrain(x)
        if self.structure == "simplex":
            return simplex_unconstrain(x)
        return unconstrain(x, self.lower, self.upper)


@dataclass
class JaxModel:
    """Model functions over a flat unconstrained vector (see the module docstring).

    Attributes
    ----------
    model : ir.Model
        The checked model.
    data : dict
        Validated data (numpy arrays, sizes as ints).
    sizes : dict of str to int
        Values of the size symbols.
    blocks : list of Block
        Layout of the unconstrained vector.
    dim : int
        Its length.
    parameterisation : str
        ``"whitened"`` or ``"centred"``.
    gp_nodes : list of GPNode
        Structural facts: latent GP values, marginalised or not.
    observed : dict of str to numpy.ndarray
        For each outcome with missing (NaN) entries, the mask of its observed entries: its likelihood sums over
        those alone (an integrated-out GP's marginal is over their rows), so the missing entries are
        marginalised exactly (:mod:`gpdsl.data.missing`).
    """

    model: ir.Model
    data: dict
    sizes: dict
    blocks: list[Block]
    dim: int
    parameterisation: str
    gp_nodes: list[GPNode]
    allow_external: bool = False
    observed: dict = field(default_factory=dict)
    _externals: dict = field(default_factory=dict, repr=False)
    _hsgp_bases: dict = field(default_factory=dict, repr=False)
    _time_grids: dict = field(default_factory=dict, repr=False)
    process_nodes: list[GPNode] = field(default_factory=list)

    # ---- layout ------------------------------------------------------------------------------
    def block(self, name: str) -> Block:
        """The block of a free variable by name."""
        for b in self.blocks:
            if b.name == name:
                return b
        raise KeyError(name)

    def unflatten(self, z) -> dict:
        """Split a flat unconstrained vector into named arrays (still unconstrained)."""
        return {b.name: jnp.reshape(z[b.start:b.start + b.size], b.free_shape) for b in self.blocks}

    def flatten(self, values: dict) -> jax.Array:
        """Concatenate named unconstrained arrays into the flat vector."""
        return jnp.concatenate([jnp.ravel(jnp.asarray(values[b.name], dtype=float)) for b in self.blocks]) \
            if self.blocks else jnp.zeros((0,))

    def constrain_free(self, z) -> tuple[dict, jax.Array]:
        """Free variables on their constrained scale and the summed log-Jacobian."""
        values, log_jac = {}, jnp.zeros(())
        for name, u in self.unflatten(z).items():
            x, lj = self.block(name).constrain(u)
            values[name] = x
            log_jac = log_jac + lj
        return values, log_jac

    def unconstrain_values(self, values: dict) -> jax.Array:
        """The flat unconstrained vector of constrained free-variable values."""
        return self.flatten({b.name: b.unconstrain(values[b.name]) for b in self.blocks})

    # ---- evaluation --------------------------------------------------------------------------
    def environment(self, free: dict) -> dict:
        """Data, free variables and derived latent GP values (``f = L f_raw``) by name."""
        env = dict(self.data)
        env.update(free)
        for node in self.gp_nodes:
            if is_weight_space_hsgp(node.statement):
                env[node.name] = self.hsgp_latent(node.statement, free[node.name + "_z"], env)
            elif _state_space_sampled(node):
                env[node.name] = self.state_space_latent(node.statement, free[node.name + "_z"], env)
        if self.parameterisation == "whitened":
            for node in self.gp_nodes:
                if node.marginalised or is_weight_space_hsgp(node.statement) or _state_space_sampled(node):
                    continue
                raw = free[node.name + "_raw"]
                env[node.name] = self._whitened_to_latent(node, raw, env, env.get(node.name, jnp.zeros(raw.shape)))
        return env

    def constrained(self, z) -> dict:
        """Every model variable's value at ``z``: parameters, latents (derived where whitened)."""
        free, _ = self.constrain_free(z)
        env = self.environment(free)
        names = list(self.model.parameters) + [n for n in self.model.latents if n in env] + \
            [b.name for b in self.blocks if b.role in STANDARD_NORMAL_ROLES]
        return {name: env[name] for name in names}

    def log_density(self, z) -> jax.Array:
        """Joint log density on the unconstrained space, including log-Jacobians."""
        free, log_jac = self.constrain_free(z)
        return self.log_joint(free) + log_jac

    def log_joint(self, free: dict) -> jax.Array:
        """Joint log density of the constrained free variables (no Jacobian)."""
        env = self.environment(free)
        total = jnp.zeros(())
        for statement, loops in self.model.walk():
            total = total + self._over_loops(statement, loops, env)
        for block in self.blocks:
            if block.role in STANDARD_NORMAL_ROLES:
                total = total + jnp.sum(jax.scipy.stats.norm.logpdf(free[block.name]))
        return total

    def log_terms(self, env: dict, kinds: tuple[str, ...], targets=None) -> jax.Array:
        """Sum of the log densities of some statements in ``env``.

        Parameters
        ----------
        env : dict
            Values by name (see :meth:`environment`).
        kinds : tuple of str
            Which statements: ``"prior"`` (priors of parameters and of non-GP latent variables),
            ``"gp"`` (centred GP priors) and ``"likelihood"`` (built-in and external likelihoods,
            marginalised ones included).
        targets : collection of str, optional
            Only statements whose target is one of these variables.
        """
        types = {"prior": ir.PriorStatement, "gp": ir.GPStatement,
                 "likelihood": (ir.LikelihoodStatement, ir.ExternalLikelihood)}
        wanted = tuple(t for k in kinds for t in (types[k] if isinstance(types[k], tuple) else (types[k],)))
        total = jnp.zeros(())
        for statement, loops in self.model.walk():
            if isinstance(statement, wanted) and (targets is None or statement.target.name in targets):
                total = total + self._over_loops(statement, loops, env)
        return total

    def statement_log_density(self, statement, env: dict, bound: dict) -> jax.Array:
        """The log density of one statement with its loop variables bound (``{"i": 3}``): one term of a loop."""
        return self._statement_logpdf(statement, {**env, **bound})

    def _over_loops(self, statement, loops, env, bound=None):
        bound = dict(bound or {})
        if not loops:
            return self._statement_logpdf(statement, {**env, **bound})
        loop, rest = loops[0], loops[1:]
        start = int(self.evaluate(loop.start, {**env, **bound}))
        stop = int(self.evaluate(loop.stop, {**env, **bound}))
        total = jnp.zeros(())
        for value in range(start, stop + 1):
            total = total + self._over_loops(statement, rest, env, {**bound, loop.variable: value})
        return total

    def _statement_logpdf(self, statement, env):
        if isinstance(statement, ir.PriorStatement):
            x = self._target_value(statement.target, env)
            args = [self.evaluate(v, env) for _, v in statement.distribution.args]
            return densities.prior_log_density(statement.distribution.name, x, args)
        if isinstance(statement, ir.LikelihoodStatement):
            node = self._marginalised_node(statement)
            if node is not None:
                return self._marginal_loglik(node, statement, env)
            process = next((n for n in self.process_nodes if n.likelihood is statement), None)
            if process is not None:
                return self._student_t_process_loglik(process, statement, env)
            likelihood = LIKELIHOODS[statement.distribution.name]
            y = self._target_value(statement.target, env)
            args = [self.evaluate(v, env) for _, v in statement.distribution.args]
            mask = self.observed.get(statement.target.name)
            if mask is None:
                return jnp.sum(likelihood.log_density(y, *args))
            terms = likelihood.log_density(np.where(mask, y, likelihood.placeholder), *args)
            return jnp.sum(jnp.where(mask, terms, 0.0))
        if isinstance(statement, ir.GPStatement):
            if self.parameterisation == "centred" and not is_weight_space_hsgp(statement):
                node = self._node(statement)
                if not node.marginalised and not _state_space_sampled(node):
                    return self._centred_gp_logpdf(statement, env)
            return jnp.zeros(())
        if isinstance(statement, ir.StudentTProcessStatement):
            return jnp.zeros(())  # integrated out: its likelihood carries the marginal
        if isinstance(statement, ir.ExternalLikelihood):
            function = self._external(statement)
            y = self._target_value(statement.target, env)
            return jnp.asarray(function(y, *[self.evaluate(a, env) for a in statement.args]))
        raise TypeError(statement)  # an IR statement type this lowering does not know is a bug

    def _node(self, statement: ir.GPStatement) -> GPNode:
        return next(n for n in self.gp_nodes if n.statement is statement)

    def _marginalised_node(self, likelihood) -> GPNode | None:
        return next((n for n in self.gp_nodes if n.marginalised and n.likelihood is likelihood), None)

    def _target_value(self, target: ir.Target, env):
        value = env[target.name]
        return self._apply_indices(value, target.indices, env) if target.indices else value

    # ---- GP pieces ---------------------------------------------------------------------------
    def gp_inputs(self, statement: ir.GPStatement, env) -> jax.Array:
        """The GP's points as a ``(n_points, input_dim)`` array (tuple inputs concatenated)."""
        inputs = statement.inputs
        index_shape = tuple(self._dim(d) for d in inputs.index_shape)
        columns = []
        for component in inputs.components:
            value = jnp.asarray(self.evaluate(component, env), dtype=float)
            if component.type.container == "vector" or is_label_array(component.type):
                value = value[..., None]
            extra = len(index_shape) - (value.ndim - 1)
            value = jnp.reshape(value, value.shape[:-1] + (1,) * extra + value.shape[-1:])
            value = jnp.broadcast_to(value, index_shape + value.shape[-1:])
            columns.append(value)
        points = jnp.concatenate(columns, axis=-1)
        return jnp.reshape(points, (-1, points.shape[-1]))

    def gp_input_offsets(self, statement: ir.GPStatement) -> np.ndarray:
        """Where each input component's columns start in :meth:`gp_inputs` (and, last, the total width)."""
        return np.cumsum([0] + [self._dim(d) for d in statement.inputs.dims])

    def gp_kernel(self, statement: ir.GPStatement, env) -> Kernel:
        """The GP's kernel with hyperparameters evaluated in ``env``; of an HSGP over latent inputs, its feature
        kernel on the box from the latent inputs' prior (:mod:`gpdsl.ir.latent_hsgp`)."""
        kernel = self._kernel(statement.kernel, env, self.gp_input_offsets(statement))
        if is_latent_hsgp(statement):
            centre, half_widths = latent_box(statement, self.model.priors().get(latent_inputs(statement)))
            return HSGPFeatureKernel(kernel, centre, half_widths, basis_sizes(statement))
        return kernel

    def gp_covariance(self, statement: ir.GPStatement, env) -> jax.Array:
        """``K(X, X) + GP_JITTER I`` for the GP's points."""
        points = self.gp_inputs(statement, env)
        K = self.gp_kernel(statement, env)(points)
        return K + GP_JITTER * jnp.eye(K.shape[0])

    def _kernel(self, kernel: ir.Kernel, env, offsets) -> Kernel:
        if isinstance(kernel, ir.KernelSum):
            return self._kernel(kernel.left, env, offsets) + self._kernel(kernel.right, env, offsets)
        if isinstance(kernel, ir.KernelProduct):
            return self._kernel(kernel.left, env, offsets) * self._kernel(kernel.right, env, offsets)
        if isinstance(kernel, ir.KernelScale):
            return self.evaluate(kernel.scale, env) * self._kernel(kernel.kernel, env, offsets)
        params = {name: self.evaluate(value, env) for name, value in kernel.params}
        if isinstance(kernel, ir.KernelCombination):
            params.update({name: self._kernel(sub, env, offsets) for name, sub in kernel.kernels})
        active = kernel.active_columns(offsets)
        if kernel.columns is not None and len(active) < kernel.columns[1] - kernel.columns[0]:
            width = int(offsets[kernel.component + 1] - offsets[kernel.component])
            raise DataError(f"{kernel.name} selects columns {kernel.columns[0] + 1}:{kernel.columns[1]} of an "
                            f"input with {width} column(s)", kernel.span)
        return build_kernel(kernel.name, active_dims=None if active is None else tuple(active), **params)

    def _whitened_to_latent(self, node: GPNode, raw, env, out):
        """The latent values of ``node`` from whitened ones; an indexed target (``W[q] ~ gp(...)``, in a loop
        or not) fills its elements of ``out``, one GP per index."""
        statement = node.statement
        if not statement.target.indices:
            return self._whiten_one(statement, raw, env)

        def fill(loops, bound, out):
            if not loops:
                scope = {**env, **bound}
                idx = tuple(int(self.evaluate(i, scope)) - 1 for i in statement.target.indices)
                return out.at[idx].set(self._whiten_one(statement, raw[idx], scope))
            loop = loops[0]
            for value in range(int(self.evaluate(loop.start, env)), int(self.evaluate(loop.stop, env)) + 1):
                out = fill(loops[1:], {**bound, loop.variable: value}, out)
            return out

        return fill(node.loops, {}, out)

    def _whiten_one(self, statement: ir.GPStatement, raw, env):
        L = cholesky(self.gp_covariance(statement, env))
        n = L.shape[0]
        flat = jnp.reshape(raw, (n, -1))
        return jnp.reshape(L @ flat, raw.shape) + self.gp_mean(statement, env)

    def hsgp_basis(self, statement: ir.GPStatement) -> HSGPBasis:
        """The basis of an HSGP statement on its training inputs (computed once)."""
        name = statement.target.name
        if name not in self._hsgp_bases:
            with jax.ensure_compile_time_eval():  # data alone: concrete even when first asked for inside a trace
                self._hsgp_bases[name] = hsgp_basis(statement, np.asarray(self.gp_inputs(statement, self.data)),
                                                    self.data)
        return self._hsgp_bases[name]

    def hsgp_latent(self, statement: ir.GPStatement, weights, env):
        """An HSGP latent's values from its basis weights: ``PHI (sqrt(S(omega)) .* z)`` plus its mean."""
        basis = self.hsgp_basis(statement)
        kernel = self.gp_kernel(statement, env)
        return hsgp_values(kernel, basis, basis.phi, weights) + self.gp_mean(statement, env)

    def series_points(self, statement: ir.GPStatement, points):
        """A state-space GP's points (shape ``(N, input_dim)``) as the Kalman code takes them
        (:func:`~gpdsl.kernels.kalman.series_columns`): the times, shape ``(N,)``, or the times and the group
        labels, shape ``(N, 2)``, for ``k(t) * same(g)``."""
        layout = series_layout(statement)
        width = len(statement.inputs.components)
        if points.ndim != 2 or points.shape[1] != width:
            raise DataError(f"points of the state-space GP '{statement.target.name}' need shape (M, {width}): "
                            + ("a time and a group label each" if width == 2 else "one time each")
                            + f"; got {tuple(points.shape)}")
        if layout.group is None:
            return points[:, layout.time]
        return points[:, jnp.asarray([layout.time, layout.group])]

    def state_space_kernel(self, statement: ir.GPStatement, env) -> Kernel:
        """The kernel over the time of a state-space GP in ``env``: :meth:`gp_kernel` less a ``same(g)`` factor,
        whose groups :meth:`series_points` carries."""
        return self._kernel(series_layout(statement).kernel, env, self.gp_input_offsets(statement))

    def time_grid(self, statement: ir.GPStatement) -> TimeGrid:
        """The sorted times of a state-space statement's training inputs (computed once)."""
        name = statement.target.name
        if name not in self._time_grids:
            with jax.ensure_compile_time_eval():  # data alone: concrete even when first asked for inside a trace
                points = np.asarray(self.gp_inputs(statement, self.data))
                self._time_grids[name] = time_grid(self.series_points(statement, points))
        return self._time_grids[name]

    def state_space_latent(self, statement: ir.GPStatement, innovations, env):
        """A sampled state-space latent's values from its innovations (:mod:`gpdsl.backends.jax.state_space`) plus
        its mean."""
        kernel = self.state_space_kernel(statement, env)
        order = int(statement.approximation.value("order"))
        return latent_from_innovations(kernel, self.time_grid(statement), innovations, order) + \
            self.gp_mean(statement, env)

    def gp_mean(self, statement: ir.GPStatement, env):
        """The GP's mean in ``env``: 0 without ``mean =``, else a scalar or a vector of its points."""
        return jnp.zeros(()) if statement.mean is None else jnp.asarray(self.evaluate(statement.mean, env), dtype=float)

    def _centred_gp_logpdf(self, statement: ir.GPStatement, env):
        value = self._target_value(statement.target, env) - self.gp_mean(statement, env)
        L = cholesky(self.gp_covariance(statement, env))
        flat = jnp.reshape(value, (L.shape[0], -1))
        return _mvn_logpdf_columns(flat, L)

    def _marginal_loglik(self, node: GPNode, likelihood: ir.LikelihoodStatement, env):
        y = np.asarray(self._target_value(likelihood.target, env), dtype=float)
        sigma = self.evaluate(likelihood.distribution.arg("sigma"), env)
        mask = self.observed.get(likelihood.target.name)
        y = y if mask is None else np.where(mask, y, 0.0)
        if mask is not None and mask.ndim != 1:
            raise MethodError(f"'{likelihood.target.name}' has missing values; the exact marginal likelihood "
                              "of a matrix with missing entries is computed by the variational engine, not here")
        residual = y - self.gp_mean(node.statement, env)
        if node.offset is not None:
            residual = residual - self.evaluate(node.offset, env)
        if node.statement.approximated_by(STATE_SPACE):
            return self._state_space_loglik(node, jnp.broadcast_to(residual, y.shape), sigma, mask, env)
        if mask is None:
            K = self.gp_covariance(node.statement, env)
        else:
            rows = np.flatnonzero(mask)
            points = self.gp_inputs(node.statement, env)[rows]
            K = self.gp_kernel(node.statement, env)(points) + GP_JITTER * jnp.eye(rows.size)
            residual = jnp.broadcast_to(residual, y.shape)[rows]
        n = K.shape[0]
        L = cholesky(K + sigma ** 2 * jnp.eye(n))
        return _mvn_logpdf_columns(jnp.reshape(residual, (n, -1)), L)

    def _state_space_loglik(self, node: GPNode, residual, sigma, mask, env):
        """``log N(residual | 0, K + (sigma^2 + GP_JITTER) I)`` over the observed rows by the Kalman filter, ``O(N)``."""
        if mask is not None:
            residual = jnp.where(mask, residual, jnp.nan)
        kernel = self.state_space_kernel(node.statement, env)
        return kalman.log_marginal_likelihood(kernel, self.time_grid(node.statement), residual,
                                              jnp.square(sigma) + GP_JITTER,
                                              periodic_order=node.statement.approximation.value("order"))

    def _student_t_process_loglik(self, node: GPNode, likelihood: ir.LikelihoodStatement, env):
        from gpdsl.backends.jax.student_t_process import student_t_process_log_marginal

        y = np.asarray(self._target_value(likelihood.target, env), dtype=float)
        if np.isnan(y).any():
            raise MethodError(f"'{likelihood.target.name}' has missing values; the Student-t process marginal "
                              "needs every observation", likelihood.span)
        sigma = self.evaluate(likelihood.distribution.arg("sigma"), env)
        K = self.gp_covariance(node.statement, env)
        L = cholesky(K + sigma ** 2 * jnp.eye(K.shape[0]))
        return student_t_process_log_marginal(jnp.asarray(y), L, self.evaluate(node.statement.dof, env))

    # ---- expressions -------------------------------------------------------------------------
    def evaluate(self, expr, env):
        """Value of an IR expression in ``env`` (names to arrays; loop variables to ints)."""
        if isinstance(expr, ir.Constant):
            return expr.value
        if isinstance(expr, ir.Ref):
            return env[expr.name]
        if isinstance(expr, ir.Index):
            return self._apply_indices(self.evaluate(expr.base, env), expr.indices, env)
        if isinstance(expr, ir.Binary):
            left, right = self.evaluate(expr.left, env), self.evaluate(expr.right, env)
            return _BINARY[expr.op](left, right)
        if isinstance(expr, ir.Negate):
            return -self.evaluate(expr.operand, env)
        if isinstance(expr, ir.Apply):
            return _FUNCTIONS[expr.function](self.evaluate(expr.args[0], env))
        if isinstance(expr, ir.Reduction):
            return _REDUCTIONS[expr.function](*(jnp.asarray(self.evaluate(a, env), dtype=float) for a in expr.args))
        if isinstance(expr, ir.MatrixProduct):
            return jnp.matmul(jnp.asarray(self.evaluate(expr.left, env), dtype=float),
                              jnp.asarray(self.evaluate(expr.right, env), dtype=float))
        if isinstance(expr, ir.VectorLiteral):
            return jnp.stack([jnp.asarray(self.evaluate(i, env), dtype=float) for i in expr.items])
        if isinstance(expr, ir.Project):
            weights = jnp.asarray(self.evaluate(expr.weights, env))
            inputs = jnp.asarray(self.evaluate(expr.inputs, env), dtype=float)
            return jnp.einsum("qnd,nd->nq", weights, inputs)
        raise TypeError(expr)  # an IR expression type this lowering does not know is a bug

    def _apply_indices(self, value, indices, env):
        """``value[indices]`` (1-based); integer indices come from data, loops and constants, so they are
        concrete and data stay numpy arrays: a loop body ``u[group[i]]`` needs no traced value."""
        key = []
        for axis, index in enumerate(indices):
            if isinstance(index, ir.Slice):
                start = int(self.evaluate(index.start, env))
                stop = int(self.evaluate(index.stop, env))
                key.append(slice(start - 1, stop))
            else:
                key.append(_zero_based(self.evaluate(index, env), np.shape(value)[axis], index))
        if isinstance(value, np.ndarray):
            return value[tuple(key)]
        return jnp.asarray(value)[tuple(key)]

    def _dim(self, d) -> int:
        return d if isinstance(d, int) else int(self.sizes[d])

    def _external(self, statement: ir.ExternalLikelihood) -> Callable:
        from gpdsl import externals

        if not self.allow_external:
            raise externals.refused(statement.function, statement.span)
        if statement.function not in self._externals:
            try:
                self._externals[statement.function] = externals.load(statement.function)
            except MethodError as error:
                raise MethodError(error.message, statement.span, hint=error.hint) from None
        return self._externals[statement.function]


def _state_space_sampled(node: GPNode) -> bool:
    """A state-space latent GP that is sampled (through its innovations), not integrated out."""
    return node.statement.approximated_by(STATE_SPACE) and not node.marginalised


def innovation_count(statement: ir.GPStatement, sizes: dict) -> int:
    """The number of innovations of a sampled state-space latent: its points times its state's size."""
    points = statement.target.type.concrete_shape(sizes)[0]
    order = int(statement.approximation.value("order"))
    return int(points) * state_dimension(series_layout(statement).kernel, order)


def constrain_blocks(flat, blocks: list[Block]) -> tuple[dict, jax.Array]:
    """Constrained values by name of a flat unconstrained vector laid out as ``blocks`` (in order,
    ignoring their ``start``), and the summed log-Jacobian."""
    values, log_jac, start = {}, jnp.zeros(()), 0
    for block in blocks:
        u = jnp.reshape(flat[start:start + block.size], block.free_shape)
        values[block.name], lj = block.constrain(u)
        log_jac = log_jac + lj
        start += block.size
    return values, log_jac


def unconstrain_blocks(values: dict, blocks: list[Block]) -> jax.Array:
    """Inverse of :func:`constrain_blocks`: the flat unconstrained vector of values by name."""
    if not blocks:
        return jnp.zeros((0,))
    return jnp.concatenate([jnp.ravel(b.unconstrain(jnp.asarray(values[b.name], dtype=float))) for b in blocks])


def _zero_based(index, length: int, expr: ir.Expr):
    """A concrete 1-based index (an int or an int array) as a 0-based one, checked against ``length``."""
    try:
        values = np.asarray(index, dtype=float)
    except (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError):
        raise MethodError("an index must be known before the run (data, a loop variable or a constant)",
                          expr.span) from None
    outside = (values < 1) | (values > length)
    if outside.any():
        where = np.argwhere(outside)[0]
        entry = f"[{', '.join(str(i + 1) for i in where)}]" if values.ndim else ""
        raise DataError(f"index {_describe(expr)}{entry} = {int(values[tuple(where)])} is outside 1..{length}",
                        expr.span)
    zero = values.astype(np.int64) - 1
    return int(zero) if zero.ndim == 0 else zero


def _describe(expr: ir.Expr) -> str:
    if isinstance(expr, ir.Ref):
        return expr.name
    if isinstance(expr, ir.Index) and isinstance(expr.base, ir.Ref):
        return expr.base.name + "[...]"
    return "value"


def _mvn_logpdf_columns(Y, L):
    """Sum over columns of ``log N(Y[:, j]; 0, L L^T)``."""
    n, columns = Y.shape
    alpha = solve_triangular(L, Y, lower=True)
    return (-0.5 * jnp.sum(alpha ** 2) - columns * jnp.sum(jnp.log(jnp.diag(L)))
            - 0.5 * n * columns * jnp.log(2 * jnp.pi))


def _ieee(operation, fallback):
    """``operation``, or on plain Python numbers that it cannot take (``0 / 0``, ``10.0 ^ 400``), ``fallback``:
    infinities and NaN as in float64 arrays, never an exception."""
    def apply(*arguments):
        try:
            return operation(*arguments)
        except (ZeroDivisionError, OverflowError):
            return fallback(*(jnp.asarray(a, jnp.float64) for a in arguments))

    return apply


_BINARY = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "/": _ieee(lambda a, b: a / b, jnp.true_divide), "^": _ieee(lambda a, b: a ** b, jnp.power),
}
_REDUCTIONS = {"sum": jnp.sum, "mean": jnp.mean, "dot_product": jnp.dot}
_FUNCTIONS = {
    "sqrt": jnp.sqrt, "exp": jnp.exp, "log": jnp.log, "inv_sqrt": jax.lax.rsqrt,
    "inv": _ieee(lambda x: 1.0 / x, lambda x: 1.0 / x),
    "square": jnp.square, "softplus": jax.nn.softplus, "inv_logit": jax.nn.sigmoid,
    "log1p_exp": jax.nn.softplus, "abs": jnp.abs, "Phi": jax.scipy.stats.norm.cdf,
}


def lower(model: ir.Model, data: dict, parameterisation: str = "whitened",
          allow_external: bool = False, marginalise: bool = True, sampled=()) -> JaxModel:
    """Lower a checked model with validated data to JAX functions.

    Parameters
    ----------
    model : ir.Model
        The checked model.
    data : dict
        Validated data (see :func:`gpdsl.data.io.load_data`), including the size symbols.
    parameterisation : {"whitened", "centred"}
        How sampled latent GP values are represented (see the module docstring).
    allow_external : bool
        Permit ``external(...)`` likelihoods, which import and run user Python code.
    marginalise : bool
        Integrate out latent GP values under a Gaussian likelihood (the default); False keeps them
        as sampled variables, for engines that sample them (ESS).
    sampled : collection of str
        Latent GPs kept as sampled variables even where they could be integrated out (the latent GP an
        ESS engine samples under ``normal(mu + f, s)``).

    Returns
    -------
    JaxModel
    """
    if parameterisation not in PARAMETERISATIONS:
        raise MethodError(f"unknown parameterisation '{parameterisation}'; use one of {PARAMETERISATIONS}")
    sizes = {name: int(data[name]) for name in model.sizes}
    nodes = gp_nodes(model)
    nodes = [replace(node, marginalised=False) if not marginalise or node.name in sampled else node
             for node in nodes]
    priors = model.priors()
    blocks: list[Block] = []
    start = 0

    def add(name, vartype, lower_bound, upper_bound, role):
        nonlocal start
        shape = vartype.concrete_shape(sizes)
        lo = None if lower_bound is None else np.asarray(lower_bound, dtype=float).reshape(-1)
        hi = None if upper_bound is None else np.asarray(upper_bound, dtype=float).reshape(-1)
        lo = None if lo is None else (lo[0] if lo.size == 1 else lo)
        hi = None if hi is None else (hi[0] if hi.size == 1 else hi)
        block = Block(name, shape, start, lo, hi, role, vartype.structure)
        blocks.append(block)
        start += block.size

    for name, var in model.parameters.items():
        lo, hi = parameter_bounds(model, name)
        add(name, var.type, lo, hi, "parameter")
    by_name = {n.name: n for n in nodes}
    for name, var in model.latents.items():
        node = by_name.get(name)
        if node is None:
            if name in priors:
                add(name, var.type, var.type.lower, var.type.upper, "latent")
            continue
        if is_weight_space_hsgp(node.statement):
            add(name + "_z", VarType("real", "vector", (basis_size(node.statement),)), None, None, "hsgp_weights")
            continue
        if _state_space_sampled(node):
            add(name + "_z", VarType("real", "vector", (innovation_count(node.statement, sizes),)), None, None,
                "state_space_innovations")
            continue
        if node.marginalised:
            continue
        if parameterisation == "whitened":
            add(name + "_raw", var.type, None, None, "latent_raw")
        else:
            add(name, var.type, None, None, "latent")
    clean = {k: (np.asarray(v, dtype=float) if not isinstance(v, (int, np.integer)) else int(v))
             for k, v in data.items()}
    for name in model.sizes:
        clean[name] = int(data[name])
    return JaxModel(model, clean, sizes, blocks, start, parameterisation, nodes, allow_external,
                    observed_masks(model, clean), process_nodes=student_t_process_nodes(model))
