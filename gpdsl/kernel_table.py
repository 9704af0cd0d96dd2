"""The kernels of the language, one entry each: parameters, exclusive groups, doc text and Stan spelling.

Read by the checker (through :data:`gpdsl.semantics.catalog.KERNELS`), the JAX kernel classes (each
class's ``spec``), :mod:`gpdsl.kernels.registry` and the Stan code generator. This module imports
neither JAX nor the kernels package, so the checker and the Stan backend stay JAX-free.

A model file and a Python call treat omitted hyperparameters differently: the checker fills in
:attr:`KernelParam.default` (a parameter without one, outside an exclusive group, must be given),
while the Python constructors, :meth:`KernelSpec.bind` and ``build_kernel`` insist on the
:attr:`KernelParam.required` ones and on exactly one member of each exclusive group.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from gpdsl.errors import ModelCheckError
from gpdsl.source import Span
from gpdsl.suggest import did_you_mean

PERIODIC_ORDER = 7
"""Default number ``J`` of cosine terms of a periodic kernel's truncated series in its state-space form (a state of
``2 J + 1``): :mod:`gpdsl.kernels.state_space` and ``approx = state_space(order = J)``."""


@dataclass(frozen=True)
class KernelParam:
    """One hyperparameter of a kernel.

    Parameters
    ----------
    name : str
        Keyword name, in the model language and the Python constructor.
    default : float or None
        Value a model file gets when the argument is omitted; ``None`` when there is none.
    required : bool
        Whether a Python constructor call must give it.
    ard_allowed : bool
        Whether a vector (one value per active input dimension) is accepted; in Stan such a
        parameter is always passed as a vector.
    support : {"positive", "nonnegative", "real"}
        The values allowed (a name of :data:`gpdsl.semantics.support.SUPPORTS`).
    per_component : bool
        Whether the value is one entry per mixture component: a vector of any length, the same for
        every such parameter of the call (a scalar is one component, or broadcast over the others); in
        Stan always a vector.
    integer : bool
        Whether the value is a constant whole number of at least 1 (a polynomial's degree); in Stan an
        ``int``.
    half_integer : bool
        Whether the value is a constant half-integer ``p + 1/2`` with ``p >= 0`` whole (a Matérn order);
        in Stan a ``real``.
    matrix : bool
        Whether the value is a matrix (a coregionalisation's ``W``, one row per output); in Stan a ``matrix``.
    per_output : bool
        Whether the value is one entry per output, i.e. per row of the kernel's matrix parameter (a scalar
        is shared by all outputs); in Stan always a vector.
    """

    name: str
    default: float | None = None
    required: bool = False
    ard_allowed: bool = False
    support: str = "positive"
    per_component: bool = False
    integer: bool = False
    half_integer: bool = False
    matrix: bool = False
    per_output: bool = False

    @property
    def static(self) -> bool:
        """Whether the value is a constant of the model (a Python number in a kernel, not a pytree leaf)."""
        return self.integer or self.half_integer

    @property
    def vector_allowed(self) -> bool:
        """Whether a vector value is accepted (one per input dimension, component or output)."""
        return self.ard_allowed or self.per_component or self.per_output

    @property
    def max_ndim(self) -> int:
        """The most array dimensions a value may have: 2 for a matrix, 1 for a vector, else 0."""
        return 2 if self.matrix else 1 if self.vector_allowed else 0

    @property
    def stan_type(self) -> str:
        """The type of the argument in the kernel's Stan function: ``matrix``, ``vector``, ``int`` or ``real``."""
        if self.matrix:
            return "matrix"
        return "vector" if self.vector_allowed else "int" if self.integer else "real"


@dataclass(frozen=True)
class StanCall:
    """A kernel leaf in Stan: a call of a ``stan_templates/kernels.stan`` function.

    The call is ``function(x1, x2, <params>[, same_points])`` on two point sets; each parameter is passed
    as its :attr:`KernelParam.stan_type`: a vector (``rep_vector`` of a scalar value) where it may be
    one (ARD, per component or per output), a matrix for a matrix, an int for an integer, else a real.
    A kernel with kernel-valued arguments (:attr:`KernelSpec.kernels`) receives their matrices
    ``K(x1, x2)`` as ``matrix`` arguments after the point sets, before its hyperparameters.

    Parameters
    ----------
    function : str
        Name of the Stan function.
    params : tuple of str
        Hyperparameters passed after the point sets, in order.
    same_points : bool
        Whether a final int argument says that both point sets are the same (1 for ``K(X, X)``).
    code : str
        The Stan definition of ``function`` for a kernel added at run time
        (:func:`gpdsl.kernels.register_kernel`), which the code generator puts in the functions block
        of a program that calls it; empty for a function of ``stan_templates/kernels.stan``.
    warps_points : bool
        Whether the function maps a point set to a point set (``array[] vector function(array[] vector x,
        <params>)``) on which the kernel's sub-kernel is evaluated, rather than returning a matrix.
    """

    function: str
    params: tuple[str, ...]
    same_points: bool = False
    code: str = ""
    warps_points: bool = False


@dataclass(frozen=True)
class KernelSpec:
    """A kernel of the language.

    Parameters
    ----------
    name : str
        Name in model files and in :data:`gpdsl.kernels.KERNELS` (``"rbf"``).
    params : tuple of KernelParam
        Hyperparameters in positional order.
    stan : tuple of StanCall
        Stan spellings; the first whose parameters are all given is used (:meth:`stan_call`).
    exclusive : tuple of tuple of str
        Groups of alternative parameters: a model file gives at most one member (the first with a
        default is filled in when none is given), a Python call exactly one.
    doc : str
        The covariance function, as written in the docs.
    input_dim : int or None
        The number of input columns the kernel acts on, when it is fixed (None for any).
    kernels : tuple of str
        Names of kernel-valued arguments (a combinator such as ``changepoint``), which come first,
        before the hyperparameters, positionally or by keyword.
    index_input : bool
        Whether the kernel acts on an output index: its input is an ``int`` data array declared with
        ``<lower=1, upper=P>``, ``P`` the rows of its matrix parameter.
    spectral_density : tuple of StanCall
        The Stan spellings of the kernel's spectral density ``S(omega)``, for a stationary kernel that has one
        (empty otherwise): ``function(matrix omega, <params>)`` returns the vector of ``S`` at the rows of
        ``omega`` (angular frequencies, one column per input dimension), with ``k(tau) = (2 pi)^-D int S(omega)
        exp(i omega.tau) d omega``; chosen as :attr:`stan` is (:meth:`spectral_call`). The Hilbert-space
        approximation (:mod:`gpdsl.ir.approximations`) needs it.
    state_space : StanCall or None
        For a kernel of a scalar input that is the covariance of a linear SDE (``has_state_space`` on its class,
        :mod:`gpdsl.kernels.state_space`): the stem ``<function>`` of its Stan functions ``<function>_feedback``,
        ``<function>_stationary`` (each ``(int order, <params>)``, returning ``F`` and ``P_inf``) and
        ``<function>_measurement(int order)`` (``H``, a one-row matrix), ``order`` the harmonics of a periodic
        kernel's series. The state-space approximation (``approx = state_space``) needs it.
    state_size : tuple of int
        ``(a, b)``: the state of the kernel's state-space form has ``a + b order`` components (:meth:`state_dimension`).
    """

    name: str
    params: tuple[KernelParam, ...]
    stan: tuple[StanCall, ...]
    exclusive: tuple[tuple[str, ...], ...] = ()
    doc: str = ""
    input_dim: int | None = None
    kernels: tuple[str, ...] = ()
    index_input: bool = False
    spectral_density: tuple[StanCall, ...] = ()
    state_space: StanCall | None = None
    state_size: tuple[int, int] = (0, 0)

    def param(self, name: str) -> KernelParam | None:
        """The hyperparameter called ``name``, or None."""
        return next((p for p in self.params if p.name == name), None)

    @property
    def positional(self) -> tuple[str, ...]:
        """Argument names in the order positional arguments bind to them: kernels, then hyperparameters."""
        return self.kernels + tuple(p.name for p in self.params)

    @property
    def required(self) -> frozenset[str]:
        """Names a Python call must always give (kernel-valued arguments included)."""
        return frozenset(self.kernels) | frozenset(p.name for p in self.params if p.required)

    def stan_call(self, given: Collection[str]) -> StanCall | None:
        """The first Stan spelling whose parameters are all in ``given``; None if there is none."""
        return next((call for call in self.stan if set(call.params) <= set(given)), None)

    def spectral_call(self, given: Collection[str]) -> StanCall | None:
        """The first spectral-density spelling whose parameters are all in ``given``; None if there is none."""
        return next((call for call in self.spectral_density if set(call.params) <= set(given)), None)

    def state_dimension(self, order: int = PERIODIC_ORDER) -> int:
        """The number of components of the kernel's state-space form with ``order`` harmonics of a periodic series."""
        return self.state_size[0] + self.state_size[1] * order

    def verify_required(self, given: Iterable[str], span: Span | None = None) -> None:
        """Raise unless every :attr:`required` parameter is in ``given``.

        Raises
        ------
        ModelCheckError
            Naming the first missing parameter in alphabetical order.
        """
        missing = sorted(self.required - set(given))
        if missing:
            raise ModelCheckError(f"{self.name}() is missing required parameter '{missing[0]}'", span)

    def bind(self, n_positional: int, keywords: Iterable[str], span: Span | None = None) -> tuple[str, ...]:
        """Check a Python call's argument names and return the parameter each argument binds to.

        Parameters
        ----------
        n_positional : int
            Number of positional arguments, which bind in :attr:`positional` order.
        keywords : iterable of str
            Keyword argument names, in call order.
        span : Span, optional
            Location of the call, attached to any error.

        Returns
        -------
        tuple of str
            Parameter names: the positional ones, then the keywords.

        Raises
        ------
        ModelCheckError
            Too many positional arguments, unknown or repeated names, a missing required
            parameter, or an exclusive group with none or several members given.
        """
        keywords = tuple(keywords)
        order = self.positional
        if n_positional > len(order):
            raise ModelCheckError(
                f"{self.name}() takes at most {len(order)} positional arguments ({', '.join(order)}), "
                f"got {n_positional}",
                span,
            )
        bound = list(order[:n_positional])
        for name in keywords:
            if name not in order:
                hint = did_you_mean(name, order) or f"accepted: {', '.join(order)}"
                raise ModelCheckError(f"{self.name}() has no parameter '{name}'", span, hint)
            if name in bound:
                raise ModelCheckError(f"{self.name}() got parameter '{name}' more than once", span)
            bound.append(name)
        self.verify_required(bound, span)
        for group in self.exclusive:
            given = [n for n in group if n in bound]
            if len(given) != 1:
                raise ModelCheckError(
                    f"{self.name}() needs exactly one of {', '.join(group)}; got "
                    + (", ".join(given) if given else "none"),
                    span,
                )
        return tuple(bound)


_VARIANCE = KernelParam("variance", default=1.0)
_LENGTHSCALE = KernelParam("lengthscale", default=1.0, required=True, ard_allowed=True)
_FIXED_VARIANCE = KernelParam("variance")


def _lengthscale_kernel(name: str, doc: str, state_size: int) -> KernelSpec:
    """A kernel of ``variance`` and a (required in Python) ``lengthscale``, in Stan ``<name>_kernel``, with its
    spectral density ``<name>_spd``."""
    return KernelSpec(name, (_VARIANCE, _LENGTHSCALE),
                      stan=(StanCall(f"{name}_kernel", ("variance", "lengthscale")),), doc=doc,
                      spectral_density=(StanCall(f"{name}_spd", ("variance", "lengthscale")),),
                      state_space=StanCall(f"{name}_ss", ("variance", "lengthscale")), state_size=(state_size, 0))


KERNEL_SPECS: dict[str, KernelSpec] = {k.name: k for k in [
    KernelSpec("rbf", (_VARIANCE, KernelParam("lengthscale", default=1.0, ard_allowed=True),
                       KernelParam("inv_ls2", ard_allowed=True)),
               stan=(StanCall("rbf_kernel", ("variance", "lengthscale")),
                     StanCall("rbf_inv_ls2_kernel", ("variance", "inv_ls2"))),
               exclusive=(("lengthscale", "inv_ls2"),),
               doc="variance * exp(-r^2 / 2), r^2 = sum_d (x_d - x'_d)^2 / lengthscale_d^2 "
                   "= sum_d inv_ls2_d (x_d - x'_d)^2",
               spectral_density=(StanCall("rbf_spd", ("variance", "lengthscale")),
                                 StanCall("rbf_inv_ls2_spd", ("variance", "inv_ls2")))),
    _lengthscale_kernel("matern12", "variance * exp(-r)", 1),
    _lengthscale_kernel("matern32", "variance * (1 + sqrt(3) r) exp(-sqrt(3) r)", 2),
    _lengthscale_kernel("matern52", "variance * (1 + sqrt(5) r + 5 r^2 / 3) exp(-sqrt(5) r)", 3),
    KernelSpec("periodic", (_VARIANCE, _LENGTHSCALE,
                            KernelParam("period", default=1.0, required=True, ard_allowed=True)),
               stan=(StanCall("periodic_kernel", ("variance", "lengthscale", "period")),),
               doc="variance * exp(-1/2 sum_d sin^2(pi (x_d - x'_d) / period_d) / lengthscale_d^2) "
                   "(GPy's StdPeriodic; MacKay's form with length-scale 2 * lengthscale)",
               state_space=StanCall("periodic_ss", ("variance", "lengthscale", "period")), state_size=(1, 2)),
    KernelSpec("linear", (KernelParam("variance", default=1.0, ard_allowed=True),),
               stan=(StanCall("linear_kernel", ("variance",)),),
               doc="sum_d variance_d x_d x'_d"),
    KernelSpec("white", (_FIXED_VARIANCE,),
               stan=(StanCall("white_kernel", ("variance",), same_points=True),),
               doc="variance on the diagonal of K(X, X) (same index), zero between different sets"),
    KernelSpec("constant", (_FIXED_VARIANCE,),
               stan=(StanCall("constant_kernel", ("variance",)),),
               doc="variance", state_space=StanCall("constant_ss", ("variance",)), state_size=(1, 0)),
    KernelSpec("same", (),
               stan=(StanCall("same_kernel", ()),),
               doc="1 when two points agree in every active input (e.g. the same sequence label), else 0: "
                   "times a kernel over time, a block-diagonal covariance with one block per group"),
    KernelSpec("mlp", (_VARIANCE, KernelParam("weight_variance", default=1.0, ard_allowed=True),
                       KernelParam("bias_variance", default=1.0)),
               stan=(StanCall("mlp_kernel", ("variance", "weight_variance", "bias_variance")),),
               doc="variance * 2/pi * asin((w x.x' + b) / sqrt((w x.x + b + 1)(w x'.x' + b + 1))), "
                   "the arc-sine (MLP) kernel, w = weight_variance, b = bias_variance"),
    KernelSpec("rational_quadratic", (_VARIANCE, _LENGTHSCALE, KernelParam("alpha", default=1.0)),
               stan=(StanCall("rational_quadratic_kernel", ("variance", "lengthscale", "alpha")),),
               doc="variance * (1 + r^2 / (2 alpha))^(-alpha), r as for rbf: a scale mixture of rbf kernels "
                   "(Rasmussen & Williams 2006, eq. 4.19), rbf as alpha -> inf"),
    KernelSpec("cosine", (_VARIANCE, KernelParam("period", default=1.0, required=True, ard_allowed=True)),
               stan=(StanCall("cosine_kernel", ("variance", "period")),),
               doc="variance * cos(2 pi sum_d (x_d - x'_d) / period_d): a sinusoid of random phase along "
                   "the frequency vector 1 / period"),
    KernelSpec("polynomial", (KernelParam("variance", default=1.0, ard_allowed=True),
                              KernelParam("bias", default=1.0, support="nonnegative"),
                              KernelParam("degree", required=True, integer=True)),
               stan=(StanCall("polynomial_kernel", ("variance", "bias", "degree")),),
               doc="(sum_d variance_d x_d x'_d + bias)^degree, degree a whole number; "
                   "linear(variance) is polynomial(variance, 0, 1)"),
    KernelSpec("spectral_mixture", (KernelParam("weights", required=True, per_component=True),
                                    KernelParam("means", required=True, per_component=True, support="real"),
                                    KernelParam("scales", required=True, per_component=True)),
               stan=(StanCall("spectral_mixture_kernel", ("weights", "means", "scales")),),
               doc="sum_q weights_q exp(-2 pi^2 scales_q^2 tau^2) cos(2 pi means_q tau), tau = x - x' "
                   "over one input column: Q Gaussians in frequency, with means means_q and standard "
                   "deviations scales_q (Wilson & Adams 2013)",
               input_dim=1),
    KernelSpec("matern", (KernelParam("nu", required=True, half_integer=True), _VARIANCE, _LENGTHSCALE),
               stan=(StanCall("matern_kernel", ("nu", "variance", "lengthscale")),),
               doc="variance exp(-s) p!/(2p)! sum_{i=0}^{p} (p+i)!/(i!(p-i)!) (2s)^(p-i), s = sqrt(2 nu) r, "
                   "r as for rbf: the Matérn kernel of half-integer order nu = p + 1/2 (Rasmussen & Williams "
                   "eq. 4.16); matern(0.5), matern(1.5), matern(2.5) are matern12, matern32, matern52",
               spectral_density=(StanCall("matern_spd", ("nu", "variance", "lengthscale")),)),
    KernelSpec("changepoint", (KernelParam("location", required=True, support="real"),
                               KernelParam("steepness", default=1.0)),
               stan=(StanCall("changepoint_kernel", ("location", "steepness")),),
               doc="(1 - s(x)) before(x, x') (1 - s(x')) + s(x) after(x, x') s(x'), "
                   "s(x) = 1 / (1 + exp(-steepness (x - location))) over one input column",
               input_dim=1, kernels=("before", "after")),
    KernelSpec("warp", (KernelParam("a", default=1.0, ard_allowed=True),
                        KernelParam("b", default=1.0, ard_allowed=True)),
               stan=(StanCall("kumaraswamy_warp", ("a", "b"), warps_points=True),),
               doc="kernel(w(x), w(x')), w(x)_d = 1 - (1 - x_d^a_d)^b_d (the Kumaraswamy CDF) on inputs in "
                   "[0, 1]", kernels=("kernel",)),
    KernelSpec("gibbs", (_VARIANCE, KernelParam("lengthscale", default=1.0, required=True),
                         KernelParam("slope", default=0.0, support="real")),
               stan=(StanCall("gibbs_kernel", ("variance", "lengthscale", "slope")),),
               doc="variance sqrt(2 l(x) l(x') / (l(x)^2 + l(x')^2)) exp(-(x - x')^2 / (l(x)^2 + l(x')^2)), "
                   "l(x) = lengthscale exp(slope x) over one input column (Gibbs 1997; Rasmussen & Williams "
                   "eq. 4.32)", input_dim=1),
    KernelSpec("coregion", (KernelParam("W", required=True, matrix=True, support="real"),
                            KernelParam("kappa", required=True, per_output=True)),
               stan=(StanCall("coregion_kernel", ("W", "kappa")),),
               doc="B[i, j] with B = W W' + diag(kappa), i and j the output indices (1..P) of the two points: "
                   "the intrinsic coregionalisation model (GPy's Coregionalize); W is P x R, kappa one per output",
               input_dim=1, index_input=True),
    KernelSpec("coregion_corr", (KernelParam("L", required=True, matrix=True, support="real"),
                                 KernelParam("sigma", required=True, per_output=True)),
               stan=(StanCall("coregion_corr_kernel", ("L", "sigma")),),
               doc="B[i, j] with B = diag(sigma) L L' diag(sigma), i and j the output indices (1..P): the "
                   "coregionalisation by a correlation matrix L L' (L a cholesky_factor_corr[P], e.g. with an "
                   "lkj_corr_cholesky prior) and each output's standard deviation sigma",
               input_dim=1, index_input=True),
]}
"""Every kernel of the language by name, in the order error hints list them."""


def kernel_spec(name: str, span: Span | None = None) -> KernelSpec:
    """Look up a kernel by name.

    Parameters
    ----------
    name : str
        Model-language name, e.g. ``"rbf"``.
    span : Span, optional
        Location of the call, attached to the error.

    Raises
    ------
    ModelCheckError
        No kernel has this name; the hint suggests the closest one.
    """
    if name in KERNEL_SPECS:
        return KERNEL_SPECS[name]
    hint = did_you_mean(name, KERNEL_SPECS) or f"known kernels: {', '.join(KERNEL_SPECS)}"
    raise ModelCheckError(f"unknown kernel '{name}'", span, hint)
