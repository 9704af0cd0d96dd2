"""The view of a model that latent-GP engines work on: f ~ N(0, K(theta)), y | f, theta factorised.

A GP with a mean, ``f ~ gp(X, k, mean = m)``, is seen centred: the engines' ``f`` is the latent minus ``m(theta)``,
a zero-mean GP, and the view adds the mean back wherever the model reads the latent (:meth:`LatentGP.environment`,
:meth:`LatentGP.with_mean` for the draws it reports).

ESS, SA/AA/SURR, the Laplace and EP approximations and pseudo-marginal MCMC all need the same few
functions of the hyperparameters ``theta`` (on the unconstrained scale, one flat vector): the GP
covariance, the log prior with its Jacobian, and the log likelihood of the latent values. A
:class:`LatentGP` provides them from any checked model with one sampled latent GP vector.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from gpdsl.backends.jax.lowering import Block, JaxModel
from gpdsl.errors import MethodError
from gpdsl.inference.families.hyperparameters import (
    HyperparameterBlocks,
    lowered_with_blocks,
)
from gpdsl.ir import nodes as ir
from gpdsl.ir.approximations import STATE_SPACE
from gpdsl.ir.families import (
    FAMILIES,
    GP_REGRESSION,
    LATENT_GP,
    STATE_SPACE_LATENT_GP,
    LatentGPFacts,
    classify,
    require_priors,
)
from gpdsl.ir.structure import GPNode
from gpdsl.likelihoods import LIKELIHOODS


@dataclass
class LatentGP(HyperparameterBlocks):
    """A latent GP vector ``f`` of length ``n`` with hyperparameters ``theta``.

    Attributes
    ----------
    jax_model : JaxModel
        The centred lowering of the model.
    node : GPNode
        The latent GP node.
    theta_blocks : list of Block
        The hyperparameters' blocks, in the order of the flat ``theta`` vector.
    theta_dim : int
        Length of ``theta``.
    n : int
        Number of latent values.
    likelihood : str
        The built-in likelihood on ``f`` (``"bernoulli_probit"``, ...), or ``"external"``.
    y : numpy.ndarray
        The observations of that likelihood.
    others : tuple of GPNode
        Further latent GP vectors under the same likelihood (``g`` of ``normal(f, exp(g))``): ``f`` is then the
        concatenation of every latent vector, ``node``'s first, and ``K`` block-diagonal.
    """

    jax_model: JaxModel
    node: GPNode
    theta_blocks: list[Block]
    theta_dim: int
    n: int
    likelihood: str
    y: np.ndarray
    others: tuple[GPNode, ...] = ()

    @property
    def observed(self) -> np.ndarray:
        """Boolean mask of the observed entries of :attr:`y` (False where missing, NaN)."""
        return ~np.isnan(np.asarray(self.y, dtype=float))

    @property
    def nodes(self) -> tuple[GPNode, ...]:
        """Every latent GP vector in ``f``, ``node`` first."""
        return (self.node, *self.others)

    @property
    def blocks(self) -> list[slice]:
        """Where each latent GP vector of :attr:`nodes` sits in ``f``."""
        size = self.n // len(self.nodes)
        return [slice(i * size, (i + 1) * size) for i in range(len(self.nodes))]

    @property
    def columns(self) -> int:
        """Independent GP columns of each latent: ``K`` of a ``matrix[N, K]`` latent (``categorical_logit``),
        else 1. ``f`` holds such a matrix row by row, so its covariance is ``K(theta)`` kron ``I_K``."""
        declared = self.jax_model.model.latents[self.node.name].type
        if declared.container != "matrix" or declared.array_dims:
            return 1
        return declared.concrete_shape(self.jax_model.sizes)[1]

    def split(self, f) -> dict:
        """The latent GP values of ``f`` (last axis) by name, each in its declared shape."""
        return {node.name: jnp.reshape(f[..., block], f.shape[:-1] + self.jax_model.block(node.name).shape)
                if isinstance(f, jax.Array) else
                np.reshape(f[..., block], np.shape(f)[:-1] + self.jax_model.block(node.name).shape)
                for node, block in zip(self.nodes, self.blocks)}

    def stack(self, values: dict):
        """``f`` from the latent GP values by name (the inverse of :meth:`split`)."""
        flat = []
        for node in self.nodes:
            value = np.asarray(values[node.name])
            shape = self.jax_model.block(node.name).shape
            flat.append(np.reshape(value, value.shape[:value.ndim - len(shape)] + (-1,)))
        return np.concatenate(flat, axis=-1)

    def require_one_latent(self, method: str) -> None:
        """Refuse a model with several latent GP vectors for ``method`` (the Laplace and EP approximations,
        predictions at new inputs).

        Raises
        ------
        MethodError
        """
        if self.others:
            names = ", ".join(node.name for node in self.nodes)
            raise MethodError(f"{method} needs one latent GP vector; this model samples {names}",
                              self.node.likelihood.span, "use --method gibbs, which samples each in turn")

    @property
    def name(self) -> str:
        """The latent variable's name."""
        return self.node.name

    def environment(self, theta, f=None) -> dict:
        """Data, constrained hyperparameters and (if given) the latent values by name, ``f`` (centred) plus the
        GP's mean."""
        values = self.theta_values(theta)
        env = {**self.jax_model.data, **values}
        if f is not None:
            for name, value in self.split(f + self.mean(theta, env)).items():
                env[name] = jnp.reshape(value, self.jax_model.block(name).shape)
        return env

    @property
    def has_mean(self) -> bool:
        """Some latent GP has a ``mean =``."""
        return any(node.statement.mean is not None for node in self.nodes)

    def mean(self, theta, env=None) -> jax.Array:
        """The GP means at ``theta``, shape ``(n,)`` (zeros without ``mean =``)."""
        env = self.environment(theta) if env is None else env
        size = self.n // len(self.nodes)
        means = [jnp.reshape(self.jax_model.gp_mean(node.statement, env), (-1, 1)) for node in self.nodes]
        return jnp.concatenate([jnp.reshape(jnp.broadcast_to(mean, (size // self.columns, self.columns)), (size,))
                                for mean in means])

    def with_mean(self, theta_draws, f_draws) -> np.ndarray:
        """Reported latent values from the engines' centred draws, ``(chain, draw, n)``."""
        from gpdsl.inference.draw_map import over_draws

        if not self.has_mean:
            return f_draws
        return np.asarray(f_draws) + over_draws(self.mean, theta_draws)

    def without_mean(self, theta_draws, f_draws) -> np.ndarray:
        """The engines' centred latent values from reported draws, ``(chain, draw, n)``."""
        from gpdsl.inference.draw_map import over_draws

        if not self.has_mean:
            return f_draws
        return np.asarray(f_draws) - over_draws(self.mean, theta_draws)

    def covariance(self, theta) -> jax.Array:
        """``K(theta) + jitter I``, shape ``(n, n)``; block-diagonal over several latent GP vectors; ``K(theta)``
        kron ``I_K`` for a ``matrix[N, K]`` latent of independent columns held row by row."""
        env = self.environment(theta)
        covariances = [self.jax_model.gp_covariance(node.statement, env) for node in self.nodes]
        if self.columns > 1:
            covariances = [jnp.kron(block, jnp.eye(self.columns)) for block in covariances]
        if len(covariances) == 1:
            return covariances[0]
        size = covariances[0].shape[0]
        K = jnp.zeros((self.n, self.n))
        for i, block in enumerate(covariances):
            K = K.at[i * size:(i + 1) * size, i * size:(i + 1) * size].set(block)
        return K

    def prior_factor(self, theta) -> jax.Array:
        """The factor ``L`` of the sampled vector's prior covariance, ``K = L L^T``: the Cholesky factor of
        :meth:`covariance` (a view with a diagonal prior gives the diagonal alone,
        :mod:`gpdsl.inference.mcmc.prior_factor`)."""
        from gpdsl.numerics.linalg import cholesky

        return cholesky(self.covariance(theta))

    def log_prior(self, theta) -> jax.Array:
        """Log prior density of ``theta`` on the unconstrained scale (Jacobian included)."""
        values, log_jac = self.constrain(theta)
        return self.jax_model.log_terms({**self.jax_model.data, **values}, ("prior",)) + log_jac

    def likelihood_arguments(self, theta) -> tuple:
        """Values at ``theta`` of the likelihood's parameters other than the latent one, in positional order
        (what :func:`~gpdsl.inference.approximations.laplace.laplace` passes to its ``derivatives``); empty for
        an external likelihood."""
        likelihood = LIKELIHOODS.get(self.likelihood)
        if likelihood is None:
            return ()
        given = dict(self.node.likelihood.distribution.args)
        env = self.environment(theta)
        return tuple(jnp.asarray(self.jax_model.evaluate(given[name], env), dtype=float)
                     for name in likelihood.other_params)

    def location_offset(self, theta) -> jax.Array:
        """What the likelihood adds to ``f`` in its latent argument, shape ``(n,)``: ``log_exposure + mu`` of
        ``poisson_log(log_exposure + mu + f)``, zeros for ``poisson_log(f)`` (what the Laplace and EP
        approximations shift ``f`` by).

        Raises
        ------
        MethodError
            The latent argument is not ``f`` plus terms free of it (e.g. ``mu - f`` or ``exp(f)``).
        """
        self.require_one_latent("the Laplace and EP approximations")
        self.require_offset_form()
        shape = self.jax_model.block(self.name).shape
        at_zero = jnp.asarray(self.latent_argument_at_zero(theta), dtype=float)
        return jnp.reshape(jnp.broadcast_to(at_zero, shape), (self.n,)) + self.mean(theta)

    def require_offset_form(self) -> None:
        """Refuse a likelihood whose latent argument is not ``f`` plus terms free of it (what the Laplace and EP
        approximations need).

        Raises
        ------
        MethodError
        """
        likelihood = LIKELIHOODS.get(self.likelihood)
        if likelihood is not None and not self.node.shifted:
            argument = dict(self.node.likelihood.distribution.args)[likelihood.latent_param]
            raise MethodError(f"the Laplace and EP approximations need the latent argument of {self.likelihood} to "
                              f"be '{self.name}' plus terms free of it (an offset)", argument.span,
                              "write the location as offset + f, or use --method gibbs")

    @property
    def white(self) -> bool:
        """The sampled vector's prior is ``N(0, I)`` at every ``theta`` (a whitened view), so the engines need no
        factor of :meth:`covariance` (its :meth:`prior_factor` is a vector of ones)."""
        return False

    @property
    def mapped(self) -> bool:
        """The likelihood reads the sampled vector through :meth:`likelihood_map` (not the identity)."""
        return False

    def likelihood_map(self, theta) -> jax.Array | None:
        """The linear map from the sampled vector to the likelihood's latent argument less :meth:`location_offset`,
        or None where it is the identity (the sampled vector is ``f``)."""
        return None

    def likelihood_operator(self, theta):
        """:meth:`likelihood_map` as the approximations over mapped vectors take it
        (:mod:`~gpdsl.inference.approximations.weight_space`): the matrix, or a map that computes its products
        faster."""
        return self.likelihood_map(theta)

    def image(self, theta):
        """The likelihood as a function of a linear image ``M z`` of the sampled vector, ``(apply, log_likelihood)``,
        where applying ``M`` costs more than ``O(n)`` (:func:`~gpdsl.inference.mcmc.ess.mapped_ess_step`); None where
        the likelihood reads the sampled vector itself."""
        return None

    def centring_scale(self, theta) -> jax.Array | None:
        """The diagonal ``D_theta`` of a view whose sampled vector ``z`` is whitened coordinates of centred ones, ``x =
        D_theta z ~ N(0, D_theta^2)``: the sufficient augmentation (``sa``) keeps ``x`` fixed as ``theta`` moves. None
        where the sampled vector is ``f`` itself (``sa`` keeps it) or has no such diagonal form."""
        return None

    def latent_argument_at_zero(self, theta):
        """The likelihood's latent argument with ``f`` replaced by a scalar 0: the offset (``mu`` of ``mu + f``,
        0 of ``f``), an array when it has one value per training observation (``log_exposure + f``), which it
        has not at new inputs. Zero for an external likelihood."""
        likelihood = LIKELIHOODS.get(self.likelihood)
        if likelihood is None:
            return jnp.zeros(())
        argument = dict(self.node.likelihood.distribution.args)[likelihood.latent_param]
        return self.jax_model.evaluate(argument, {**self.environment(theta), self.name: jnp.zeros(())})

    def log_likelihood(self, f, theta) -> jax.Array:
        """``log p(y | f, theta)``."""
        return self.jax_model.log_terms(self.environment(theta, f), ("likelihood",))


def latent_gp(model: ir.Model, data: dict, method: str = "this method", allow_external: bool = False,
              marginalise: bool = True) -> LatentGP:
    """Build the :class:`LatentGP` view of a model, or refuse it with what the method needs.

    Parameters
    ----------
    model : ir.Model
        The checked model.
    data : dict
        Validated data.
    method : str
        The method's name, for messages.
    allow_external : bool
        Permit an external likelihood.
    marginalise : bool
        False keeps latent GP values under a Gaussian likelihood as the sampled vector ``f`` (GP
        regression seen as a latent-GP model).

    Raises
    ------
    MethodError
        The model is not of the latent-GP family (see :mod:`gpdsl.ir.families`), or a parameter has
        no prior.
    """
    accepted = (LATENT_GP,) if marginalise else (LATENT_GP, GP_REGRESSION)
    _, facts = classify(model).require(accepted, method)
    require_priors(model, method)
    return latent_gp_view(model, data, facts, allow_external=allow_external)


def latent_gp_view(model: ir.Model, data: dict, facts: LatentGPFacts, allow_external: bool = False) -> LatentGP:
    """The :class:`LatentGP` of a model already classified as a latent-GP model (``facts``); for a latent state-space
    GP, its family's view over the innovations (:mod:`gpdsl.inference.families.state_space_latent`)."""
    if facts.node.statement.approximated_by(STATE_SPACE):
        return FAMILIES[STATE_SPACE_LATENT_GP].view(model, data, facts, allow_external=allow_external)
    jax_model, theta_blocks = lowered_with_blocks(model, data, facts.marginalise, allow_external,
                                                  sampled={node.name for node in facts.nodes})
    node, *others = (next(n for n in jax_model.gp_nodes if n.name == fact.name) for fact in facts.nodes)
    y = np.asarray(jax_model.data[facts.target])
    n = sum(int(np.prod(jax_model.block(n.name).shape)) for n in facts.nodes)
    return LatentGP(jax_model, node, theta_blocks, sum(b.size for b in theta_blocks), n, facts.likelihood, y,
                    tuple(others))
