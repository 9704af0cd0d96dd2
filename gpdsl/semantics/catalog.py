"""What the language knows by name: distributions, likelihoods, kernels and functions.

Each entry states its parameterisation; ``docs/language.md`` is generated from the same facts. The
likelihoods' entries are read from their objects in :mod:`gpdsl.likelihoods`, the kernels' from the
table of :mod:`gpdsl.kernel_table`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from gpdsl.kernel_table import KERNEL_SPECS, KernelSpec
from gpdsl.likelihoods import LIKELIHOODS, Likelihood


@dataclass(frozen=True)
class DistributionSpec:
    """A distribution usable as a prior (on parameters or latent values) or a likelihood.

    Parameters
    ----------
    name : str
        Name in model files.
    params : tuple of str
        Parameter names in positional order.
    defaults : dict
        Default values of optional parameters.
    support : {"real", "positive", "bounded", "binary", "count", "ordinal"}
        Support of the variate; "bounded" takes its bounds from the ``lower`` and ``upper`` arguments.
    arg_support : dict
        Support of each argument by name, a key of :data:`gpdsl.semantics.support.SUPPORTS`; an argument
        not listed is real.
    ordered : tuple of str, optional
        Two arguments that must be strictly increasing, elementwise (``("lower", "upper")``).
    likelihood : bool
        Usable on data.
    prior : bool
        Usable on parameters and latent values.
    doc : str
        The density, as written in the docs.
    """

    name: str
    params: tuple[str, ...]
    defaults: dict = field(default_factory=dict)
    support: str = "real"
    likelihood: bool = False
    prior: bool = True
    doc: str = ""
    arg_support: dict = field(default_factory=dict)
    ordered: tuple[str, str] | None = None

    def argument_support(self, name: str) -> str:
        """The support of the argument ``name``: ``"real"`` unless the table says otherwise."""
        return self.arg_support.get(name, "real")


_PRIORS = [
    DistributionSpec("normal", ("mu", "sigma"), arg_support={"sigma": "positive"},
                     doc="mean mu, standard deviation sigma"),
    DistributionSpec("lognormal", ("mu", "sigma"), support="positive", arg_support={"sigma": "positive"},
                     doc="log(x) ~ normal(mu, sigma)"),
    DistributionSpec("gamma", ("shape", "rate"), support="positive",
                     arg_support={"shape": "positive", "rate": "positive"},
                     doc="density rate^shape / Gamma(shape) x^(shape-1) exp(-rate x); mean shape/rate"),
    DistributionSpec("inv_gamma", ("shape", "scale"), support="positive",
                     arg_support={"shape": "positive", "scale": "positive"},
                     doc="1/x ~ gamma(shape, rate=scale); mean scale/(shape-1)"),
    DistributionSpec("half_normal", ("sigma",), support="positive", arg_support={"sigma": "positive"},
                     doc="|z| with z ~ normal(0, sigma); needs <lower=0>"),
    DistributionSpec("student_t", ("nu", "mu", "sigma"), arg_support={"nu": "positive", "sigma": "positive"},
                     doc="degrees of freedom nu, location mu, scale sigma"),
    DistributionSpec("uniform", ("lower", "upper"), support="bounded", ordered=("lower", "upper"),
                     doc="uniform on (lower, upper); the bounds are implied if not declared"),
    DistributionSpec("scaled_sigmoid_normal", ("lower", "upper", "mu", "sigma"),
                     defaults={"mu": 0.0, "sigma": 1.5}, support="bounded", arg_support={"sigma": "positive"},
                     ordered=("lower", "upper"),
                     doc="x = lower + (upper - lower) * inv_logit(z), z ~ normal(mu, sigma) "
                         "(Tegner et al. 2018, eq. 9); defaults mu = 0, sigma = 1.5"),
]


def _likelihood_spec(likelihood: Likelihood, prior: DistributionSpec | None) -> DistributionSpec:
    """The catalog entry of a likelihood; a prior of the same name (and parameters) stays one too."""
    if prior is not None:
        return replace(prior, likelihood=True)
    return DistributionSpec(likelihood.name, likelihood.params, support=likelihood.support, likelihood=True,
                            prior=False, doc=likelihood.doc, arg_support=dict(likelihood.param_support))


DISTRIBUTIONS: dict[str, DistributionSpec] = {d.name: d for d in _PRIORS}
DISTRIBUTIONS.update({name: _likelihood_spec(likelihood, DISTRIBUTIONS.get(name))
                      for name, likelihood in LIKELIHOODS.items()})
"""Every distribution by name: the priors, then the likelihoods not already listed as priors."""

EXTERNAL = "external"
"""``external("module:function", args...)``: a likelihood computed by user Python code."""


KERNELS: dict[str, KernelSpec] = KERNEL_SPECS
"""Every kernel by name: the table of :mod:`gpdsl.kernel_table`."""

FUNCTIONS: dict[str, str] = {
    "sqrt": "square root", "exp": "exponential", "log": "natural logarithm",
    "inv_sqrt": "1 / sqrt(x)", "inv": "1 / x", "square": "x^2", "softplus": "log(1 + exp(x))",
    "inv_logit": "1 / (1 + exp(-x))", "log1p_exp": "log(1 + exp(x)), as softplus", "abs": "|x|",
    "Phi": "standard normal CDF",
}
"""Elementwise functions of expressions."""

SPECIAL_FUNCTIONS = {"gp", "project", EXTERNAL}

CONSTANTS = {"pi": math.pi}


def known_callables() -> list[str]:
    """Every name that may be called in a model file (for 'did you mean' suggestions)."""
    return sorted(set(DISTRIBUTIONS) | set(KERNELS) | set(FUNCTIONS) | SPECIAL_FUNCTIONS)
