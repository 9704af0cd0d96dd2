"""The method registry: every inference method gpdsl runs, declared once.

An entry says what a method is called, which model families it fits (:mod:`gpdsl.ir.families`), its
settings class (:mod:`gpdsl.settings`: validated on creation, turned into CLI flags), and the function
that runs it, ``run(model, data, settings, context) -> MethodOutput``; :mod:`gpdsl.results` turns every
method's output into results the same way. The command line (``gpdsl sample``, ``gpdsl fit``,
``gpdsl methods``) and :func:`gpdsl.api.run` are generated from and dispatch through this table.

Adding a method is one module (its settings class and run function) and one :func:`register` call,
here or in a package that declares an entry point in the group ``gpdsl.methods`` (its object is
called with no arguments and returns a :class:`Method`, or a list of them).

The registry sits above both backends (NUTS runs through the Stan backend, the other methods on
gpdsl's JAX engines), which is why it is not inside ``gpdsl.inference``.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata
from typing import Any, Callable

from gpdsl.errors import MethodError
from gpdsl.inference.methods.dmgp import dmgp_report, run_dmgp
from gpdsl.inference.methods.dsdgp import dsdgp_report, run_dsdgp
from gpdsl.inference.methods.ep_ml import run_ep_ml
from gpdsl.inference.methods.gibbs import gibbs_engine, run_gibbs
from gpdsl.inference.methods.ml import ml_refusal, ml_report, run_ml
from gpdsl.inference.methods.nuts import nuts_refusal, run_nuts
from gpdsl.inference.methods.pm_gplvm import PM_GPLVM_FAMILIES, run_pm_gplvm
from gpdsl.inference.methods.pseudo_marginal import (ep_refusal, mcmc_ep_engine, pm_engine, pm_refusal,
                                                     run_mcmc_ep, run_pm)
from gpdsl.inference.methods.sequential import run_sequential
from gpdsl.inference.methods.sgpr import sgpr_refusal, run_sgpr, sgpr_report
from gpdsl.inference.methods.svgp import run_svgp, svgp_refusal, svgp_report
from gpdsl.inference.methods.svi_gplvm import run_svi_gplvm, svi_gplvm_report
from gpdsl.inference.methods.vem import fit_from_results, run_vem, vem_report
from gpdsl.ir.families import (ANY, BAYESIAN_GPLVM, DEEP_GP_CHAIN, DEEP_MAHALANOBIS_GP, FAMILIES, GP_PRIOR_GPLVM,
                                GP_REGRESSION, HSGP_LATENT_GP, LATENT_GP, LATENT_GP_EXTERNAL, LATENT_GPS, SEQUENTIAL_LATENT_GP,
                                STATE_SPACE_LATENT_GP, STATE_SPACE_REGRESSION, STUDENT_T_PROCESS, Classification, classify, describe, predicting_families, require_priors)
from gpdsl.ir.latent_hsgp import latent_hsgp_refusal
from gpdsl.ir.structure import input_prediction_refusal, location_prediction_refusal, mean_prediction_refusal
from gpdsl.settings import (DMGPSettings, DSDGPSettings, EPMLSettings, GibbsSettings, MCMCEPSettings, MLSettings,
                            NUTSSettings, PMGPLVMSettings, PseudoMarginalSettings, SegmentedChainSettings,
                            SequentialSettings, SGPRSettings, SVGPSettings, SVIGPLVMSettings, VEMSettings)

ENTRY_POINT_GROUP = "gpdsl.methods"
PREDICTIVE_CHOICES = ("joint", "marginal")
"""Draws at new inputs (``--predictive``): jointly over the new points, or each point from its own marginal
(:mod:`gpdsl.inference.predict.joint`)."""
JOINT_LIMIT = 2000
"""Below this many new points the methods that draw both kinds draw jointly by default, at and above it marginally."""
PREDICTION_FILES = ("inputs", "variables")


@dataclass(frozen=True)
class Method:
    """One inference method.

    Attributes
    ----------
    name : str
        The name users type (``--method NAME``).
    summary : str
        One line for ``--help`` and ``gpdsl methods``.
    families : tuple of str
        Model families it fits, in order of preference (``"any"`` for every model).
    settings : type
        Its settings dataclass (fields made with :func:`gpdsl.settings.option`).
    run : callable
        ``run(model, data, settings, context) -> MethodOutput``.
    command : {"sample", "fit"}
        The CLI command that offers it (``fit`` for optimisation and variational methods).
    engine : {"gpdsl", "stan"}
        Who runs it.
    requires_priors : bool
        Every parameter needs a prior (samplers); otherwise parameters without one are point-estimated.
    missing_outputs : tuple of str
        The families in which missing (NaN) entries of the observed outputs are allowed: left out of the
        likelihood, and imputed in the posterior predictive (:mod:`gpdsl.data.missing`).
    predicts : bool
        It can predict at new inputs (``--predict``).
    predicts_for : tuple of str
        The families it predicts for, when not every family it fits (NUTS fits any model but predicts for
        latent-GP models and GP regression); empty for all.
    checkpoints : bool
        It writes its draws so far to a checkpoint file and resumes from it (``--checkpoint``).
    chain_groups : bool
        Its chains run in gpdsl's driver, so they can be advanced in groups (``--chain-groups``) and as Dask
        tasks; its settings are :class:`~gpdsl.settings.SegmentedChainSettings`.
    report : callable, optional
        ``report(results, model, settings) -> RunReport`` (:mod:`gpdsl.results.report`): what the command line
        prints after a run. Every ``fit`` method has one; samplers default to the posterior summary.
    tools : tuple of str
        Modules of commands of this method only (:mod:`gpdsl.cli.tools`), added to the command line.
    latent_fit : callable, optional
        ``latent_fit(results) -> (model, fit)``: its variational fit of latent inputs rebuilt from a results file
        it wrote (``gpdsl plot --kind latent``); None for methods whose results hold no ``q(X)`` to plot.
    predictive : tuple of str
        The draws at new inputs it can make (:mod:`gpdsl.inference.predict.joint`): ``("joint", "marginal")``
        where ``--predictive`` chooses, one of them where its predictions are always of that kind.
    prediction_file : {"inputs", "variables"}
        What its ``--predict`` file holds: the new inputs under the model's input name, or (GPLVMs) every
        variable by name, from which the method picks the new inputs of the latent inputs' prior and new
        outputs.
    chain_engine : callable, optional
        ``chain_engine(latent_gp_view, settings) -> (init, step, extract)`` for Markov chain methods on
        latent-GP models, for tools that run many data sets in one compiled loop (SBC).
    needs_parameters : tuple of str
        The families in which it samples or fits the hyperparameters alone (f integrated out, importance-sampled
        or approximated): a model of one of them with no parameter leaves it nothing to run.
    refuses : callable, optional
        ``refuses(model, facts, settings) -> str | MethodError | None``: why it cannot run a model of its family
        with these settings (a likelihood its approximation lacks, a program Stan cannot express), or None. The
        run refuses with it before anything compiles, and ``gpdsl methods`` answers from it, so the two agree.
    """

    name: str
    summary: str
    families: tuple[str, ...]
    settings: type
    run: Callable[..., Any]
    command: str = "sample"
    engine: str = "gpdsl"
    requires_priors: bool = True
    missing_outputs: tuple[str, ...] = ()
    predicts: bool = False
    predicts_for: tuple[str, ...] = ()
    checkpoints: bool = False
    chain_engine: Callable[..., Any] | None = None
    chain_groups: bool = False
    report: Callable[..., Any] | None = None
    prediction_file: str = "inputs"
    predictive: tuple[str, ...] = ("marginal",)
    latent_fit: Callable[..., Any] | None = None
    tools: tuple[str, ...] = ()
    needs_parameters: tuple[str, ...] = ()
    refuses: Callable[..., Any] | None = None

    def run_report(self, results, model, settings):
        """The :class:`~gpdsl.results.report.RunReport` of a finished run (see ``report``)."""
        if self.report is not None:
            return self.report(results, model, settings)
        from gpdsl.results.report import draws_report

        return draws_report(results, model)

    def settings_from(self, values, where: str = "settings"):
        """This method's settings from a mapping (a run file's table, keyword arguments), validated as flags are.

        Keys are field names (``num_importance``) or flag names without dashes (``num-importance``, ``no-...``);
        strings are converted as on the command line (``--block s1,theta``, ``--approximation ep``).

        Raises
        ------
        MethodError
            A key is not a setting of this method (with a suggestion, and the methods it is a setting of), or a
            value is invalid.
        """
        from gpdsl.settings.fields import settings_from_mapping

        owners = {m.name: m.settings for m in methods().values()}
        return settings_from_mapping(self.name, self.settings, values, where, owners)

    def refusal(self, model, classification: Classification | None = None, settings=None) -> str | None:
        """Why this method, with ``settings`` (default: its defaults), does not run ``model``, in one short line, or
        None when it does: the answer of ``gpdsl methods``, from the checks of :meth:`refusal_error`."""
        found = self._refused(model, classification, settings)
        return None if found is None else found[0]

    def refusal_error(self, model, classification: Classification | None = None, settings=None) -> MethodError | None:
        """The :class:`MethodError` a run of this method on ``model`` with ``settings`` raises before it starts, or
        None: the model is not of a family it fits, a parameter it samples has no prior, it has no parameter to
        run on, or the method's own check (``refuses``) fails."""
        found = self._refused(model, classification, settings)
        return None if found is None else found[1]

    def _refused(self, model, classification, settings) -> tuple[str, MethodError] | None:
        classification = classification or classify(model)
        accepted = [family for family in self.families if family in classification.facts]
        if not accepted:
            family = next((f for f in self.families if classification.refusals[f].suggests != self.name),
                          self.families[0])
            refusal = classification.refusals[family]
            return (f"needs {describe(family)}: {refusal.detail}",
                    MethodError(refusal.message(self.name), refusal.span))
        missing = model.unpriored_parameters() if self.requires_priors else []
        if missing:
            verb = "has" if len(missing) == 1 else "have"
            try:
                require_priors(model, self.name)
            except MethodError as error:
                return f"needs a prior on every parameter: {', '.join(missing)} {verb} none", error
        nothing = self.parameters_refusal(model, classification)
        if nothing:
            return nothing, MethodError(f"{self.name} {nothing}", hint="give the model a parameter, or sample f with "
                                                                     "gibbs")
        reason = None if self.refuses is None else self.refuses(
            model, classification.facts[accepted[0]], self.settings() if settings is None else settings)
        if reason is None:
            return None
        error = MethodError(f"{self.name}: {reason}") if isinstance(reason, str) else reason
        return (reason if isinstance(reason, str) else reason.message), error

    def choice_refusals(self, model, classification: Classification | None = None) -> dict[str, str | None]:
        """For each value of each choice setting other than its default (``--approximation laplace``), why the
        method with it does not run ``model`` (None when it does), where that differs from the defaults' answer."""
        from gpdsl.settings.fields import cli_fields, flag_of

        classification = classification or classify(model)
        default = self.refusal(model, classification)
        answers = {}
        for settings_field in cli_fields(self.settings):
            for choice in settings_field.metadata.get("choices") or ():
                if str(choice).replace("-", "_") == str(settings_field.default).replace("-", "_"):
                    continue
                value = str(choice).replace("_", "-")
                reason = self.refusal(model, classification, self.settings_from({settings_field.name: value}))
                if reason != default:
                    answers[f"{flag_of(settings_field)} {value}"] = reason
        return answers

    def parameters_refusal(self, model, classification: Classification | None = None) -> str | None:
        """Why this method has nothing to run on ``model``, which has no parameter (see ``needs_parameters``), or
        None."""
        if model.parameters:
            return None
        classification = classification or classify(model)
        if any(family in classification.facts for family in self.needs_parameters):
            return (f"needs a parameter: it {'fits' if self.command == 'fit' else 'samples'} the hyperparameters of "
                    f"{classification.describe()}, and this model has none")
        return None

    def prediction_refusal(self, model, classification: Classification | None = None) -> str | None:
        """Why this method cannot predict at new inputs of ``model``, in one sentence, or None when it can."""
        if not self.predicts:
            others = ", ".join(m.name for m in methods().values() if m.predicts)
            return f"{self.name} does not predict at new inputs; methods that do: {others}"
        classification = classification or classify(model)
        if self.predicts_for and not any(family in classification.facts for family in self.predicts_for):
            families = " or ".join(describe(family) for family in self.predicts_for)
            return (f"{self.name} predicts at new inputs for {families}; this model is "
                    f"{classification.describe()}")
        family = next((f for f in self.families if f in classification.facts), None)
        if family in (GP_REGRESSION, STATE_SPACE_REGRESSION):
            return location_prediction_refusal(model, classification.facts[family].node)
        facts = classification.facts.get(LATENT_GP)
        if facts is None:
            return None
        return input_prediction_refusal(facts.node) or mean_prediction_refusal(model, facts.node)

    def predictive_choice(self, requested: str | None, new_inputs) -> str | None:
        """The draws a run makes at ``new_inputs``: ``"joint"``, ``"marginal"``, or None without new inputs.

        Parameters
        ----------
        requested : {"joint", "marginal"}, optional
            The user's choice (``--predictive``); None takes the default: joint below :data:`JOINT_LIMIT` new
            points where the method draws both kinds, else the one kind it draws.
        new_inputs : array_like or mapping, optional

        Raises
        ------
        MethodError
            An unknown choice, a choice without new inputs, or one the method does not draw.
        """
        if requested is not None and requested not in PREDICTIVE_CHOICES:
            raise MethodError(f"--predictive must be one of {', '.join(PREDICTIVE_CHOICES)}, not '{requested}'")
        if new_inputs is None:
            if requested is not None:
                raise MethodError(f"--predictive {requested} needs new inputs (--predict NEW.json)")
            return None
        if requested is None:
            if len(self.predictive) > 1:
                return "joint" if len(new_inputs) < JOINT_LIMIT else "marginal"
            return self.predictive[0]
        if requested not in self.predictive:
            others = ", ".join(m.name for m in methods().values() if m.predicts and requested in m.predictive)
            kind = "point by point from each point's marginal" if self.predictive[0] == "marginal" else "jointly"
            raise MethodError(f"--predictive {requested}: {self.name} draws its predictions {kind}; methods with "
                              f"{requested} draws: {others}")
        return requested


_METHODS: dict[str, Method] = {}
_plugins_loaded = False


def register(method: Method, replace: bool = False) -> Method:
    """Add a method to the registry.

    Parameters
    ----------
    method : Method
    replace : bool
        Allow replacing a method of the same name.

    Raises
    ------
    MethodError
        If the name is taken (and ``replace`` is False) or the entry is malformed.
    """
    if method.name in _METHODS and not replace:
        raise MethodError(f"a method named '{method.name}' is already registered")
    if method.command not in ("sample", "fit"):
        raise MethodError(f"method '{method.name}': command must be 'sample' or 'fit', not '{method.command}'")
    named = (*method.families, *method.predicts_for, *method.needs_parameters)
    unknown = [family for family in named if family != ANY and family not in FAMILIES]
    if unknown:
        raise MethodError(f"method '{method.name}': no model family named {', '.join(unknown)} "
                          f"(the families: {', '.join(FAMILIES)})")
    if method.command == "fit" and method.report is None:
        raise MethodError(f"method '{method.name}': a fit method needs a report (report=...)")
    if method.chain_groups and not (method.engine == "gpdsl" and issubclass(method.settings, SegmentedChainSettings)):
        raise MethodError(f"method '{method.name}': chain groups need chains run by gpdsl's driver "
                          "(settings derived from SegmentedChainSettings)")
    if method.prediction_file not in PREDICTION_FILES:
        raise MethodError(f"method '{method.name}': prediction_file must be one of {', '.join(PREDICTION_FILES)}")
    _METHODS[method.name] = method
    return method


def unregister(name: str) -> None:
    """Remove a method from the registry (for plugins and tests)."""
    _METHODS.pop(name, None)


def methods() -> dict[str, Method]:
    """Every registered method by name, entry-point plugins included."""
    global _plugins_loaded
    if not _plugins_loaded:
        _plugins_loaded = True
        for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
            declared = entry.load()()
            for method in declared if isinstance(declared, (list, tuple)) else [declared]:
                register(method)
    return dict(_METHODS)


def get_method(name: str) -> Method:
    """The method called ``name``.

    Raises
    ------
    MethodError
        Listing the methods there are.
    """
    known = methods()
    if name not in known:
        from gpdsl.suggest import did_you_mean

        raise MethodError(f"unknown method '{name}'; the methods are {', '.join(known)}",
                          hint=did_you_mean(name, known))
    return known[name]


register(Method(
    "nuts", "Stan's NUTS on the generated program (cmdstanpy or PyStan): the baseline", (ANY,), NUTSSettings,
    run_nuts, engine="stan", predicts=True, predicts_for=predicting_families(),
    needs_parameters=(GP_REGRESSION, STATE_SPACE_REGRESSION, STUDENT_T_PROCESS),
    refuses=nuts_refusal, predictive=("joint", "marginal"),
    missing_outputs=(LATENT_GP, GP_REGRESSION, STATE_SPACE_REGRESSION)))
register(Method(
    "pm", "pseudo-marginal MH on the hyperparameters, importance sampling from Laplace or EP (exact); MH on the "
    "exact marginal of GP regression (dense or state-space)",
    (LATENT_GP, HSGP_LATENT_GP, STATE_SPACE_LATENT_GP, GP_REGRESSION, STATE_SPACE_REGRESSION), PseudoMarginalSettings,
    run_pm, predicts=True, checkpoints=True, chain_engine=pm_engine, chain_groups=True,
    needs_parameters=(LATENT_GP, HSGP_LATENT_GP, STATE_SPACE_LATENT_GP, GP_REGRESSION, STATE_SPACE_REGRESSION),
    refuses=pm_refusal, predictive=("joint", "marginal"),
    missing_outputs=(LATENT_GP, GP_REGRESSION, STATE_SPACE_REGRESSION)))
register(Method(
    "mcmc-ep", "MH on the EP approximate marginal likelihood (approximate)",
    (LATENT_GP, HSGP_LATENT_GP, STATE_SPACE_LATENT_GP), MCMCEPSettings, run_mcmc_ep, predicts=True, checkpoints=True,
    chain_engine=mcmc_ep_engine, chain_groups=True, needs_parameters=(LATENT_GP, HSGP_LATENT_GP, STATE_SPACE_LATENT_GP),
    refuses=ep_refusal, predictive=("joint", "marginal"),
    missing_outputs=(LATENT_GP,)))
register(Method(
    "pm-gplvm", "pseudo-marginal Metropolis-within-Gibbs on a GPLVM's hyperparameters, importance sampling from "
    "the variational E-step at each proposal (exact)", PM_GPLVM_FAMILIES, PMGPLVMSettings,
    run_pm_gplvm, refuses=latent_hsgp_refusal, predicts=True, checkpoints=True, chain_groups=True, prediction_file="variables",
    tools=("gpdsl.cli.tools.pm_variance",)))
register(Method(
    "gibbs", "elliptical slice sampling of f with SA, AA, SURR or SURR-slice updates of the hyperparameters, or ESS "
    "in z-space (SDSS, fixed-nu)",
    (LATENT_GP, GP_REGRESSION, LATENT_GPS, LATENT_GP_EXTERNAL, HSGP_LATENT_GP, STATE_SPACE_LATENT_GP), GibbsSettings,
    run_gibbs,
    predicts=True, predicts_for=predicting_families(), checkpoints=True, missing_outputs=(LATENT_GP, GP_REGRESSION),
    chain_engine=gibbs_engine, chain_groups=True, predictive=("joint", "marginal")))
register(Method(
    "ep-ml", "type-II maximum likelihood on the EP marginal (a point estimate, stored as one draw)",
    (LATENT_GP, HSGP_LATENT_GP, STATE_SPACE_LATENT_GP), EPMLSettings, run_ep_ml, predicts=True,
    needs_parameters=(LATENT_GP, HSGP_LATENT_GP, STATE_SPACE_LATENT_GP),
    refuses=ep_refusal,
    predictive=("joint", "marginal"), missing_outputs=(LATENT_GP,)))
register(Method(
    "vem", "variational EM with Psi statistics (analytic, unscented, Gauss-Hermite, Monte Carlo)",
    (BAYESIAN_GPLVM, GP_PRIOR_GPLVM), VEMSettings, run_vem, command="fit", requires_priors=False,
    missing_outputs=(BAYESIAN_GPLVM, GP_PRIOR_GPLVM), predicts=True, report=vem_report, prediction_file="variables",
    latent_fit=fit_from_results))
register(Method(
    "ml", "type-II maximum likelihood (MAP where there are priors) of GP regression, f integrated out exactly "
    "(a point estimate, stored as one draw); Student-t process regression likewise; a state-space GP by Kalman "
    "filtering in O(N); an HSGP under a normal likelihood with its weights integrated out",
    (GP_REGRESSION, STATE_SPACE_REGRESSION, STUDENT_T_PROCESS, HSGP_LATENT_GP),
    MLSettings, run_ml, command="fit", requires_priors=False, predicts=True, report=ml_report, refuses=ml_refusal,
    needs_parameters=(GP_REGRESSION, STATE_SPACE_REGRESSION, STUDENT_T_PROCESS, HSGP_LATENT_GP),
    predictive=("joint", "marginal"), missing_outputs=(GP_REGRESSION, STATE_SPACE_REGRESSION)))
register(Method(
    "sgpr", "sparse GP regression: Titsias's collapsed bound over inducing inputs, kernel and noise (a point "
    "estimate, stored as one draw, with the inducing inputs)", (GP_REGRESSION,), SGPRSettings, run_sgpr,
    command="fit", requires_priors=False, predicts=True, checkpoints=True, report=sgpr_report, refuses=sgpr_refusal,
    missing_outputs=(GP_REGRESSION,)))
register(Method(
    "svgp", "sparse variational GP for any scalar likelihood (Hensman et al. 2015): q(u) over inducing inputs, "
    "minibatches, Adam or natural-gradient steps (a point estimate of the hyperparameters, stored as one draw)",
    (LATENT_GP, GP_REGRESSION), SVGPSettings, run_svgp, command="fit", requires_priors=False, predicts=True,
    checkpoints=True, report=svgp_report, refuses=svgp_refusal, missing_outputs=(LATENT_GP, GP_REGRESSION)))
register(Method(
    "svi-gplvm", "Bayesian GPLVM by Adam on minibatches of the uncollapsed bound (explicit q(u); q(X), inducing "
    "inputs, point estimates)", (BAYESIAN_GPLVM,), SVIGPLVMSettings, run_svi_gplvm, command="fit",
    requires_priors=False, missing_outputs=(BAYESIAN_GPLVM,), predicts=True, checkpoints=True, report=svi_gplvm_report,
    refuses=latent_hsgp_refusal,
    prediction_file="variables"))
register(Method(
    "dmgp", "the deep Mahalanobis GP by its collapsed variational bound and Adam (de Souza 2020)",
    (DEEP_MAHALANOBIS_GP,),
    DMGPSettings, run_dmgp, command="fit", requires_priors=False, predicts=True, checkpoints=True, report=dmgp_report))
register(Method(
    "dsdgp", "a deep GP (a chain of GPs) by doubly-stochastic variational inference and Adam (Salimbeni & "
    "Deisenroth 2017)", (DEEP_GP_CHAIN,), DSDGPSettings, run_dsdgp, command="fit", requires_priors=False, predicts=True,
    checkpoints=True, report=dsdgp_report))
register(Method(
    "sequential", "sequential sampling of a latent GP over time: a long chain at step 1, then one pass over M states "
    "per step with moment-matched hyperpriors (Tegner et al. 2018; --scheme full: Gibbs on f_1:t at every step)",
    (SEQUENTIAL_LATENT_GP,), SequentialSettings, run_sequential, checkpoints=True, predicts=True,
    predictive=("joint",)))
