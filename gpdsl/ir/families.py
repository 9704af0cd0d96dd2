"""Model families: a checked model is classified once, and each engine receives its family's facts.

A method declares the families it fits (:mod:`gpdsl.registry`); :func:`classify` says which families a
model belongs to, with the facts their engines need, and for every other family the one-line reason
why not. Engines never re-derive from the IR what they can run.

Families
--------
``latent_gp``
    One sampled latent GP vector ``f ~ gp(X, k)`` and a likelihood acting on its elements one by one
    (GP classification, a Poisson process, ...): ESS, Laplace, EP, pseudo-marginal MCMC. Several latent GP
    vectors of one length under one likelihood (heteroscedastic noise, ``y ~ normal(f, exp(g))``) are one
    latent GP with a block-diagonal covariance to ESS (``latent_gps``); the Laplace and EP approximations
    need one.
``latent_gps``
    Several latent GP vectors of one length under one likelihood acting on each element by element.
``gp_regression``
    One GP integrated out exactly under a ``normal`` likelihood with scalar noise; samplers of the
    latent values (Gibbs) may keep it as a latent-GP model with a Gaussian likelihood.
``bayesian_gplvm``
    ``X ~ normal(0, 1); F ~ gp(X, k); Y ~ normal(F, s)``: variational EM with Psi statistics.
``gp_prior_gplvm``
    Latent inputs that are themselves a GP of observed inputs or time (dynamical and supervised
    GPLVMs): ``X ~ gp(t, k_x); F ~ gp(X, k_f); Y ~ normal(F, s)``.
``deep_mahalanobis_gp``
    A GP over ``project(W, X)`` whose projection fields ``W[q]`` are GPs of the observed inputs (de Souza 2020).
``deep_gp_chain``
    A chain of GPs, each over the previous one's values, ending in one output vector (Salimbeni & Deisenroth
    2017). A model whose GP inputs read another GP but that is neither (a dynamical GPLVM) is of no deep family.
``sequential_latent_gp``
    A latent GP over ``(t, x)`` with a likelihood per time step (Tegner et al. 2018).
``student_t_process``
    Student-t process regression ``f ~ student_t_process(nu, X, k); y ~ normal(f, s)``: the exact marginal
    ``MVT(nu, 0, K + s^2 I)`` (noise inside the process's kernel, Shah et al. 2014) for ``ml`` and NUTS.
``latent_gp_external``
    One latent GP vector under an ``external(...)`` likelihood, which need not factorise: engines that
    need only the log likelihood of the whole vector (ESS) run it.
``hsgp_latent_gp``
    One latent GP vector in the Hilbert-space approximation (``approx = hsgp(...)``) under a likelihood on its
    elements: ``f = PHI (sqrt(S) .* z)`` with standard normal weights ``z``, which ESS samples (``gibbs``). Its draw
    groups predict at new inputs from any sampler's draws of ``z`` (the basis functions at the new points); every
    other family refuses an approximate GP.
``state_space_regression``
    GP regression (as ``gp_regression``) whose GP has the state-space form (``approx = state_space``): the marginal
    likelihood, predictions at new times, leave-one-out densities and replicates by Kalman filtering and smoothing in
    ``O(N)``. Its view is the GP regression view's state-space variant; engines of ``gp_regression`` that do not
    name this family refuse the model.
``state_space_latent_gp``
    One latent state-space GP (``approx = state_space``) under a likelihood on its elements that does not integrate
    it out (``poisson_log(f)``, ``bernoulli_logit(f)``, ...): ``f`` is the state recursion driven by standard normal
    innovations ``z``, which ESS samples (``gibbs``) in ``O(N)`` per update; its draw groups predict at new times by
    conditioning the state-space prior on each draw of ``f``.
``any``
    Every model: NUTS samples the flat log density.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from importlib import import_module
from typing import Any, Callable

from gpdsl.errors import MethodError
from gpdsl.ir import nodes as ir
from gpdsl.ir.approximations import HSGP, STATE_SPACE
from gpdsl.ir.family_forms import (HSGP_LATENT_GP_NEEDS, STATE_SPACE_LATENT_GP_NEEDS, DEEP_GP_CHAIN_NEEDS, DEEP_MAHALANOBIS_NEEDS, GP_PRIOR_GPLVM_NEEDS, GPLVM_NEEDS,
                                   LATENT_GP_NEEDS, LATENT_GPS_NEEDS, SEQUENTIAL_NEEDS, STATE_SPACE_REGRESSION_NEEDS,
                                   DeepGPFacts, GPLVMFacts,
                                   LatentGPFacts, Refusal, deep_gp_chain_form, deep_mahalanobis_form,
                                   gp_regression_form, gplvm_form, hsgp_latent_gp_form, latent_gp_external_form,
                                   latent_gp_form,
                                   latent_gps_form, sequential_form, state_space_latent_gp_form,
                                   state_space_regression_form,
                                   student_t_process_form)
from gpdsl.ir.structure import gp_nodes

__all__ = [
    "ANY", "BAYESIAN_GPLVM", "DEEP_GP_CHAIN", "DEEP_GP_CHAIN_NEEDS", "DEEP_MAHALANOBIS_GP", "DEEP_MAHALANOBIS_NEEDS",
    "FAMILIES", "GPLVM_NEEDS", "GP_PRIOR_GPLVM", "GP_PRIOR_GPLVM_NEEDS", "GP_REGRESSION", "HSGP_LATENT_GP",
    "HSGP_LATENT_GP_NEEDS", "LATENT_GP",
    "LATENT_GPS", "LATENT_GPS_NEEDS", "LATENT_GP_EXTERNAL", "LATENT_GP_NEEDS", "SEQUENTIAL_LATENT_GP",
    "SEQUENTIAL_NEEDS", "STATE_SPACE_LATENT_GP", "STATE_SPACE_LATENT_GP_NEEDS", "STATE_SPACE_REGRESSION", "STATE_SPACE_REGRESSION_NEEDS", "STUDENT_T_PROCESS", "Classification", "DeepGPFacts", "Family", "GPLVMFacts", "LatentGPFacts", "Refusal",
    "classify", "describe", "predicting_families", "register_family", "require_priors", "unregister_family",
]

LATENT_GP = "latent_gp"
LATENT_GPS = "latent_gps"
GP_REGRESSION = "gp_regression"
BAYESIAN_GPLVM = "bayesian_gplvm"
GP_PRIOR_GPLVM = "gp_prior_gplvm"
DEEP_MAHALANOBIS_GP = "deep_mahalanobis_gp"
DEEP_GP_CHAIN = "deep_gp_chain"
SEQUENTIAL_LATENT_GP = "sequential_latent_gp"
STUDENT_T_PROCESS = "student_t_process"
LATENT_GP_EXTERNAL = "latent_gp_external"
HSGP_LATENT_GP = "hsgp_latent_gp"
STATE_SPACE_REGRESSION = "state_space_regression"
STATE_SPACE_LATENT_GP = "state_space_latent_gp"
ANY = "any"


@dataclass(frozen=True)
class Family:
    """One model family: its form, the view its engines receive, and what any sampler's draws predict.

    Every family has the same methods (as PyMC's ``gp`` classes do): :meth:`form` reads a model's facts from the
    IR, :meth:`view` builds what its engines run, and :meth:`add_draw_groups` fills a sampler's pointwise groups
    and predictions. The view and the draw groups live in the engines' layer: they are named here by their
    import path (``"module:function"``) and imported when first used, so this table stays below the engines.

    Attributes
    ----------
    name : str
        What methods name in their registry entry (``families=(...)``).
    description : str
        The family in words (``gpdsl methods``, refusals).
    form : callable
        ``form(model, gp_nodes) -> facts or Refusal``.
    view_builder : str
        ``"module:function"`` of ``view(model, data, facts, **options)``.
    draw_groups : str, optional
        ``"module:function"`` of ``draw_groups(output, model, data, facts, context, pointwise, **options)``: the
        ``log_likelihood``, ``posterior_predictive`` and ``predictions`` groups of any sampler's draws.
    predicts : bool
        Its draw groups predict at new inputs for any sampler, NUTS included.
    approximations : tuple of str
        The GP approximations (``approx = NAME(...)``, :mod:`gpdsl.ir.approximations`) its form takes; a model with
        any other approximate GP is refused before its form is read.
    """

    name: str
    description: str
    form: Callable[[ir.Model, list], Any]
    view_builder: str
    draw_groups: str | None = None
    predicts: bool = False
    approximations: tuple[str, ...] = ()

    def facts(self, model: ir.Model):
        """The model's facts for this family, or the :class:`Refusal` that says why it is not of it."""
        return _facts(self, model, gp_nodes(model))

    def view(self, model: ir.Model, data: dict, facts, **options):
        """What this family's engines receive for ``model`` and its validated ``data``."""
        return _resolve(self.view_builder)(model, data, facts, **options)

    def add_draw_groups(self, output, model: ir.Model, data: dict, facts, context, **options) -> None:
        """Fill a sampler's ``log_likelihood``, ``posterior_predictive`` and ``predictions`` (see ``draw_groups``).

        Raises
        ------
        MethodError
            The family computes no groups from draws.
        """
        if self.draw_groups is None:
            raise MethodError(f"{self.description}: no draw groups are computed for this family")
        _resolve(self.draw_groups)(output, model, data, facts, context, **options)


def _resolve(path: str):
    module, _, name = path.partition(":")
    return getattr(import_module(module), name)


FAMILIES: dict[str, Family] = {}
"""Every family by name, in the order :func:`classify` tries them (most specific first)."""


def register_family(family: Family, replace: bool = False) -> Family:
    """Add a family to :data:`FAMILIES` (plugins and tests; methods then name it in their ``families``).

    Raises
    ------
    MethodError
        The name is taken (and ``replace`` is False) or is ``"any"``.
    """
    if family.name == ANY or (family.name in FAMILIES and not replace):
        raise MethodError(f"a model family named '{family.name}' is already registered")
    FAMILIES[family.name] = family
    return family


def unregister_family(name: str) -> None:
    """Remove a family from :data:`FAMILIES` (plugins and tests)."""
    FAMILIES.pop(name, None)


def describe(name: str) -> str:
    """The family ``name`` in words."""
    return "any model" if name == ANY else FAMILIES[name].description


def predicting_families() -> tuple[str, ...]:
    """The families whose draw groups predict at new inputs for any sampler (NUTS's ``predicts_for``)."""
    return tuple(name for name, family in FAMILIES.items() if family.predicts)


_VIEWS = "gpdsl.inference.families"
_DRAWS = "gpdsl.inference.predict.draw_groups"
for _family in (
        Family(LATENT_GP, "a latent GP with a factorised likelihood",
               partial(latent_gp_form, marginalise=True, several=False), f"{_VIEWS}.latent_gp:latent_gp_view",
               f"{_DRAWS}:latent_gp_groups", predicts=True),
        Family(LATENT_GPS, "several latent GPs under one factorised likelihood", latent_gps_form,
               f"{_VIEWS}.latent_gp:latent_gp_view", f"{_DRAWS}:latent_gp_groups"),
        Family(GP_REGRESSION, "GP regression with a Gaussian likelihood integrated out", gp_regression_form,
               f"{_VIEWS}.gp_regression:gp_regression_view", f"{_DRAWS}:gp_regression_groups", predicts=True),
        Family(BAYESIAN_GPLVM, "a Bayesian GPLVM", partial(gplvm_form, gp_prior=False),
               f"{_VIEWS}.gplvm:gplvm_view"),
        Family(GP_PRIOR_GPLVM, "a GPLVM whose latent inputs have a GP prior (dynamical or supervised)",
               partial(gplvm_form, gp_prior=True), f"{_VIEWS}.gplvm:gplvm_view"),
        Family(DEEP_MAHALANOBIS_GP, "a deep Mahalanobis GP (a GP over projections by GP fields)",
               deep_mahalanobis_form, f"{_VIEWS}.deep_mahalanobis:deep_mahalanobis_view"),
        Family(DEEP_GP_CHAIN, "a deep GP written as a chain of GPs", deep_gp_chain_form,
               f"{_VIEWS}.deep_gp:deep_gp_view"),
        Family(SEQUENTIAL_LATENT_GP, "a latent GP over (t, x) with a likelihood per time step", sequential_form,
               f"{_VIEWS}.sequential:sequential_view"),
        Family(STUDENT_T_PROCESS, "Student-t process regression with a Gaussian likelihood inside its kernel",
               student_t_process_form, f"{_VIEWS}.student_t_process:student_t_process_view",
               f"{_DRAWS}:student_t_process_groups", predicts=True),
        Family(LATENT_GP_EXTERNAL, "a latent GP vector under an external likelihood", latent_gp_external_form,
               f"{_VIEWS}.latent_gp:latent_gp_view"),
        Family(HSGP_LATENT_GP, "a latent GP in the Hilbert-space approximation", hsgp_latent_gp_form,
               f"{_VIEWS}.hsgp:hsgp_view", f"{_DRAWS}:hsgp_groups", predicts=True, approximations=(HSGP,)),
        Family(STATE_SPACE_REGRESSION, "GP regression with a state-space GP integrated out by Kalman filtering",
               state_space_regression_form, f"{_VIEWS}.gp_regression:gp_regression_view",
               f"{_DRAWS}:gp_regression_groups", predicts=True, approximations=(STATE_SPACE,)),
        Family(STATE_SPACE_LATENT_GP, "a latent state-space GP sampled through its innovations",
               state_space_latent_gp_form, f"{_VIEWS}.state_space_latent:state_space_latent_view",
               f"{_DRAWS}:state_space_latent_groups", predicts=True, approximations=(STATE_SPACE,))):
    register_family(_family)


@dataclass(frozen=True)
class Classification:
    """The families a model belongs to, with their facts, and the reasons for the others.

    Attributes
    ----------
    facts : dict
        Family name to its facts (``None`` for families whose engines need no more than the model).
    refusals : dict
        Family name to :class:`Refusal` for the families the model is not of.
    """

    facts: dict = field(default_factory=dict)
    refusals: dict = field(default_factory=dict)

    @property
    def families(self) -> list[str]:
        """The families the model belongs to, most specific first."""
        return list(self.facts)

    def describe(self) -> str:
        """The most specific family, in words."""
        specific = [f for f in self.facts if f != ANY]
        return describe(specific[0]) if specific else "a model of no family gpdsl's engines run"

    def require(self, accepted, method: str):
        """The ``(family, facts)`` of the first accepted family the model belongs to.

        Raises
        ------
        MethodError
            Naming what ``method`` needs and why this model is not of that form.
        """
        for family in accepted:
            if family in self.facts:
                return family, self.facts[family]
        refusal = self.refusals[accepted[0]]
        raise MethodError(refusal.message(method), refusal.span)


def _facts(family: Family, model: ir.Model, nodes: list):
    """The family's form of the model, refused when a GP of the model uses an approximation the family does not take
    (:attr:`Family.approximations`; an approximate GP runs under NUTS on its Stan program)."""
    approximate = next((node for node in nodes if node.statement.approximation is not None
                        and node.statement.approximation.name not in family.approximations), None)
    if approximate is None:
        return family.form(model, nodes)
    name = approximate.statement.approximation.name
    if name == STATE_SPACE and approximate.likelihood is not None and \
            approximate.likelihood.distribution.name != "normal":
        return Refusal(f"{{method}} needs {family.description} with an exact GP",
                       f"'{approximate.name}' uses approx = state_space under a "
                       f"{approximate.likelihood.distribution.name} likelihood: gibbs samples it through its "
                       "innovations and nuts runs its Stan program; for this method use approx = hsgp(...) or the "
                       "exact GP", approximate.statement.approximation.span, suggests="gibbs")
    return Refusal(f"{{method}} needs {family.description} with an exact GP",
                   f"'{approximate.name}' uses approx = {name}(...), which these engines do not take; the methods "
                   "of its own family run it (gpdsl methods lists them)", approximate.statement.approximation.span,
                   suggests="nuts")


def classify(model: ir.Model) -> Classification:
    """Classify a checked model into the families of the module docstring.

    Parameters
    ----------
    model : ir.Model

    Returns
    -------
    Classification
    """
    nodes = gp_nodes(model)
    found, refusals = {}, {}
    for name, family in FAMILIES.items():
        result = _facts(family, model, nodes)
        if isinstance(result, Refusal):
            refusals[name] = result
        else:
            found[name] = result
    found[ANY] = None
    return Classification(found, refusals)


def require_priors(model: ir.Model, method: str) -> None:
    """Refuse a method that samples every parameter on a model with parameters that have no prior.

    Raises
    ------
    MethodError
        Naming the parameters without a prior.
    """
    missing = model.unpriored_parameters()
    if missing:
        names = ", ".join(f"'{n}'" for n in missing)
        raise MethodError(
            f"{method} samples every parameter and needs a prior on each; {names} "
            f"{'has' if len(missing) == 1 else 'have'} none",
            hint="add priors beside the parameters (e.g. 'real<lower=0> s2 ~ lognormal(0, 1);'), "
                 "or use a method that point-estimates them")
