"""The view of a model that type-II maximum likelihood works on: GP regression with f integrated out.

``f ~ gp(X, k); y ~ normal(f, s)`` with scalar ``s``: the marginal likelihood ``N(y; 0, K + s^2 I)``
is exact, so the hyperparameters ``theta`` (one flat unconstrained vector) can be estimated by
maximising it, plus their log prior where they have one. With a GP mean and terms added to ``f``
(``f ~ gp(X, k, mean = mu); y ~ normal(b * z + f, s)``) it is ``N(y - m(theta); 0, K + s^2 I)``, ``m`` the
:meth:`GPRegression.location`, and the draw groups add ``m`` back.

Where ``y`` has missing (NaN) entries the view is the GP regression of the observed rows: :attr:`GPRegression.y`
and :meth:`GPRegression.inputs` hold those rows alone (the missing ones are integrated out exactly), and
:meth:`GPRegression.missing_inputs` the rows whose outcome the predictive imputes.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.backends.jax.lowering import Block, JaxModel
from gpdsl.inference.approximations import kronecker
from gpdsl.inference.families.grid import grid_factors, separable_grid
from gpdsl.inference.families.state_space_series import StateSpaceSeries
from gpdsl.inference.families.hyperparameters import HyperparameterBlocks, NormalObservations, lowered_with_blocks
from gpdsl.ir import nodes as ir
from gpdsl.ir.approximations import STATE_SPACE
from gpdsl.ir.families import GP_REGRESSION, LatentGPFacts, classify
from gpdsl.errors import MethodError
from gpdsl.ir.structure import GPNode, location_prediction_refusal
from gpdsl.kernels import Kernel, kalman
from gpdsl.numerics import GP_JITTER
from gpdsl.numerics.linalg import cholesky, solve_triangular


@dataclass
class GPRegression(HyperparameterBlocks, NormalObservations):
    """GP regression read from a checked model.

    Attributes
    ----------
    jax_model : JaxModel
        The model's lowering, with the GP integrated out.
    node : GPNode
        The GP.
    target : str
        The observed outputs ``y``.
    theta_blocks : list of Block
        The hyperparameters, in the order of the flat ``theta`` vector.
    use_grid : bool
        Compute the marginal likelihood by Kronecker algebra where the data form a grid (:attr:`grid`); False keeps
        the dense Cholesky factorisation.
    """

    jax_model: JaxModel
    node: GPNode
    target: str
    theta_blocks: list[Block]
    use_grid: bool = True

    @property
    def name(self) -> str:
        """The GP's name (``f``)."""
        return self.node.name

    @property
    def observed(self) -> np.ndarray:
        """Boolean mask of the observed outputs over every row, shape ``(N,)``."""
        values = np.asarray(self.jax_model.data[self.target], dtype=float).reshape(-1)
        return ~np.isnan(values)

    @property
    def complete(self) -> bool:
        """No output is missing."""
        return bool(self.observed.all())

    @property
    def y(self) -> np.ndarray:
        """Observed training outputs, shape ``(n,)`` (the missing ones left out)."""
        values = np.asarray(self.jax_model.data[self.target], dtype=float).reshape(-1)
        return values[self.observed]

    @property
    def observed_gp(self) -> GPNode:
        """The GP (observed through ``normal(f, s)``)."""
        return self.node

    def all_inputs(self, theta) -> jax.Array:
        """The inputs of every row, missing outputs included, shape ``(N, d)``."""
        return self.jax_model.gp_inputs(self.node.statement, self.environment(theta))

    def inputs(self, theta) -> jax.Array:
        """Training inputs of the observed outputs, shape ``(n, d)``."""
        points = self.all_inputs(theta)
        return points if self.complete else points[np.flatnonzero(self.observed)]

    def missing_inputs(self, theta) -> jax.Array:
        """Inputs of the rows whose output is missing, shape ``(N - n, d)``."""
        return self.all_inputs(theta)[np.flatnonzero(~self.observed)]

    @property
    def has_location(self) -> bool:
        """``y``'s location is more than a zero-mean ``f``: the GP has a mean (``gp(X, k, mean = m)``) or the
        likelihood adds terms to ``f`` (``normal(mu + beta * x + f, s)``)."""
        return self.node.has_location

    def gp_mean(self, theta) -> jax.Array:
        """The GP's mean at every row, shape ``(N,)`` (zeros without ``mean =``)."""
        value = self.jax_model.gp_mean(self.node.statement, self.environment(theta))
        return jnp.broadcast_to(value, (self.observed.size,))

    def location(self, theta) -> jax.Array:
        """The location of ``y`` less the GP's zero-mean part at every row, shape ``(N,)``: the GP's mean plus the
        terms the likelihood adds to ``f`` (zeros for ``f ~ gp(X, k); y ~ normal(f, s)``)."""
        if self.node.offset is None:
            return self.gp_mean(theta)
        offset = self.jax_model.evaluate(self.node.offset, self.environment(theta))
        return self.gp_mean(theta) + jnp.broadcast_to(jnp.asarray(offset, dtype=float), (self.observed.size,))

    def centred_y(self, theta) -> jax.Array:
        """The observed outputs less their :meth:`location`, shape ``(n,)``: a draw of ``N(0, K + s^2 I)``."""
        if not self.has_location:
            return jnp.asarray(self.y)
        return jnp.asarray(self.y) - self.location(theta)[np.flatnonzero(self.observed)]

    def require_location_at_new_inputs(self) -> None:
        """Refuse predictions where the GP's mean or the terms added to ``f`` read data that have no values at new
        inputs (:func:`~gpdsl.ir.structure.location_prediction_refusal`).

        Raises
        ------
        MethodError
        """
        refusal = location_prediction_refusal(self.jax_model.model, self.node)
        if refusal:
            raise MethodError(refusal, self.node.likelihood.span)

    def location_at(self, theta, X_new) -> tuple[jax.Array, jax.Array]:
        """The GP's mean at new inputs and the :meth:`location` of ``y`` there, each a scalar or shape ``(m,)``;
        callers refuse first what has no value there (:meth:`require_location_at_new_inputs`)."""
        env = self.environment(theta)
        mean = self.mean_in(env, X_new)
        if self.node.offset is None:
            return mean, mean
        return mean, mean + jnp.asarray(self.jax_model.evaluate(self.node.offset, env), dtype=float)

    def log_prior(self, theta) -> jax.Array:
        """Log prior density of ``theta`` on the unconstrained scale (Jacobian included): what a sampler of the
        hyperparameters adds to :meth:`log_marginal`."""
        return self.log_hyperprior(theta) + self.constrain(theta)[1]

    def kernel(self, theta) -> Kernel:
        """The GP's kernel at ``theta``."""
        return self.jax_model.gp_kernel(self.node.statement, self.environment(theta))

    @cached_property
    def grid(self) -> kronecker.GridLayout | None:
        """Where the rows sit on a full grid of the input columns, when ``K`` is a Kronecker product there; else None.

        That needs every output observed, no GP mean or terms added to ``f``, and what
        :func:`~gpdsl.inference.families.grid.separable_grid` asks of the inputs and the kernel.
        """
        if not (self.use_grid and self.complete and not self.has_location):
            return None
        statement = self.node.statement
        return separable_grid(self.jax_model, statement)

    def grid_factors(self, theta) -> list[jax.Array]:
        """``K_1, ..., K_D`` with ``K = K_1 ⊗ ... ⊗ K_D`` over :attr:`grid` (rows in grid order), without the jitter
        (:func:`~gpdsl.inference.families.grid.grid_factors`)."""
        points = self.jax_model.gp_inputs(self.node.statement, self.jax_model.data)
        return grid_factors(self.kernel(theta), points, self.grid)

    def log_marginal(self, theta) -> jax.Array:
        """``log N(y - m; 0, K + s^2 I)`` (``m`` the :meth:`location`), ``K`` with the lowering's jitter
        (traceable); by Kronecker algebra where the data form a grid (:attr:`grid`)."""
        if self.grid is not None:
            return kronecker.log_marginal_likelihood(self.grid_factors(theta), self.noise_variance(theta) + GP_JITTER,
                                                     kronecker.to_grid_order(self.y, self.grid))
        if self.complete:
            K = self.jax_model.gp_covariance(self.node.statement, self.environment(theta))
        else:
            points = self.inputs(theta)
            K = self.kernel(theta)(points) + GP_JITTER * jnp.eye(points.shape[0])
        L = cholesky(K + self.noise_variance(theta) * jnp.eye(K.shape[0]))
        alpha = solve_triangular(L, self.centred_y(theta), lower=True)
        return -0.5 * alpha @ alpha - jnp.sum(jnp.log(jnp.diag(L))) - 0.5 * K.shape[0] * jnp.log(2 * jnp.pi)


@dataclass
class StateSpaceRegression(StateSpaceSeries, GPRegression):
    """GP regression whose GP has the state-space form (``approx = state_space``): the variant of
    :class:`GPRegression` whose marginal likelihood is the Kalman filter's along the sorted times, ``O(N)``
    (:mod:`gpdsl.kernels.kalman`), with the kernel's periodic terms truncated after :attr:`order` harmonics; its
    predictions come from the smoother (:mod:`gpdsl.inference.predict.state_space`). Missing outputs are points
    without a site."""

    use_grid: bool = False

    @property
    def grid(self) -> None:
        """Never a grid: the state-space form needs one input column."""
        return None

    def outputs(self) -> jax.Array:
        """Every row's output, NaN where missing, shape ``(N,)`` (concrete for data; traced where the outputs are)."""
        with jax.ensure_compile_time_eval():
            return jnp.asarray(self.jax_model.data[self.target], dtype=float).reshape(-1)

    def centred_outputs(self, theta) -> jax.Array:
        """:meth:`outputs` less their :meth:`location`, NaN where missing, shape ``(N,)``."""
        return self.outputs() - self.location(theta) if self.has_location else self.outputs()

    def site_noise(self, theta) -> jax.Array:
        """``s^2 + GP_JITTER``: the noise of each site, the jitter as the dense marginal adds it to ``K``."""
        return self.noise_variance(theta) + GP_JITTER

    def log_marginal(self, theta) -> jax.Array:
        """``log N(y - m; 0, K + (s^2 + GP_JITTER) I)`` over the observed rows by the Kalman filter (traceable)."""
        return kalman.log_marginal_likelihood(self.kernel(theta), self.times, self.centred_outputs(theta),
                                              self.site_noise(theta), periodic_order=self.order)


def gp_regression_view(model: ir.Model, data: dict, facts: LatentGPFacts) -> GPRegression:
    """The :class:`GPRegression` of a model classified as GP regression (``facts``); its
    :class:`StateSpaceRegression` variant when the GP has ``approx = state_space``."""
    jax_model, blocks = lowered_with_blocks(model, data, marginalise=True)
    node = next(n for n in jax_model.gp_nodes if n.name == facts.name)
    view = StateSpaceRegression if node.statement.approximated_by(STATE_SPACE) else GPRegression
    return view(jax_model, node, facts.target, blocks)


def gp_regression(model: ir.Model, data: dict, method: str = "ml") -> GPRegression:
    """Build the :class:`GPRegression` view of a model, or refuse it with what ``method`` needs.

    Raises
    ------
    MethodError
        The model is not GP regression (see :mod:`gpdsl.ir.families`).
    """
    _, facts = classify(model).require((GP_REGRESSION,), method)
    return gp_regression_view(model, data, facts)
