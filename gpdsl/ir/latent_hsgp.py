"""An HSGP over latent inputs (``F ~ gp(X, k, approx = hsgp(m, c))`` with ``X`` latent): its box from ``X``'s prior.

Over data inputs the box of the Hilbert-space approximation is ``c`` times the half range of the inputs around
their centre. Latent inputs have no range before they are inferred, so the box comes from their prior
``X ~ normal(mu, sigma)`` (constant ``mu`` and ``sigma``): centre ``mu`` and half-width
``L = c * LATENT_PRIOR_SDS * sigma`` in every column, ``LATENT_PRIOR_SDS = 3`` prior standard deviations
(about 99.7% of the prior mass inside ``[mu - 3 sigma, mu + 3 sigma]``, the box ``c`` times wider). Such a GP is the
finite feature expansion of :class:`~gpdsl.kernels.hsgp_features.HSGPFeatureKernel` on that box: the engines
treat it as an exact GP with that kernel (``vem`` runs it with no basis weights; Stan's NUTS integrates ``F`` out
under a normal likelihood and samples the basis weights under any other).
"""

from __future__ import annotations

from gpdsl.ir import nodes as ir
from gpdsl.ir.approximations import HSGP

LATENT_PRIOR_SDS = 3.0
"""The box of an HSGP over latent inputs reaches ``c`` times this many prior standard deviations from the prior mean."""


def latent_inputs(statement: ir.GPStatement) -> str | None:
    """The latent variable a GP statement's inputs are, when they are one whole latent variable (``gp(X, ...)``)."""
    components = statement.inputs.components
    if len(components) == 1 and isinstance(components[0], ir.Ref) and components[0].role == "latent":
        return components[0].name
    return None


def is_latent_hsgp(statement) -> bool:
    """Whether ``statement`` is a GP in the Hilbert-space approximation over latent inputs (its kernel replaced by
    the feature kernel on the prior's box)."""
    return isinstance(statement, ir.GPStatement) and statement.approximated_by(HSGP) \
        and latent_inputs(statement) is not None


def is_weight_space_hsgp(statement) -> bool:
    """Whether ``statement`` is an HSGP over data inputs: a latent of basis weights ``z ~ N(0, I)``."""
    return isinstance(statement, ir.GPStatement) and statement.approximated_by(HSGP) \
        and latent_inputs(statement) is None


def prior_scale(prior: ir.PriorStatement | None) -> tuple[float, float] | str:
    """``(mu, sigma)`` of a prior ``X ~ normal(mu, sigma)`` with constant arguments, or why the prior gives no scale."""
    if prior is None:
        return "they have no prior of their own"
    if prior.target.indices:
        return "their prior is given element by element"
    if prior.distribution.name != "normal":
        return f"their prior is {prior.distribution.name}(...), not normal(mu, sigma)"
    values = dict(prior.distribution.args)
    if not all(isinstance(values.get(name), ir.Constant) for name in ("mu", "sigma")):
        return "the arguments of their normal prior are not constants"
    return float(values["mu"].value), float(values["sigma"].value)


def latent_box(statement: ir.GPStatement, prior: ir.PriorStatement) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The centre and half-widths of the box of an HSGP over latent inputs with the prior ``prior``, per column.

    Raises
    ------
    ValueError
        The prior gives no scale (the checker refuses such models first).
    """
    scale = prior_scale(prior)
    if isinstance(scale, str):
        raise ValueError(scale)
    mu, sigma = scale
    half_width = float(statement.approximation.value("c")) * LATENT_PRIOR_SDS * sigma
    dim = int(statement.inputs.dim)
    return (mu,) * dim, (half_width,) * dim


def basis_sizes(statement: ir.GPStatement) -> tuple[int, ...]:
    """``m`` per input column of an HSGP statement."""
    m = statement.approximation.value("m")
    return tuple(int(k) for k in m) if isinstance(m, tuple) else (int(m),) * int(statement.inputs.dim)


def latent_hsgp_refusal(model: ir.Model, facts=None, settings=None) -> str | None:
    """Why a GPLVM method other than ``vem`` does not run ``model``: it has an HSGP over latent inputs (a method's
    ``refuses`` hook in the registry), or None."""
    for statement, _ in model.walk():
        if is_latent_hsgp(statement):
            return (f"takes no HSGP over latent inputs ('{statement.target.name}' has approx = hsgp(...) over "
                    f"'{latent_inputs(statement)}'); vem fits it and nuts samples it")
    return None
