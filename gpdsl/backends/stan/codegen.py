"""The Stan code generator: a checked gpdsl model to a Stan program.

Every density is added with ``target += ..._lpdf(...)`` (never ``~``), so the program's log density
keeps all normalising constants and can be compared with the JAX lowering term by term.

How gpdsl variables become Stan variables (see :class:`StanVariable`):

* data: the same name in the ``data`` block (renamed with a trailing ``_`` if it is a Stan keyword or
  clashes with a library function); GP inputs are also converted to point sets (``array[] vector``)
  in ``transformed data``.
* parameters: the same name in ``parameters``, with the IR's bounds (vector bounds that differ per
  entry become ``<name>_lower`` / ``<name>_upper`` in ``transformed data``).
* latent values with an ordinary prior (``X ~ normal(0, 1)``): a Stan parameter of the same name.
* latent GP values, marginalised: when the latent's only use is the mean of a ``normal`` likelihood
  on data of the same shape with a scalar scale, ``y ~ normal(f, s)`` with ``f ~ gp(X, k)`` becomes
  ``y ~ multi_normal_cholesky(0, cholesky_decompose(K + (s^2 + GP_JITTER) I))`` (each column of a
  matrix ``Y`` independently); the latent has no Stan variable. The structural fact is
  :attr:`gpdsl.ir.structure.GPNode.marginalised_whole`.
* Student-t process values (``f ~ student_t_process(nu, X, k); y ~ normal(f, s)``, the only use the checker admits):
  always integrated out, ``target += multi_student_t_lpdf(y | nu, 0, (nu - 2) / nu * (K + (s^2 + GP_JITTER) I))``,
  the noise inside the process's kernel and the covariance (not the scale) ``K + s^2 I``, as the JAX lowering; its
  generated quantities are the exact leave-one-out Student-t densities and a replicate from the conditional MVT.
* latent GP values, otherwise: non-centred. A parameter ``<name>_raw`` of the latent's shape with a
  ``std_normal`` prior, and ``<name> = cholesky_decompose(K + GP_JITTER I) * <name>_raw`` in
  ``transformed parameters`` (column-wise for matrices). Two-level inputs ``gp((t, X), k)`` with
  ``array[T] vector[N] f`` flatten the T * N points (point (i, n) at (i - 1) * N + n): ``f_raw`` is a
  ``vector[T * N]`` and ``f[i]`` its i-th segment of length N. The Stan density is then over
  ``<name>_raw``: log p_stan = log p_gpdsl(f) + sum(log(diag(L))) with L the Cholesky factor.
* latent GP values with the Hilbert-space approximation (``f ~ gp(x, k, approx = hsgp(m = 30, c = 1.5))``), as brms
  generates them: the basis in ``transformed data`` (index tuples, centre and half-widths ``L`` of the box,
  frequencies ``omega`` and eigenfunctions ``PHI`` at the points; template ``stan_templates/hsgp.stan``), a
  parameter ``<name>_z`` of the ``prod(m)`` basis weights with a ``std_normal`` prior, and ``<name> = PHI *
  (sqrt(S(omega)) .* <name>_z)`` (plus the mean) in ``transformed parameters``, ``S`` the kernel's spectral
  density (its table entry's ``spectral_density`` spelling; sums and scalings add and scale them). Never
  integrated out, whatever its likelihood.
* an HSGP over latent inputs ``X`` (a GPLVM, :mod:`gpdsl.ir.latent_hsgp`): the exact GP of the feature kernel
  ``A A'``, ``A = PHI(X) diag(sqrt(S))`` on the box from ``X``'s prior (box and frequencies in ``transformed data``,
  the eigenfunctions of the sampled points computed where they are used). Integrated out under ``normal(F, s)`` by
  the Woodbury identity (template ``hsgp_normal_marginal_lpdf``), never forming ``A A'``; otherwise its basis weights
  ``<name>_z`` (``matrix[M, D]`` for a matrix ``F``) with a ``std_normal`` prior and ``F = A <name>_z``.

Generated quantities: for every observed variable ``y`` of a likelihood, ``log_lik_<y>`` (reals, ``y``'s
shape) and ``<y>_rep`` (``y``'s type): each observation's log density and a replicate drawn from the
likelihood (its :mod:`gpdsl.likelihoods` ``stan`` and ``stan_rng`` spellings, element by element). Where
the GP is integrated out (``y ~ normal(f, s)`` above) ``log_lik_<y>`` holds the exact leave-one-out
predictive log densities ``log p(y_i | y_-i, theta)`` and ``<y>_rep`` a draw from the posterior predictive
of ``y`` given ``theta`` (templates ``normal_loo_log_densities`` and ``normal_gp_replicate_rng``; each
column of a matrix ``Y`` on its own).

Missing outcomes (``generate_stan(model, missing=("y",))``, :mod:`gpdsl.data.missing`): an outcome ``y`` with
missing entries gets two data variables, its number of observed entries ``N_obs_y`` and their indices
``array[N_obs_y] int y_obs_idx``; its likelihood is over ``y[y_obs_idx]`` (``f[y_obs_idx]``, and an integrated-out
GP's covariance ``K[y_obs_idx, y_obs_idx]``); ``log_lik_<y>`` runs over the observed entries alone and ``<y>_rep``
over every entry, so that its draws at the missing ones are imputations (where the GP is integrated out, from
``f`` given the observed outcomes: template ``normal_gp_impute_rng``). :meth:`StanProgram.stan_data` passes a
placeholder in the support of the likelihood for each missing entry.
"""

from __future__ import annotations

import functools
import itertools

from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Mapping

import numpy as np

import gpdsl
from gpdsl.backends.stan.expressions import (
    ATOM,
    PRODUCT,
    SUM,
    ExpressionTranslator,
    format_number,
)
from gpdsl.backends.stan.fragments import INDENT, StanBlocks, function_library
from gpdsl.errors import DataError, MethodError
from gpdsl.ir import nodes as ir
from gpdsl.ir.approximations import HSGP, STATE_SPACE
from gpdsl.ir.latent_hsgp import basis_sizes, is_latent_hsgp, latent_box, latent_inputs
from gpdsl.ir.periodic_series import has_series, series_period_expr, series_size, sum_terms
from gpdsl.ir.state_space import series_layout
from gpdsl.ir.structure import GPNode, expression_refs, gp_nodes, statement_refs, student_t_process_nodes
from gpdsl.kernel_table import StanCall
from gpdsl.likelihoods import LIKELIHOODS, capability
from gpdsl.numerics import GP_JITTER
from gpdsl.priors import PRIORS
from gpdsl.semantics import catalog
from gpdsl.semantics.constants import constant_vector
from gpdsl.ir.types import Dim, VarType, is_label_array

STAN_RESERVED = frozenset("""
    for in while repeat until if then else true false target functions model data parameters
    quantities transformed generated profile return break continue print reject fatal_error void
    int real complex vector row_vector matrix complex_vector complex_row_vector complex_matrix array
    tuple lower upper offset multiplier ordered positive_ordered simplex unit_vector
    sum_to_zero_vector cholesky_factor_corr cholesky_factor_cov corr_matrix cov_matrix
    column_stochastic_matrix row_stochastic_matrix jacobian auto struct export extern static
""".split())
"""Names a gpdsl variable cannot keep in Stan."""


@dataclass(frozen=True)
class StanVariable:
    """How one gpdsl variable appears in the Stan program.

    Parameters
    ----------
    name : str
        The gpdsl name.
    kind : {"data", "parameter", "latent_parameter", "non_centred", "hsgp", "state_space", "marginalised"}
        ``latent_parameter`` is a latent with an ordinary prior, sampled as a Stan parameter; ``hsgp`` a latent GP
        with the Hilbert-space approximation, computed from its basis weights ``raw_name``; ``state_space`` a sampled
        state-space latent GP, computed from its innovations ``raw_name`` by the state recursion.
    stan_name : str or None
        Its Stan name (``data``, ``parameters`` or ``transformed parameters``); None if marginalised.
    block : str or None
        The Stan block declaring ``stan_name``.
    raw_name : str or None
        For ``non_centred`` and ``hsgp``: the Stan parameter it is computed from (``std_normal``; of a centred HSGP,
        ``hsgp(centred = 1)``, the basis coefficients with prior ``normal(0, sqrt(S))``).
    flattened : bool
        For ``non_centred`` over two-level inputs: ``raw_name`` is one vector over all T * N points.
    whitened : str or None
        For a centred HSGP: the transformed parameter of its standard normal weights (``raw_name`` otherwise).
    """

    name: str
    kind: str
    stan_name: str | None
    block: str | None
    raw_name: str | None = None
    flattened: bool = False
    whitened: str | None = None

    @property
    def weights(self) -> str | None:
        """The Stan name of the standard normal weights (an HSGP's or a state-space GP's innovations)."""
        return self.whitened or self.raw_name


@dataclass(frozen=True)
class StanProgram:
    """A generated Stan program.

    Parameters
    ----------
    code : str
        The program text.
    parameter_names : tuple of str
        Names in the Stan ``parameters`` block, in order.
    variables : dict of str to StanVariable
        Every gpdsl data, parameter and latent variable, by gpdsl name.
    warnings : tuple of str
        Messages naming the parameters Stan gives an improper flat prior because the model has none.
    jitter : float
        The diagonal jitter of latent and marginal covariances (:data:`gpdsl.numerics.GP_JITTER`).
    log_likelihood : dict of str to str
        The generated quantity holding each observed variable's pointwise log-likelihood, by gpdsl name.
    replicates : dict of str to str
        The generated quantity holding each observed variable's replicate, by gpdsl name.
    """

    code: str
    parameter_names: tuple[str, ...]
    variables: dict[str, StanVariable]
    warnings: tuple[str, ...]
    jitter: float = GP_JITTER
    log_likelihood: dict[str, str] = field(default_factory=dict)
    replicates: dict[str, str] = field(default_factory=dict)
    observed_indices: dict[str, tuple[str, str]] = field(default_factory=dict)

    def stan_data(self, model: ir.Model, data: Mapping[str, np.ndarray]) -> dict:
        """The Stan data dictionary of ``data`` for this program's model (see :func:`stan_data`), with the
        count and indices of each missing-outcome variable's observed entries, and a placeholder in the
        support of its likelihood at each missing entry.

        Raises
        ------
        DataError
            An outcome has missing entries this program was not generated for.
        """
        from gpdsl.data.missing import observed_masks

        masks = observed_masks(model, data)
        unexpected = [name for name in masks if name not in self.observed_indices]
        if unexpected:
            raise DataError(f"data '{unexpected[0]}' has missing values (NaN), which this Stan program does not "
                            "take: generate it with missing=" + repr(tuple(masks)))
        filled = dict(data)
        placeholders = {s.target.name: LIKELIHOODS[s.distribution.name].placeholder
                        for s in model.likelihoods() if isinstance(s, ir.LikelihoodStatement)}
        counts = {}
        for name, (count, indices) in self.observed_indices.items():
            mask = masks.get(name, np.ones(np.shape(data[name]), dtype=bool))
            filled[name] = np.where(mask, data[name], placeholders[name])
            counts[count] = int(mask.sum())
            counts[indices] = [int(i) + 1 for i in np.flatnonzero(mask)]
        return {**stan_data(model, filled), **counts}


def generate_stan(model: ir.Model, missing=()) -> StanProgram:
    """Generate the Stan program of a checked model.

    Parameters
    ----------
    model : gpdsl.ir.nodes.Model
        The typed IR from the checker.
    missing : collection of str
        Outcomes with missing entries (see the module docstring): vectors or one-dimensional arrays observed
        whole by one likelihood outside loops (:func:`gpdsl.data.missing.verify_missing_outcomes`).

    Returns
    -------
    StanProgram

    Raises
    ------
    MethodError
        If Stan cannot express the model (an ``external`` likelihood, a latent with both a GP and
        another distribution, inputs with more than two levels).
    """
    return _Generator(model, missing).run()


@dataclass(frozen=True)
class HSGPTransformedData:
    """The transformed data of an HSGP latent: the number of basis functions, the frequencies ``omega`` (M x D)
    and the basis functions at the points ``phi`` (N x M), by Stan name. A kernel with periodic terms has ``parts``:
    per part its terms (positions in the kernel's sum) and ``omega`` (the Laplacian part's) or a :class:`SeriesPart`."""

    size: int
    omega: str
    phi: str
    parts: tuple = ()


@dataclass(frozen=True)
class SeriesPart:
    """A periodic term's cosine series in an HSGP basis: its harmonics and whether it keeps its constant."""

    order: int
    constant: bool


@dataclass(frozen=True)
class StateSpaceData:
    """The transformed data of a state-space GP, by Stan name: its number of points, the sort of its times, the steps
    between the sorted times (the distinct steps and each point's among them, two arguments of the template
    functions), its measurement row, the mask of observed outputs and the outputs (0 where missing)."""

    n: str
    order: str
    steps: str
    measurement: str
    mask: str
    outputs: str


def stan_name(name: str) -> str:
    """The Stan name of a gpdsl variable: itself unless reserved in Stan or by the function library."""
    if name in STAN_RESERVED or name in function_library() or name.endswith("__"):
        return name.rstrip("_") + "_"
    return name


def stan_data(model: ir.Model, data: Mapping[str, np.ndarray]) -> dict:
    """Convert validated data to the dictionary Stan expects.

    Integers become Python ints, reals floats, containers nested lists shaped as declared (so a
    ``matrix[N, 1]`` accepts a length-N vector and ``array[T] matrix[N, D]`` a (T, N, D) array).

    Parameters
    ----------
    model : gpdsl.ir.nodes.Model
        The model.
    data : dict of str to array_like
        A value for every data variable of the model, by gpdsl name.

    Returns
    -------
    dict
        By Stan name, JSON-serialisable (PyStan and CmdStan both accept it).

    Raises
    ------
    DataError
        A variable is missing, not integral where an int is declared, or has the wrong size.
    """
    sizes: dict[str, int] = {}
    out: dict = {}
    for name, var in model.data.items():
        if name not in data:
            raise DataError(f"no value for data '{name}'")
        value = np.asarray(data[name])
        if var.type.base == "int":
            if value.size and not np.all(np.mod(value, 1) == 0):
                raise DataError(f"data '{name}' is declared int but has non-integer values")
            value = value.astype(np.int64)
        else:
            value = value.astype(np.float64)
        shape = var.type.concrete_shape(sizes)
        if value.size != int(np.prod(shape, dtype=np.int64)):
            raise DataError(f"data '{name}' has {value.size} values but {var.type.describe()} needs "
                            f"shape {shape}")
        value = value.reshape(shape)
        if not shape and var.type.base == "int":
            sizes[name] = int(value)
        out[stan_name(name)] = value.item() if not shape else value.tolist()
    return out


def _stan_dim(d: Dim | str) -> str:
    if isinstance(d, int):
        return str(d)
    return " + ".join(stan_name(part) if not part.isdigit() else part for part in d.split("+"))


def _likelihood_density(name: str, y: str, vectorised: bool, args: dict[str, tuple[str, bool]]) -> str:
    """The Stan spelling of a likelihood's summed log density, from its :mod:`gpdsl.likelihoods` object."""
    spelling = capability(name, "stan")
    if spelling is None:
        raise MethodError(f"the Stan backend has no translation of the distribution '{name}'")
    return spelling(y, args, vectorised)


def _product(dims) -> str:
    texts = [_stan_dim(d) for d in dims]
    return " * ".join(f"({t})" if "+" in t and len(texts) > 1 else t for t in texts) if texts else "1"


def stan_type(t: VarType, lower: str | None = None, upper: str | None = None) -> str:
    """Stan's spelling of a type, e.g. ``array[Q] vector<lower=0>[D]``, with bounds given as text."""
    if t.structure is not None:
        return f"{t.structure}[{_stan_dim(t.dims[0])}]"
    bounds = [f"{k}={v}" for k, v in (("lower", lower), ("upper", upper)) if v is not None]
    inner = "int" if t.base == "int" else {"scalar": "real", "vector": "vector", "matrix": "matrix"}[t.container]
    if bounds:
        inner += "<" + ", ".join(bounds) + ">"
    if t.dims:
        inner += "[" + ", ".join(_stan_dim(d) for d in t.dims) + "]"
    if t.array_dims:
        inner = "array[" + ", ".join(_stan_dim(d) for d in t.array_dims) + "] " + inner
    return inner


def _bound(value: float | str | None) -> str | None:
    if isinstance(value, str):
        return stan_name(value)
    return None if value is None else format_number(value, float(value).is_integer())


def _indented(lines: list[str]) -> list[str]:
    return [INDENT + line for line in lines]


def _loops(variables, dims, lines: list[str]) -> list[str]:
    """``lines`` inside ``for`` loops of ``variables`` over ``1:dim``, the first variable outermost."""
    for var, dim in reversed(list(zip(variables, dims))):
        lines = [f"for ({var} in 1:{_stan_dim(dim)}) {{", *_indented(lines), "}"]
    return lines


def _in_definition_order(statements) -> list:
    """Top-level statements (a loop as one) reordered so that a latent is set before a statement that uses it:
    ``f ~ gp(Z, k); Z ~ gp(X, k)`` sets ``Z`` first. Otherwise source order; the checker refuses cycles."""

    def flattened(statement):
        return [inner for body in statement.body for inner in flattened(body)] if isinstance(
            statement, ir.ForLoop) else [statement]

    defines = [{s.target.name for s in flattened(top) if isinstance(s, ir.GPStatement)} for top in statements]
    uses = [set().union(*(statement_refs(s, indices=True) for s in flattened(top))) - defined
            for top, defined in zip(statements, defines)]
    pending, ordered = list(range(len(statements))), []
    while pending:
        waiting = set().union(*(defines[i] for i in pending))
        ready = next((i for i in pending if not uses[i] & waiting), pending[0])
        pending.remove(ready)
        ordered.append(statements[ready])
    return ordered


class _Generator:
    def __init__(self, model: ir.Model, missing=()):
        self.model = model
        self.missing = tuple(missing)
        self.observed_indices: dict[str, tuple[str, str]] = {}  # outcome -> (its count, its indices)
        self.blocks = StanBlocks()
        self.translate = ExpressionTranslator(stan_name)
        names = set(model.data) | set(model.parameters) | set(model.latents)
        names |= {loop.variable for _, loops in model.walk() for loop in loops}
        self.taken = {stan_name(n) for n in names} | set(function_library())
        self.variables: dict[str, StanVariable] = {}
        self.marginal_of: dict[int, ir.GPStatement] = {}  # id(likelihood) -> its marginalised GP
        self.process_of: dict[int, ir.StudentTProcessStatement] = {}  # id(likelihood) -> its Student-t process
        self.transformed_data: dict[str, str] = {}  # defining expression -> name
        self.parameter_names: list[str] = []
        self.jitter = ""
        self.loop_names: list[str] = []
        self.covariance_name = ""
        self.log_likelihood: dict[str, str] = {}
        self.replicates: dict[str, str] = {}
        self.kernel_functions: set[str] = set()  # functions of run-time kernels already in the functions block
        self.hsgp_bases: dict[str, HSGPTransformedData] = {}  # HSGP latent -> its basis in transformed data

    def loop_variable(self, depth: int) -> str:
        """The generated loop variable at nesting depth ``depth`` (reused by sibling loops)."""
        while len(self.loop_names) <= depth:
            self.loop_names.append(self.fresh(f"i{len(self.loop_names) + 1}"))
        return self.loop_names[depth]

    def fresh(self, base: str) -> str:
        """The first of ``base``, ``base_``, ``base_2``, ``base_3``, ... not taken (never a name ending in
        ``__``, which Stan reserves)."""
        first = [base] if base.endswith("_") else [base, base + "_"]
        numbered = (f"{base.rstrip('_')}_{number}" for number in itertools.count(2))
        name = next(name for name in itertools.chain(first, numbered) if name not in self.taken)
        self.taken.add(name)
        return name

    # ---- driver ------------------------------------------------------------------------------
    def run(self) -> StanProgram:
        self._refuse_unsupported()
        self._classify_latents()
        self.jitter = self.fresh("jitter")
        self.blocks.add("transformed data", f"real {self.jitter} = {format_number(GP_JITTER)};")
        self._data_block()
        self._parameters_block()
        self._transformed_parameters_block()
        self.blocks.add("model", *self._tree(self.model.statements, self._model_statement))
        self._generated_quantities_block()
        header = [f"// generated by gpdsl {gpdsl.__version__}",
                  f"// model: {Path(self.model.source.name).name} sha256 {self.model.source_hash}"]
        warnings = tuple(f"parameter '{name}' has no prior: Stan gives it an improper flat prior"
                         for name in self.model.unpriored_parameters())
        order = [*self.model.data, *self.model.parameters, *self.model.latents]
        variables = {name: self.variables[name] for name in order}
        return StanProgram(self.blocks.render(header), tuple(self.parameter_names), variables, warnings,
                           log_likelihood=self.log_likelihood, replicates=self.replicates,
                           observed_indices=self.observed_indices)

    def _refuse_unsupported(self):
        for statement, _ in self.model.walk():
            if isinstance(statement, ir.ExternalLikelihood):
                raise MethodError(
                    f"the Stan backend cannot run the external likelihood '{statement.function}': "
                    "it calls user Python code, which Stan cannot call", statement.span,
                    "use a JAX-based method, which can call external likelihoods")
            if isinstance(statement, ir.GPStatement) and len(statement.inputs.index_shape) > 2:
                raise MethodError("the Stan backend supports GP inputs with at most two index levels",
                                  statement.inputs.span)

    def _classify_latents(self):
        defining: dict[str, list] = defaultdict(list)
        for statement, loops in self.model.walk():
            if isinstance(statement, (ir.GPStatement, ir.PriorStatement)) and statement.target.role == "latent":
                defining[statement.target.name].append((statement, loops))
        for node in student_t_process_nodes(self.model):
            self.process_of[id(node.likelihood)] = node.statement
            self.variables[node.name] = StanVariable(node.name, "marginalised", None, None)
        for name, var in self.model.latents.items():
            if name in self.variables:
                continue
            statements = defining[name]
            gps = [s for s, _ in statements if isinstance(s, ir.GPStatement)]
            sname = stan_name(name)
            if not gps:
                self.variables[name] = StanVariable(name, "latent_parameter", sname, "parameters")
                continue
            if len(gps) != len(statements):
                raise MethodError(f"latent '{name}' has both a gp and another distribution; the Stan "
                                  "backend needs one kind per latent variable", var.span)
            if var.type.lower is not None or var.type.upper is not None:
                raise MethodError(f"latent GP values '{name}' cannot have bounds", var.span)
            node = self._node(gps[0])
            latent_hsgp_marginalised = is_latent_hsgp(gps[0]) and len(statements) == 1 and node.marginalised_whole
            if gps[0].approximated_by(HSGP) and not latent_hsgp_marginalised:
                if gps[0].approximation.value("centred"):
                    whitened, raw = self.fresh(f"{sname}_z"), self.fresh(f"{sname}_w")
                else:
                    whitened, raw = None, self.fresh(f"{sname}_z")
                self.variables[name] = StanVariable(name, "hsgp", sname, "transformed parameters", raw,
                                                    whitened=whitened)
                continue
            if gps[0].approximated_by(STATE_SPACE) and not (len(statements) == 1 and node.marginalised_whole):
                self.variables[name] = StanVariable(name, "state_space", sname, "transformed parameters",
                                                    self.fresh(f"{sname}_z"))
                continue
            if len(statements) == 1 and node.marginalised_whole:
                self.marginal_of[id(node.likelihood)] = gps[0]
                self.variables[name] = StanVariable(name, "marginalised", None, None)
            else:
                flattened = len(gps[0].inputs.index_shape) == 2
                if flattened and (len(gps) > 1 or gps[0].target.indices):
                    raise MethodError(f"the Stan backend needs '{name} ~ gp((t, X), k)' over two-level "
                                      "inputs to define the whole latent at once", gps[0].span)
                self.variables[name] = StanVariable(name, "non_centred", sname, "transformed parameters",
                                                    self.fresh(f"{sname}_raw"), flattened)

    @functools.cached_property
    def gp_nodes(self) -> list[GPNode]:
        """The model's latent GP variables with their structural facts (:func:`gpdsl.ir.structure.gp_nodes`)."""
        return gp_nodes(self.model)

    def _node(self, gp: ir.GPStatement) -> GPNode:
        """The structural facts of a GP statement."""
        return next(node for node in self.gp_nodes if node.statement is gp)

    # ---- declarations ------------------------------------------------------------------------
    def _data_block(self):
        for name, var in self.model.data.items():
            sname = stan_name(name)
            self.blocks.add("data", f"{stan_type(var.type, _bound(var.type.lower), _bound(var.type.upper))} "
                                    f"{sname};")
            self.variables[name] = StanVariable(name, "data", sname, "data")
        for name in self.missing:
            count, indices = self.fresh(f"N_obs_{stan_name(name)}"), self.fresh(f"{stan_name(name)}_obs_idx")
            self.blocks.add("data", f"int<lower=0> {count};",
                            f"array[{count}] int<lower=1, upper={_product(self.model.data[name].type.shape)}> "
                            f"{indices};")
            self.observed_indices[name] = (count, indices)

    def _parameters_block(self):
        priors = self.model.priors()
        for name, var in self.model.parameters.items():
            lower, upper = _bound(var.type.lower), _bound(var.type.upper)
            prior = priors.get(name)
            if prior is not None and PRIORS[prior.distribution.name].support == "bounded":
                if lower is None:
                    lower = self._bound_vector(name, "lower", var.type, prior.distribution.arg("lower"))
                if upper is None:
                    upper = self._bound_vector(name, "upper", var.type, prior.distribution.arg("upper"))
            self._declare_parameter(stan_name(name), stan_type(var.type, lower, upper))
            self.variables[name] = StanVariable(name, "parameter", stan_name(name), "parameters")
        for name, var in self.model.latents.items():
            mapping = self.variables[name]
            if mapping.kind == "latent_parameter":
                t = stan_type(var.type, _bound(var.type.lower), _bound(var.type.upper))
                self._declare_parameter(mapping.stan_name, t)
            elif mapping.kind == "non_centred":
                t = (f"vector[{_product(var.type.shape)}]" if mapping.flattened
                     else stan_type(replace(var.type, lower=None, upper=None)))
                self._declare_parameter(mapping.raw_name, t)
            elif mapping.kind == "hsgp":
                self._declare_parameter(mapping.raw_name, self._hsgp_weights_type(name, var.type))
            elif mapping.kind == "state_space":
                gp = next(s for s in self.model.gp_statements() if s.target.name == name)
                _, _, _, d = self._series_form(gp)
                self._declare_parameter(mapping.raw_name, f"vector[{_stan_dim(gp.inputs.index_shape[0])} * {d}]")

    def _declare_parameter(self, name: str, type_text: str):
        self.blocks.add("parameters", f"{type_text} {name};")
        self.parameter_names.append(name)

    def _bound_vector(self, name: str, which: str, t: VarType, expr: ir.Expr) -> str:
        if not expr.type.shape:
            return self.translate(expr)
        bound_type = replace(t, lower=None, upper=None)
        return self._transformed_data(f"{stan_name(name)}_{which}", stan_type(bound_type), self.translate(expr))

    def _transformed_data(self, base: str, type_text: str, definition: str) -> str:
        """A ``transformed data`` variable holding ``definition`` (one per distinct definition)."""
        if definition not in self.transformed_data:
            name = self.fresh(base)
            self.blocks.add("transformed data", f"{type_text} {name} = {definition};")
            self.transformed_data[definition] = name
        return self.transformed_data[definition]

    def _transformed_parameters_block(self):
        for name, var in self.model.latents.items():
            mapping = self.variables[name]
            if mapping.kind in ("non_centred", "hsgp", "state_space"):
                self.blocks.add("transformed parameters", f"{stan_type(var.type)} {mapping.stan_name};")
            if mapping.whitened is not None:
                self.blocks.add("transformed parameters",
                                f"{self._hsgp_weights_type(name, var.type)} {mapping.whitened};")
        self.blocks.add("transformed parameters",
                        *self._tree(_in_definition_order(self.model.statements), self._non_centred))

    # ---- statements --------------------------------------------------------------------------
    def _tree(self, statements, emit: Callable[[ir.Statement], list[str]]) -> list[str]:
        """Lines for a statement list, keeping the loops around statements that produce any."""
        lines: list[str] = []
        for statement in statements:
            if isinstance(statement, ir.ForLoop):
                body = self._tree(statement.body, emit)
                if len(body) > 2 and body[0] == "{" and body[-1] == "}" and all(
                        line.startswith(INDENT) for line in body[1:-1]):
                    body = [line[len(INDENT):] for line in body[1:-1]]
                if body:
                    start = self.translate.operand(statement.start, SUM)
                    stop = self.translate.operand(statement.stop, SUM)
                    lines.append(f"for ({stan_name(statement.variable)} in {start}:{stop}) {{")
                    lines += _indented(body)
                    lines.append("}")
            else:
                lines += emit(statement)
        return lines

    def _non_centred(self, statement: ir.Statement) -> list[str]:
        if not isinstance(statement, ir.GPStatement):
            return []
        mapping = self.variables[statement.target.name]
        if mapping.kind == "hsgp":
            return self._hsgp_latent(statement, mapping)
        if mapping.kind == "state_space":
            return self._state_space_latent(statement, mapping)
        if mapping.kind != "non_centred":
            return []
        local = self._covariance(statement)
        covariance = f"add_diag({self.covariance_name}, {self.jitter})"
        raw = self.translate.index(mapping.raw_name, statement.target.indices)
        mean = "" if statement.mean is None else f" + {self.translate(statement.mean)}"
        if not mapping.flattened:
            target = self.translate.index(mapping.stan_name, statement.target.indices)
            return ["{", *_indented(local + [f"{target} = cholesky_decompose({covariance}) * {raw}{mean};"]), "}"]
        outer, inner = statement.inputs.index_shape
        flat, i = self.fresh(f"{mapping.stan_name}_flat"), self.fresh("i")
        n = _stan_dim(inner)
        body = local + [
            f"vector[{_product((outer, inner))}] {flat} = cholesky_decompose({covariance}) * {raw}{mean};",
            f"for ({i} in 1:{_stan_dim(outer)}) {{",
            f"{INDENT}{mapping.stan_name}[{i}] = segment({flat}, ({i} - 1) * {n} + 1, {n});",
            "}",
        ]
        return ["{", *_indented(body), "}"]

    # ---- the Hilbert-space approximation ------------------------------------------------------
    def _hsgp_basis(self, name: str) -> "HSGPTransformedData":
        """The transformed-data names of the basis of the HSGP latent ``name`` (declared on first use)."""
        if name not in self.hsgp_bases:
            gp = next(s for s in self.model.gp_statements() if s.target.name == name)
            m = gp.approximation.value("m")
            m = tuple(m) if isinstance(m, tuple) else (m,) * int(gp.inputs.dim)
            points = self._points(gp, 0 if len(gp.inputs.components) == 1 else None, [])
            if has_series(gp.kernel):
                self.hsgp_bases[name] = self._hsgp_term_bases(gp, points, stan_name(name), m[0])
            else:
                self.hsgp_bases[name] = self._hsgp_laplacian_basis(gp, m, points, stan_name(name))
        return self.hsgp_bases[name]

    def _hsgp_laplacian_basis(self, gp: ir.GPStatement, m: tuple, points: str, base: str) -> "HSGPTransformedData":
        """Declare the Laplacian eigenfunctions of an HSGP (``m`` per input column) in transformed data."""
        dim = int(gp.inputs.dim)
        size = int(np.prod(m))
        names = {part: self.fresh(f"{base}_hsgp_{part}") for part in ("indices", "centre", "L", "omega", "phi")}
        n = _product(gp.inputs.index_shape)
        c = format_number(float(gp.approximation.value("c")))
        self.blocks.add(
            "transformed data",
            f"array[{size}, {dim}] int {names['indices']} = hsgp_indices({{{', '.join(map(str, m))}}});",
            f"vector[{dim}] {names['centre']} = hsgp_centre({points});",
            f"vector[{dim}] {names['L']} = hsgp_half_widths({points}, {names['centre']}, {c});",
            f"matrix[{size}, {dim}] {names['omega']} = hsgp_frequencies({names['indices']}, {names['L']});",
            f"matrix[{n}, {size}] {names['phi']} = hsgp_eigenfunctions({points}, {names['centre']}, "
            f"{names['L']}, {names['omega']});")
        return HSGPTransformedData(size, names["omega"], names["phi"])

    def _latent_hsgp_features(self, gp: ir.GPStatement, local: list[str]) -> str:
        """``A = PHI(X) diag(sqrt(S(omega)))`` of an HSGP over latent inputs ``X`` (:mod:`gpdsl.ir.latent_hsgp`): the
        box from ``X``'s prior and the frequencies in transformed data, the eigenfunctions at the latent points (the
        points declared in ``local``); ``A A'`` is the kernel the JAX lowering gives the GP
        (:class:`~gpdsl.kernels.hsgp_features.HSGPFeatureKernel`)."""
        m = basis_sizes(gp)
        dim, size = len(m), int(np.prod(m))
        centre, half_widths = latent_box(gp, self.model.priors().get(latent_inputs(gp)))
        base = f"{stan_name(gp.target.name)}_hsgp"
        indices = self._transformed_data(f"{base}_indices", f"array[{size}, {dim}] int",
                                         f"hsgp_indices({{{', '.join(map(str, m))}}})")
        centre = self._transformed_data(f"{base}_centre", f"vector[{dim}]",
                                        f"[{', '.join(map(format_number, centre))}]'")
        L = self._transformed_data(f"{base}_L", f"vector[{dim}]", f"[{', '.join(map(format_number, half_widths))}]'")
        omega = self._transformed_data(f"{base}_omega", f"matrix[{size}, {dim}]", f"hsgp_frequencies({indices}, {L})")
        points = self._points(gp, 0, local)
        density = self._spectral_density(gp.kernel, omega)[0]
        return f"diag_post_multiply(hsgp_eigenfunctions({points}, {centre}, {L}, {omega}), sqrt({density}))"

    def _hsgp_weights_type(self, name: str, target: VarType) -> str:
        """The Stan type of an HSGP latent's basis weights: ``vector[M]``, or ``matrix[M, D]`` (a column per output)
        over latent inputs with a matrix target."""
        gp = next(s for s in self.model.gp_statements() if s.target.name == name)
        if not is_latent_hsgp(gp):
            return f"vector[{self._hsgp_basis(name).size}]"
        size = int(np.prod(basis_sizes(gp)))
        return f"matrix[{size}, {_stan_dim(target.dims[1])}]" if target.container == "matrix" else f"vector[{size}]"

    def _hsgp_latent(self, statement: ir.GPStatement, mapping: StanVariable) -> list[str]:
        """``f = PHI * (sqrt(S(omega)) .* z) + mean`` for an HSGP latent; over latent inputs ``F = A Z`` with ``A``
        from :meth:`_latent_hsgp_features` (a column of weights per output)."""
        if is_latent_hsgp(statement):
            local: list[str] = []
            features = self._latent_hsgp_features(statement, local)
            mean = "" if statement.mean is None else f" + {self.translate(statement.mean)}"
            return ["{", *_indented(local + [f"{mapping.stan_name} = {features} * {mapping.raw_name}{mean};"]), "}"]
        basis, density = self._hsgp_density(statement)
        mean = "" if statement.mean is None else f" + {self.translate(statement.mean)}"
        if mapping.whitened is None:
            return [f"{mapping.stan_name} = {basis.phi} * (sqrt({density}) .* {mapping.raw_name}){mean};"]
        return [f"{mapping.whitened} = {mapping.raw_name} ./ sqrt({density});",
                f"{mapping.stan_name} = {basis.phi} * {mapping.raw_name}{mean};"]

    def _hsgp_density(self, statement: ir.GPStatement) -> tuple["HSGPTransformedData", str]:
        """The basis of an HSGP latent on data inputs and the expression of its weights' prior variances."""
        basis = self._hsgp_basis(statement.target.name)
        if not basis.parts:
            return basis, self._spectral_density(statement.kernel, basis.omega)[0]
        terms = sum_terms(statement.kernel)
        variances = [self._part_variances([terms[i] for i in indices], part) for indices, part in basis.parts]
        density = variances[0]
        for other in variances[1:]:
            density = f"append_row({density}, {other})"
        return basis, density

    def _hsgp_term_bases(self, gp: ir.GPStatement, points: str, base: str, order: int) -> "HSGPTransformedData":
        """The basis of an HSGP whose kernel sum has periodic terms: the Laplacian part's (if any terms are not
        periodic) and a cosine series per periodic term, side by side in one matrix (declared on first use)."""
        periods = [series_period_expr(term) for term in sum_terms(gp.kernel)]
        others = tuple(i for i, period in enumerate(periods) if period is None)
        n = _product(gp.inputs.index_shape)
        constant = bool(gp.approximation.value("constant"))
        parts, phis, size = [], [], 0
        if others:
            laplacian = self._hsgp_laplacian_basis(gp, (order,), points, base)
            parts.append((others, laplacian.omega))
            phis.append(laplacian.phi)
            size += laplacian.size
        for i, period in enumerate(periods):
            if period is not None:
                phi = self.fresh(f"{base}_hsgp_series_phi")
                series = f"hsgp_periodic_basis({points}, {self.translate(period)}, {order})"
                if not constant:
                    series = f"block({series}, 1, 2, {n}, {series_size(order, False)})"
                self.blocks.add("transformed data", f"matrix[{n}, {series_size(order, constant)}] {phi} = {series};")
                parts.append(((i,), SeriesPart(order, constant)))
                phis.append(phi)
                size += series_size(order, constant)
        phi = self.fresh(f"{base}_hsgp_basis")
        joined = phis[0]
        for other in phis[1:]:
            joined = f"append_col({joined}, {other})"
        self.blocks.add("transformed data", f"matrix[{n}, {size}] {phi} = {joined};")
        return HSGPTransformedData(size, "", phi, tuple(parts))

    def _part_variances(self, terms: list, part) -> str:
        """The weight variances of one part of a :meth:`_hsgp_term_bases` basis: the spectral densities of its terms
        at ``omega`` (a name) added, or a periodic term's series coefficients (``part`` a :class:`SeriesPart`)."""
        if isinstance(part, SeriesPart):
            variances = self._spectral_density(terms[0], "", part.order)[0]
            return variances if part.constant else f"tail({variances}, {series_size(part.order, False)})"
        return " + ".join(self._spectral_density(term, part)[0] for term in terms)

    def _spectral_density(self, kernel: ir.Kernel, omega: str, order: int | None = None) -> tuple[str, int]:
        """The Stan expression of the variances of an HSGP's weights: a kernel's spectral density at the rows of
        ``omega`` (a leaf's :attr:`~gpdsl.kernel_table.KernelSpec.spectral_density` spelling, sums and scalings of
        them), or with ``order`` a periodic kernel's series coefficients (``hsgp_periodic_variances``) under
        scalings; the checker admits no other kernel under an HSGP."""
        if isinstance(kernel, ir.KernelSum):
            return (f"{self._spectral_density(kernel.left, omega, order)[0]} + "
                    f"{self._spectral_density(kernel.right, omega, order)[0]}"), SUM
        if isinstance(kernel, ir.KernelScale):
            inner, level = self._spectral_density(kernel.kernel, omega, order)
            inner = inner if level >= PRODUCT else f"({inner})"
            return f"{self.translate.operand(kernel.scale, PRODUCT)} * {inner}", PRODUCT
        if not isinstance(kernel, ir.KernelLeaf) or isinstance(kernel, ir.KernelCombination):
            raise MethodError("the Stan backend has no spectral density of this kernel", kernel.span)
        if order is not None:
            arguments = self._kernel_arguments(kernel, StanCall("hsgp_periodic_variances", ("variance", "lengthscale")))
            return f"hsgp_periodic_variances({', '.join([str(order)] + arguments)})", ATOM
        call = catalog.KERNELS[kernel.name].spectral_call(dict(kernel.params))
        return f"{call.function}({', '.join([omega] + self._kernel_arguments(kernel, call))})", ATOM

    # ---- the state-space form -----------------------------------------------------------------
    def _state_space_latent(self, statement: ir.GPStatement, mapping: StanVariable) -> list[str]:
        """``f`` of a sampled state-space latent from its innovations by the state recursion along the sorted times
        (``state_space_latent`` of the template), unsorted, plus the mean."""
        data = self._state_space_grid(statement)
        F, P, _, d = self._series_form(statement)
        mean = "" if statement.mean is None else f" + {self.translate(statement.mean)}"
        sorted_values = self.fresh(f"{mapping.stan_name}_sorted")
        return ["{", *_indented([
            f"vector[{data.n}] {sorted_values} = state_space_latent({mapping.raw_name}, {data.steps}, {F}, {P}, "
            f"{data.measurement});",
            f"{mapping.stan_name}[{data.order}] = {sorted_values};",
            *([f"{mapping.stan_name} = {mapping.stan_name}{mean};"] if mean else [])]), "}"]

    def _state_space_grid(self, gp: ir.GPStatement) -> "StateSpaceData":
        """The transformed data of a state-space GP's times alone: :class:`StateSpaceData` without a mask or outputs."""
        n = _stan_dim(gp.inputs.index_shape[0])
        base = stan_name(gp.target.name)
        layout = series_layout(gp)
        times = self._transformed_data(f"{base}_times", f"vector[{n}]",
                                       f"state_space_times({self._points(gp, layout.time, [])})")
        if layout.group is None:
            order = self._transformed_data(f"{base}_order", f"array[{n}] int", f"sort_indices_asc({times})")
            steps = self._transformed_data(f"{base}_steps", f"vector[{n}]", f"state_space_steps({times}[{order}])")
        else:
            groups = self._transformed_data(f"{base}_groups", f"vector[{n}]",
                                            f"state_space_times({self._points(gp, layout.group, [])})")
            order = self._transformed_data(f"{base}_order", f"array[{n}] int",
                                           f"state_space_group_order({times}, {groups})")
            steps = self._transformed_data(f"{base}_steps", f"vector[{n}]",
                                           f"state_space_group_steps({times}[{order}], {groups}[{order}])")
        count = self._transformed_data(f"{base}_step_count", "int", f"state_space_distinct_count({steps})")
        distinct = self._transformed_data(f"{base}_distinct_steps", f"vector[{count}]",
                                          f"state_space_distinct({steps}, {count})")
        index = self._transformed_data(f"{base}_step_index", f"array[{n}] int",
                                       f"state_space_step_index({steps}, {distinct})")
        _, _, measurement, d = self._series_form(gp)
        H = self._transformed_data(f"{base}_measurement", f"matrix[1, {d}]", measurement)
        return StateSpaceData(n, order, f"{distinct}, {index}", f"{H}[1]", "", "")

    def _state_space_data(self, gp: ir.GPStatement, likelihood: ir.LikelihoodStatement) -> "StateSpaceData":
        """Transformed data of a state-space GP: the sort of its times, the steps between them, its measurement row,
        the mask of observed outputs and the outputs with 0 at the missing ones (declared on first use)."""
        grid = self._state_space_grid(gp)
        n, base = grid.n, stan_name(gp.target.name)
        y = stan_name(likelihood.target.name)
        if likelihood.target.name in self.observed_indices:
            _, indices = self.observed_indices[likelihood.target.name]
            mask = self._transformed_data(f"{base}_mask", f"vector[{n}]", f"state_space_mask({n}, {indices})")
            y = self._transformed_data(f"{y}_filled", f"vector[{n}]", f"state_space_filled({y}, {indices})")
        else:
            mask = self._transformed_data(f"{base}_mask", f"vector[{n}]", f"rep_vector(1, {n})")
        return replace(grid, mask=mask, outputs=y)

    def _series_form(self, gp: ir.GPStatement) -> tuple[str, str, str, int]:
        """:meth:`_state_space_form` of a state-space GP's kernel over the time (less a ``same(g)`` factor, whose
        groups restart the state: :meth:`_state_space_grid`)."""
        return self._state_space_form(series_layout(gp).kernel, int(gp.approximation.value("order")))

    def _state_space_form(self, kernel: ir.Kernel, order: int) -> tuple[str, str, str, int]:
        """``(F, P, H, d)`` of a kernel as Stan expressions and its state dimension: a leaf's
        :attr:`~gpdsl.kernel_table.KernelSpec.state_space` functions, sums stacked, products by Kronecker products,
        scales on ``P`` (the checker admits no other kernel under a state-space GP)."""
        if isinstance(kernel, ir.KernelScale):
            F, P, H, d = self._state_space_form(kernel.kernel, order)
            return F, f"{self.translate.operand(kernel.scale, PRODUCT)} * {P}", H, d
        if isinstance(kernel, ir.KernelPair):
            (F1, P1, H1, d1), (F2, P2, H2, d2) = (self._state_space_form(k, order) for k in (kernel.left, kernel.right))
            if isinstance(kernel, ir.KernelSum):
                return (f"ss_block_diagonal({F1}, {F2})", f"ss_block_diagonal({P1}, {P2})", f"append_col({H1}, {H2})",
                        d1 + d2)
            return f"ss_kronecker_sum({F1}, {F2})", f"ss_kronecker({P1}, {P2})", f"ss_kronecker({H1}, {H2})", d1 * d2
        spec = catalog.KERNELS[kernel.name]
        if spec.state_space is None or isinstance(kernel, ir.KernelCombination):
            raise MethodError(f"the Stan backend has no state-space form of '{kernel.name}'", kernel.span)
        stem = spec.state_space.function
        arguments = ", ".join([str(order)] + self._kernel_arguments(kernel, spec.state_space))
        return (f"{stem}_feedback({arguments})", f"{stem}_stationary({arguments})", f"{stem}_measurement({order})",
                spec.state_dimension(order))

    def _state_space_locals(self, gp: ir.GPStatement, likelihood: ir.LikelihoodStatement):
        """The transformed data, the local ``F`` and ``P`` declarations, the sorted residuals and the sites' noise."""
        data = self._state_space_data(gp, likelihood)
        F, P, _, d = self._series_form(gp)
        feedback, stationary = self.fresh("F"), self.fresh("P")
        offset = self._marginal_offset(gp)
        residual = data.outputs if offset is None else f"({data.outputs} - {offset})"
        sigma = self.translate(likelihood.distribution.arg("sigma"))
        local = [f"matrix[{d}, {d}] {feedback} = {F};", f"matrix[{d}, {d}] {stationary} = {P};"]
        arguments = f"{data.mask}[{data.order}], {data.steps}, {feedback}, {stationary}, {data.measurement}, " \
                    f"square({sigma}) + {self.jitter}"
        return data, local, f"{residual}[{data.order}]", arguments

    def _state_space_marginal(self, gp: ir.GPStatement, likelihood: ir.LikelihoodStatement) -> list[str]:
        """``y ~ N(mean + offset, K + (s^2 + GP_JITTER) I)`` by the Kalman filter along the sorted times."""
        _, local, residual, arguments = self._state_space_locals(gp, likelihood)
        return ["{", *_indented(local + [f"target += state_space_normal_lpdf({residual} | {arguments});"]), "}"]

    def _state_space_pointwise(self, gp: ir.GPStatement, likelihood: ir.LikelihoodStatement) -> list[str]:
        """Leave-one-out log densities by the smoother and a replicate by pathwise conditioning, unsorted."""
        data, local, residual, arguments = self._state_space_locals(gp, likelihood)
        name = likelihood.target.name
        loo, replicate = self.fresh("loo"), self.fresh("replicate")
        local += [f"vector[{data.n}] {loo};", f"vector[{data.n}] {replicate};",
                  f"{loo}[{data.order}] = state_space_loo_log_densities({residual}, {arguments});",
                  f"{replicate}[{data.order}] = state_space_replicate_rng({residual}, {arguments});"]
        observed = f"[{self.observed_indices[name][1]}]" if name in self.observed_indices else ""
        offset = self._marginal_offset(gp)
        local += [f"{self.log_likelihood[name]} = {loo}{observed};",
                  f"{self.replicates[name]} = {replicate}" + ("" if offset is None else f" + {offset}") + ";"]
        return ["{", *_indented(local), "}"]

    def _model_statement(self, statement: ir.Statement) -> list[str]:
        if isinstance(statement, ir.GPStatement):
            mapping = self.variables[statement.target.name]
            if mapping.kind == "marginalised":
                return []
            raw = self.translate.index(mapping.raw_name, statement.target.indices)
            if statement.target.type.container == "matrix":
                raw = f"to_vector({raw})"
            if mapping.whitened is not None:
                return [f"target += normal_lpdf({raw} | 0, sqrt({self._hsgp_density(statement)[1]}));"]
            return [f"target += std_normal_lpdf({raw});"]
        if isinstance(statement, ir.LikelihoodStatement) and id(statement) in self.marginal_of:
            return self._marginal(self.marginal_of[id(statement)], statement)
        if isinstance(statement, ir.StudentTProcessStatement):
            return []
        if isinstance(statement, ir.LikelihoodStatement) and id(statement) in self.process_of:
            return self._student_t_process_marginal(self.process_of[id(statement)], statement)
        return self._density(statement)

    def _student_t_process_marginal(self, process: ir.StudentTProcessStatement,
                                    likelihood: ir.LikelihoodStatement) -> list[str]:
        """``y ~ MVT(nu, 0, K + s^2 I)`` with that covariance: Stan's scale matrix is ``(nu - 2) / nu`` times it."""
        local = self._covariance(process)
        sigma = self.translate(likelihood.distribution.arg("sigma"))
        nu = self.translate.operand(process.dof, ATOM)
        n = _stan_dim(process.inputs.index_shape[0])
        scale = f"(({nu} - 2.0) / {nu}) * add_diag({self.covariance_name}, square({sigma}) + {self.jitter})"
        line = (f"target += multi_student_t_lpdf({stan_name(likelihood.target.name)} | {nu}, rep_vector(0, {n}), "
                f"{scale});")
        return ["{", *_indented(local + [line]), "}"]

    def _marginal(self, gp: ir.GPStatement, likelihood: ir.LikelihoodStatement) -> list[str]:
        if gp.approximated_by(STATE_SPACE):
            return self._state_space_marginal(gp, likelihood)
        if is_latent_hsgp(gp) and likelihood.target.name not in self.observed_indices \
                and self._marginal_offset(gp) is None:
            return self._latent_hsgp_marginal(gp, likelihood)
        local = self._covariance(gp)
        sigma = self.translate(likelihood.distribution.arg("sigma"))
        n = _stan_dim(gp.inputs.index_shape[0])
        observed = stan_name(likelihood.target.name)
        if likelihood.target.type.container == "matrix":
            columns_type = f"array[{_stan_dim(likelihood.target.type.dims[1])}] vector[{n}]"
            observed = self._transformed_data(f"{observed}_columns", columns_type, f"matrix_columns({observed})")
        location, covariance = self._marginal_location(gp, n), self.covariance_name
        if likelihood.target.name in self.observed_indices:
            count, indices = self.observed_indices[likelihood.target.name]
            offset = self._marginal_offset(gp)
            observed = f"{observed}[{indices}]"
            location = f"rep_vector(0, {count})" if offset is None else f"(rep_vector(0, {n}) + {offset})[{indices}]"
            covariance = f"{covariance}[{indices}, {indices}]"
        cholesky = f"cholesky_decompose(add_diag({covariance}, square({sigma}) + {self.jitter}))"
        line = f"target += multi_normal_cholesky_lpdf({observed} | {location}, {cholesky});"
        kronecker = None if likelihood.target.name in self.observed_indices else \
            self._kronecker(gp, likelihood, observed, sigma)
        if kronecker is None:
            return ["{", *_indented(local + [line]), "}"]
        isotopic, kronecker_line = kronecker
        return [f"if ({isotopic}) {{", INDENT + kronecker_line, "} else {", *_indented(local + [line]), "}"]

    def _latent_hsgp_marginal(self, gp: ir.GPStatement, likelihood: ir.LikelihoodStatement) -> list[str]:
        """``Y ~ N(0, A A' + (s^2 + jitter) I)`` column by column, ``A`` the features of an HSGP over latent inputs,
        by the Woodbury identity (template ``hsgp_normal_marginal_lpdf``: ``O(N M^2)``, no ``N x N`` matrix)."""
        local: list[str] = []
        features = self._latent_hsgp_features(gp, local)
        sigma = self.translate(likelihood.distribution.arg("sigma"))
        observed = stan_name(likelihood.target.name)
        if likelihood.target.type.container != "matrix":
            observed = f"to_matrix({observed})"
        line = f"target += hsgp_normal_marginal_lpdf({observed} | {features}, square({sigma}) + {self.jitter});"
        return ["{", *_indented(local + [line]), "}"]

    def _kronecker(self, gp: ir.GPStatement, likelihood: ir.LikelihoodStatement, observed: str,
                   sigma: str) -> tuple[str, str] | None:
        """For ``k(x) * coregion(output, ...)`` under ``normal(f, sigma)``: a transformed-data flag that the data are
        isotopic (every output at the same points, output-major) and the Kronecker log density used then; None for
        other GPs (a mean or offset, a sum of kernels, inputs that are not data)."""
        kernel = gp.kernel
        if (likelihood.target.type.container != "vector" or self._marginal_offset(gp) is not None
                or len(gp.inputs.index_shape) != 1 or not isinstance(kernel, ir.KernelProduct)):
            return None
        indexed = [k for k in (kernel.left, kernel.right) if isinstance(k, ir.KernelLeaf)
                   and k.name in catalog.KERNELS and catalog.KERNELS[k.name].index_input]
        if len(indexed) != 1 or indexed[0].component is None:
            return None
        coregion = indexed[0]
        other = kernel.right if coregion is kernel.left else kernel.left
        if any(leaf.component in (None, coregion.component) for leaf in other.leaves()):
            return None
        index = gp.inputs.components[coregion.component]
        outputs = _bound(self.model.data[index.name].type.upper)
        per_output = f"{_stan_dim(gp.inputs.index_shape[0])} %/% {outputs}"
        point_sets, scratch = [], []

        def first_output_points(component: int | None, columns: tuple[int, int] | None = None) -> str:
            name = self._points(gp, component, scratch, columns)
            point_sets.append(name)
            return f"{name}[1:{per_output}]"

        input_kernel = self._kernel(other, first_output_points)[0]
        if scratch:
            return None
        levels = self._transformed_data("output_levels", f"array[{outputs}] vector[1]", f"output_levels({outputs})")
        output_covariance = self._kernel_leaf(coregion, lambda component, columns=None: levels)
        design = " && ".join(f"isotopic_design({stan_name(index.name)}, {name}, {outputs})"
                             for name in dict.fromkeys(point_sets))
        isotopic = self._transformed_data(f"{stan_name(gp.target.name)}_isotopic", "int", design)
        return isotopic, (f"target += kronecker_normal_lpdf({observed} | {input_kernel}, {output_covariance}, "
                          f"square({sigma}) + {self.jitter});")

    def _marginal_location(self, gp: ir.GPStatement, n: str) -> str:
        """The location of an integrated-out GP's observations: zero plus the terms added to the latent."""
        offset = self._marginal_offset(gp)
        return f"rep_vector(0, {n})" if offset is None else f"rep_vector(0, {n}) + {offset}"

    def _marginal_offset(self, gp: ir.GPStatement) -> str | None:
        """The GP's mean plus the terms added to an integrated-out latent in its likelihood's location
        (``mu + beta * x``), or None when both are zero."""
        offset = self._node(gp).offset
        terms = [self.translate(e) for e in (gp.mean, offset) if e is not None]
        return f"({' + '.join(terms)})" if terms else None

    # ---- generated quantities ----------------------------------------------------------------
    def _generated_quantities_block(self):
        for statement, _ in self.model.walk():
            name = statement.target.name
            if isinstance(statement, ir.LikelihoodStatement) and name not in self.log_likelihood:
                t = self.model.data[name].type
                self.log_likelihood[name] = self.fresh(f"log_lik_{stan_name(name)}")
                self.replicates[name] = self.fresh(f"{stan_name(name)}_rep")
                pointwise = stan_type(replace(t, base='real', lower=None, upper=None))
                if name in self.observed_indices:
                    pointwise = f"vector[{self.observed_indices[name][0]}]"
                self.blocks.add("generated quantities",
                                f"{pointwise} {self.log_likelihood[name]};",
                                f"{stan_type(replace(t, lower=None, upper=None))} {self.replicates[name]};")
        self.blocks.add("generated quantities", *self._tree(self.model.statements, self._pointwise))

    def _pointwise(self, statement: ir.Statement) -> list[str]:
        """Each observation's log-likelihood and replicate, for a likelihood statement."""
        if not isinstance(statement, ir.LikelihoodStatement):
            return []
        if id(statement) in self.marginal_of:
            return self._marginal_pointwise(self.marginal_of[id(statement)], statement)
        if id(statement) in self.process_of:
            return self._student_t_process_pointwise(self.process_of[id(statement)], statement)
        target, distribution = statement.target, statement.distribution
        rng = capability(distribution.name, "stan_rng")
        if rng is None:
            raise MethodError(f"the Stan backend cannot draw replicates of the distribution '{distribution.name}'")
        loop_vars = [self.loop_variable(k) for k in range(len(target.type.shape))]
        index = [self.translate(i) for i in target.indices] + loop_vars
        element = f"[{', '.join(index)}]" if index else ""
        args = self._arguments(distribution, loop_vars)
        variate = stan_name(target.name) + element
        log_lik = [f"{self.log_likelihood[target.name]}{element} = "
                   f"{_likelihood_density(distribution.name, variate, False, args)};"]
        replicate = [f"{self.replicates[target.name]}{element} = {rng(args)};"]
        if target.name in self.observed_indices:
            return self._observed_pointwise(statement) + _loops(loop_vars, target.type.shape, replicate)
        return _loops(loop_vars, target.type.shape, log_lik + replicate)

    def _observed_pointwise(self, statement: ir.LikelihoodStatement) -> list[str]:
        """The log-likelihood of each observed entry of an outcome with missing entries (a whole vector)."""
        target, distribution = statement.target, statement.distribution
        count, indices = self.observed_indices[target.name]
        k = self.fresh("k")
        element = f"{indices}[{k}]"
        args = self._arguments(distribution, [element])
        density = _likelihood_density(distribution.name, f"{stan_name(target.name)}[{element}]", False, args)
        return _loops([k], [count], [f"{self.log_likelihood[target.name]}[{k}] = {density};"])

    def _marginal_pointwise(self, gp: ir.GPStatement, likelihood: ir.LikelihoodStatement) -> list[str]:
        """Leave-one-out log densities and a posterior-predictive replicate of ``y ~ normal(f, s)``, f integrated out."""
        if gp.approximated_by(STATE_SPACE):
            return self._state_space_pointwise(gp, likelihood)
        local = self._covariance(gp)
        sigma = self.translate(likelihood.distribution.arg("sigma"))
        n = _stan_dim(gp.inputs.index_shape[0])
        name = likelihood.target.name
        observed, log_lik, replicate = stan_name(name), self.log_likelihood[name], self.replicates[name]
        factor = self.fresh("L")
        if name in self.observed_indices:
            return self._imputing_pointwise(gp, likelihood, local, factor)
        local.append(f"matrix[{n}, {n}] {factor} = "
                     f"cholesky_decompose(add_diag({self.covariance_name}, square({sigma}) + {self.jitter}));")
        if likelihood.target.type.container != "matrix":
            offset = self._marginal_offset(gp)
            residual = observed if offset is None else f"({observed} - {offset})"
            replicate_value = f"normal_gp_replicate_rng({residual}, {factor}, square({sigma}))"
            if offset is not None:
                replicate_value = f"{offset} + {replicate_value}"
            return ["{", *_indented(local + [
                f"{log_lik} = normal_loo_log_densities({residual}, {factor});",
                f"{replicate} = {replicate_value};"]), "}"]
        columns = self._transformed_data(
            f"{observed}_columns", f"array[{_stan_dim(likelihood.target.type.dims[1])}] vector[{n}]",
            f"matrix_columns({observed})")
        d = self.loop_variable(0)
        loop = [f"for ({d} in 1:{_stan_dim(likelihood.target.type.dims[1])}) {{",
                f"{INDENT}{log_lik}[:, {d}] = normal_loo_log_densities({columns}[{d}], {factor});",
                f"{INDENT}{replicate}[:, {d}] = normal_gp_replicate_rng({columns}[{d}], {factor}, square({sigma}));",
                "}"]
        return ["{", *_indented(local + loop), "}"]

    def _imputing_pointwise(self, gp: ir.GPStatement, likelihood: ir.LikelihoodStatement, local: list[str],
                            factor: str) -> list[str]:
        """Leave-one-out log densities over the observed entries of a vector outcome with missing entries, f
        integrated out, and a replicate at every entry (template ``normal_gp_impute_rng``)."""
        sigma = self.translate(likelihood.distribution.arg("sigma"))
        name = likelihood.target.name
        count, indices = self.observed_indices[name]
        offset = self._marginal_offset(gp)
        n = _stan_dim(gp.inputs.index_shape[0])
        residual = stan_name(name) if offset is None else f"({stan_name(name)} - {offset})"
        local.append(f"matrix[{count}, {count}] {factor} = cholesky_decompose(add_diag("
                     f"{self.covariance_name}[{indices}, {indices}], square({sigma}) + {self.jitter}));")
        replicate = (f"normal_gp_impute_rng({residual}[{indices}], add_diag({self.covariance_name}, {self.jitter}), "
                     f"{indices}, {factor}, square({sigma}))")
        if offset is not None:
            replicate = f"rep_vector(0, {n}) + {offset} + {replicate}"
        return ["{", *_indented(local + [
            f"{self.log_likelihood[name]} = normal_loo_log_densities({residual}[{indices}], {factor});",
            f"{self.replicates[name]} = {replicate};"]), "}"]

    def _student_t_process_pointwise(self, process: ir.StudentTProcessStatement,
                                     likelihood: ir.LikelihoodStatement) -> list[str]:
        """Leave-one-out log densities and a posterior-predictive replicate of Student-t process regression."""
        local = self._covariance(process)
        sigma = self.translate(likelihood.distribution.arg("sigma"))
        nu = self.translate(process.dof)
        n = _stan_dim(process.inputs.index_shape[0])
        name = likelihood.target.name
        observed, log_lik, replicate = stan_name(name), self.log_likelihood[name], self.replicates[name]
        factor = self.fresh("L")
        local.append(f"matrix[{n}, {n}] {factor} = "
                     f"cholesky_decompose(add_diag({self.covariance_name}, square({sigma}) + {self.jitter}));")
        return ["{", *_indented(local + [
            f"{log_lik} = student_t_process_loo_log_densities({observed}, {factor}, {nu});",
            f"{replicate} = student_t_process_replicate_rng({observed}, {factor}, square({sigma}), {nu});"]), "}"]

    # ---- densities ---------------------------------------------------------------------------
    def _density(self, statement: ir.Statement) -> list[str]:
        """``target += <dist>_lpdf(...)`` for a prior or likelihood, looping over array dimensions."""
        target, distribution = statement.target, statement.distribution
        t = target.type
        loop_dims = t.array_dims[:-1] if t.container == "scalar" and t.array_dims else t.array_dims
        loop_vars = [self.loop_variable(k) for k in range(len(loop_dims))]
        indices = [self.translate(i) for i in target.indices] + loop_vars
        variate = stan_name(target.name) + (f"[{', '.join(indices)}]" if indices else "")
        flat_dims = t.shape[len(loop_dims):]
        args = self._arguments(distribution, loop_vars)
        declared = self.model.parameters.get(target.name)
        if t.container == "matrix" and (declared is None or declared.type.structure is None):
            variate = f"to_vector({variate})"
        if target.name in self.observed_indices and isinstance(statement, ir.LikelihoodStatement):
            indices = self.observed_indices[target.name][1]
            variate = f"{variate}[{indices}]"
            args = self._observed_arguments(distribution, indices)
        if isinstance(statement, ir.LikelihoodStatement):
            density = _likelihood_density(distribution.name, variate, bool(flat_dims), args)
        else:
            density = self._log_density(distribution.name, variate, flat_dims, args)
        lines = [f"target += {density};"]
        for var, dim in reversed(list(zip(loop_vars, loop_dims))):
            lines = [f"for ({var} in 1:{_stan_dim(dim)}) {{", *_indented(lines), "}"]
        return lines

    def _arguments(self, distribution: ir.Distribution, loop_vars: list[str]) -> dict[str, tuple[str, bool]]:
        """Each argument's Stan text indexed like the variate; a likelihood's own-shape vectors (cutpoints) whole,
        and its row matrices (logits) whole or, inside the variate's loops, the row of the loop's element."""
        likelihood = LIKELIHOODS.get(distribution.name)
        whole = likelihood.own_shape if likelihood is not None else ()
        rows = likelihood.row_params if likelihood is not None else ()
        return {name: (self.translate(expr), True) if name in whole or (name in rows and not loop_vars)
                else self._argument(expr, loop_vars) for name, expr in distribution.args}

    def _observed_arguments(self, distribution: ir.Distribution, indices: str) -> dict[str, tuple[str, bool]]:
        """A likelihood's arguments at the observed entries ``indices`` (an index array) of a vector outcome."""
        whole = LIKELIHOODS[distribution.name].own_shape
        return {name: (self.translate(expr), name in whole) if name in whole or not expr.type.shape
                else (f"{self.translate.operand(expr, ATOM)}[{indices}]", True) for name, expr in distribution.args}

    def _argument(self, expr: ir.Expr, loop_vars: list[str]) -> tuple[str, bool]:
        """A distribution argument indexed like the variate inside the loops; and whether it is shaped."""
        shape = expr.type.shape
        if not shape:
            return self.translate(expr), False
        if loop_vars:
            text = f"{self.translate.operand(expr, ATOM)}[{', '.join(loop_vars)}]"
        else:
            text = self.translate(expr)
        if len(shape) - len(loop_vars) == 2:
            text = f"to_vector({text})"
        return text, len(shape) > len(loop_vars)

    def _log_density(self, name: str, x: str, dims, args: dict[str, tuple[str, bool]]) -> str:
        """A prior's log density, from its :mod:`gpdsl.priors` object (likelihoods: :func:`_likelihood_density`)."""
        prior = PRIORS.get(name)
        if prior is None:
            raise MethodError(f"the Stan backend has no translation of the distribution '{name}'")
        return prior.stan(x, args, _product(dims) if dims else None)

    # ---- kernels -----------------------------------------------------------------------------
    def _covariance(self, gp: ir.GPStatement) -> list[str]:
        """Local declarations ending with ``matrix[n, n] K = <K(X, X)>`` for a GP statement."""
        local: list[str] = []
        kernel = self._kernel_matrix(gp, local)
        n = _product(gp.inputs.index_shape)
        if not self.covariance_name:
            self.covariance_name = self.fresh("K")
        return local + [f"matrix[{n}, {n}] {self.covariance_name} = {kernel};"]

    def _kernel_matrix(self, gp: ir.GPStatement, local: list[str]) -> str:
        """K(X, X) of a GP statement; point sets it needs that are not data are declared in ``local``. Of an HSGP
        over latent inputs, its feature kernel ``A A'`` (:meth:`_latent_hsgp_features`)."""
        if is_latent_hsgp(gp):
            return f"tcrossprod({self._latent_hsgp_features(gp, local)})"
        cache: dict[tuple, str] = {}

        def points(component: int | None, columns: tuple[int, int] | None = None) -> str:
            if len(gp.inputs.components) == 1:
                component = 0
            if (component, columns) not in cache:
                cache[component, columns] = self._points(gp, component, local, columns)
            return cache[component, columns]

        return self._kernel(gp.kernel, points)[0]

    def _kernel(self, kernel: ir.Kernel, points: Callable[..., str]) -> tuple[str, int]:
        if isinstance(kernel, ir.KernelCombination):
            return self._kernel_combination(kernel, points), ATOM
        if isinstance(kernel, ir.KernelLeaf):
            return self._kernel_leaf(kernel, points), ATOM
        if isinstance(kernel, ir.KernelScale):
            inner, level = self._kernel(kernel.kernel, points)
            inner = inner if level >= PRODUCT else f"({inner})"
            return f"{self.translate.operand(kernel.scale, PRODUCT)} * {inner}", PRODUCT
        left, left_level = self._kernel(kernel.left, points)
        right, right_level = self._kernel(kernel.right, points)
        if isinstance(kernel, ir.KernelSum):
            return f"{left} + {right}", SUM
        left = left if left_level >= PRODUCT else f"({left})"
        right = right if right_level > PRODUCT else f"({right})"
        return f"{left} .* {right}", PRODUCT

    def _kernel_combination(self, kernel: ir.KernelCombination, points: Callable[..., str]) -> str:
        """K(X, X) of a kernel with kernel-valued arguments: a warp evaluates its kernel on the warped points
        of its inputs; any other combinator's function receives its kernels' matrices after the points."""
        spec = catalog.KERNELS[kernel.name]
        call = spec.stan_call(dict(kernel.params))
        x = points(kernel.component, kernel.columns)
        arguments = self._kernel_arguments(kernel, call)
        if call.warps_points:
            warped = f"{call.function}({', '.join([x] + arguments)})"
            (_, inner), = kernel.kernels
            return self._kernel(inner, lambda component, columns=None: warped)[0]
        matrices = [self._kernel(sub, points)[0] for _, sub in kernel.kernels]
        return f"{call.function}({', '.join([x, x] + matrices + arguments)})"

    def _kernel_leaf(self, leaf: ir.KernelLeaf, points: Callable[..., str]) -> str:
        """K(X, X) of a kernel leaf: the call its :attr:`~gpdsl.kernel_table.KernelSpec.stan` entry spells (whose
        :attr:`~gpdsl.kernel_table.StanCall.code`, for a kernel added at run time, joins the functions block)."""
        x = points(leaf.component, leaf.columns)
        spec = catalog.KERNELS.get(leaf.name)
        call = spec.stan_call(dict(leaf.params)) if spec is not None else None
        if call is not None:
            if call.code and call.function not in self.kernel_functions:
                self.kernel_functions.add(call.function)
                self.blocks.add("functions", call.code.strip())
            args = [x, x] + self._kernel_arguments(leaf, call)
            if call.same_points:
                args.append("1")
            return f"{call.function}({', '.join(args)})"
        raise MethodError(f"the Stan backend has no translation of the kernel '{leaf.name}'", leaf.span)

    def _kernel_arguments(self, leaf: ir.KernelLeaf, call) -> list[str]:
        """A kernel's hyperparameters as its Stan function takes them (:attr:`KernelParam.stan_type`)."""
        params = dict(leaf.params)
        spec = catalog.KERNELS[leaf.name]

        def vector(name: str) -> str:
            expr = params[name]
            text = self.translate(expr)
            if expr.type.shape:
                return text
            if spec.param(name).per_component:
                lengths = [params[p.name].type.shape[0] for p in spec.params
                           if p.per_component and params[p.name].type.shape]
                return f"rep_vector({text}, {_stan_dim(lengths[0]) if lengths else 1})"
            if spec.param(name).per_output:
                matrix = next(p.name for p in spec.params if p.matrix)
                return f"rep_vector({text}, rows({self.translate(params[matrix])}))"
            return f"rep_vector({text}, {_stan_dim(leaf.input_dim)})"

        def argument(name: str) -> str:
            kind = spec.param(name).stan_type
            if kind == "int":
                return str(int(constant_vector(params[name])[0]))
            return vector(name) if kind == "vector" else self.translate(params[name])

        return [argument(n) for n in call.params]

    def _points(self, gp: ir.GPStatement, component: int | None, local: list[str],
                columns: tuple[int, int] | None = None) -> str:
        """The name of the point set a kernel leaf acts on (all components when ``component`` is None;
        only the ``columns`` range of the component when given)."""
        inputs = gp.inputs
        members = range(len(inputs.components)) if component is None else [component]
        definition = None
        for c in members:
            one = self._component_points(inputs, c, columns)
            definition = one if definition is None else f"concatenated_points({definition}, {one})"
        if component is not None and inputs.names[component]:
            base = f"{stan_name(inputs.names[component])}_points"
        else:
            base = f"{stan_name(gp.target.name)}_points"
        dim = inputs.dims[component] if component is not None else inputs.dim
        if columns is not None:
            base = base.replace("_points", f"_columns_{columns[0] + 1}_{columns[1]}_points")
            dim = columns[1] - columns[0]
        type_text = f"array[{_product(inputs.index_shape)}] vector[{_stan_dim(dim)}]"
        used = set().union(*(expression_refs(inputs.components[c]) for c in members))
        if all(name in self.model.data for name in used):
            return self._transformed_data(base, type_text, definition)
        name = self.fresh(base)
        local.append(f"{type_text} {name} = {definition};")
        return name

    def _component_points(self, inputs: ir.Inputs, c: int, columns: tuple[int, int] | None = None) -> str:
        expr = inputs.components[c]
        t = expr.type
        text = self.translate(expr)
        if columns is not None:
            text = f"{self.translate.operand(expr, ATOM)}[:, {columns[0] + 1}:{columns[1]}]"
        own_levels = len(t.array_dims) + 1
        if is_label_array(t):
            return f"labels_as_points({text})"
        if len(inputs.index_shape) == 1 or own_levels == 2:
            kind = "rows" if t.container == "matrix" else "values"
            prefix = "" if len(inputs.index_shape) == 1 else "stacked_"
            return f"{prefix}{kind}_as_points({text})"
        kind = "rows" if t.container == "matrix" else "values"
        return f"repeated_{kind}_as_points({text}, {_stan_dim(inputs.index_shape[1])})"
