"""The structural form of each model family: what a model must look like to be of it, read from the typed IR.

Each ``*_form(model, nodes)`` returns the facts its family's engines need, or a :class:`Refusal` saying what the
family needs and what this model lacks. :mod:`gpdsl.ir.families` gathers them into one object per family.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpdsl.ir import nodes as ir
from gpdsl.ir.approximations import HSGP, STATE_SPACE
from gpdsl.kernel_table import KERNEL_SPECS
from gpdsl.ir.structure import GPNode, acts_elementwise, statement_refs, student_t_process_nodes
from gpdsl.likelihoods import LIKELIHOODS
from gpdsl.source import Span


LATENT_GP_NEEDS = ("{method} needs a model with one latent GP vector f ~ gp(X, k) and a likelihood on its "
                   "elements (e.g. y ~ bernoulli_probit(f))")


LATENT_GPS_NEEDS = ("{method} needs several latent GP vectors of one length under one likelihood acting on their "
                    "elements (e.g. y ~ normal(f, exp(g)))")


GPLVM_NEEDS = ("{method} needs a Bayesian GPLVM: latent inputs X ~ normal(0, 1) (matrix[N, Q]), one GP over "
               "them F ~ gp(X, k), and a Gaussian likelihood Y ~ normal(F, s) with scalar s")


GP_PRIOR_GPLVM_NEEDS = ("{method} needs a GPLVM with GP-prior latents: X ~ gp(t, k_x) over observed inputs, "
                        "F ~ gp(X, k_f) and Y ~ normal(F, s) with scalar s")


DEEP_MAHALANOBIS_NEEDS = ("{method} needs a deep Mahalanobis GP: projection fields W[q] ~ gp(X, k) for q in 1:Q "
                          "(array[Q] matrix[N, D] W), f ~ gp(project(W, X), k_f) and y ~ normal(f, s) with scalar s")


DEEP_GP_CHAIN_NEEDS = ("{method} needs a deep GP written as a chain: H ~ gp(X, k_1, mean = X); f ~ gp(H, k_2); "
                       "y ~ normal(f, s) with scalar s (hidden layers matrix[N, D_l], each mean the identity or none)")


SEQUENTIAL_NEEDS = ("{method} needs a latent GP f ~ gp((t, X), k) over time and inputs with a likelihood "
                    "per time step (y[i] ~ ...(f[i] ...) in a loop over t)")


STUDENT_T_PROCESS_NEEDS = ("{method} needs Student-t process regression: f ~ student_t_process(nu, X, k) over observed "
                           "inputs and y ~ normal(f, s) with scalar s")


HSGP_LATENT_GP_NEEDS = ("{method} needs one latent GP vector in the Hilbert-space approximation, f ~ gp(x, k, "
                        "approx = hsgp(...)), and a likelihood on its elements")
STATE_SPACE_LATENT_GP_NEEDS = ("{method} needs one latent state-space GP, f ~ gp(t, k, approx = state_space), under a "
                               "likelihood on its elements other than a normal one that integrates it out")
STATE_SPACE_REGRESSION_NEEDS = ("{method} needs GP regression with a state-space GP: one GP f ~ gp(t, k, approx = "
                                "state_space) over observed times and y ~ normal(f, s) with scalar s")


@dataclass(frozen=True)
class LatentGPFacts:
    """What latent-GP engines need.

    Attributes
    ----------
    node : GPNode
        The latent GP vector.
    likelihood : str
        Its likelihood's name (``"bernoulli_probit"``, ..., ``"external"``).
    target : str
        The observed variable of that likelihood.
    marginalise : bool
        Whether the view integrates out other Gaussian GPs (False for GP regression seen as a
        latent-GP model: its f is then sampled).
    others : tuple of GPNode
        Further latent GP vectors under the same likelihood (``g`` of ``y ~ normal(f, exp(g))``), sampled
        with ``node`` as one block-diagonal latent GP; empty for one latent GP.
    """

    node: GPNode
    likelihood: str
    target: str
    marginalise: bool = True
    others: tuple[GPNode, ...] = ()

    @property
    def nodes(self) -> tuple[GPNode, ...]:
        """Every sampled latent GP vector, ``node`` first."""
        return (self.node, *self.others)

    @property
    def name(self) -> str:
        """The latent GP's name."""
        return self.node.name


@dataclass(frozen=True)
class GPLVMFacts:
    """What variational EM on a GPLVM needs.

    Attributes
    ----------
    latent : str
        The latent inputs (``X``).
    node : GPNode
        The GP over them (integrated out).
    output : str
        The observed outputs (``Y``).
    latent_prior : GPNode or None
        The GP prior of the latent inputs (``X ~ gp(t, k_x)``), or None for ``X ~ normal(0, 1)``.
    """

    latent: str
    node: GPNode
    output: str
    latent_prior: GPNode | None = None


@dataclass(frozen=True)
class DeepGPFacts:
    """What the deep-GP engines need.

    Attributes
    ----------
    output : GPNode
        The GP observed through ``y ~ normal(f, s)`` (integrated out).
    hidden : tuple of GPNode
        The deep Mahalanobis GP's projection field ``W``; or a chain's hidden layers, the first (over the
        observed inputs) first.
    """

    output: GPNode
    hidden: tuple[GPNode, ...]


@dataclass(frozen=True)
class Refusal:
    """Why a model is not of a family: what the family needs (with ``{method}``), what is missing, where, and
    the method that runs the model instead when the detail names one (``suggests``)."""

    needs: str
    detail: str
    span: Span | None = None
    suggests: str | None = None

    def message(self, method: str) -> str:
        """The refusal as a sentence for ``method``."""
        return f"{self.needs.format(method=method)}; {self.detail}"


def latent_gp_external_form(model: ir.Model, nodes: list[GPNode]) -> LatentGPFacts | Refusal:
    external = [n for n in nodes if isinstance(n.likelihood, ir.ExternalLikelihood)]
    if not external:
        return Refusal(LATENT_GP_NEEDS, "no latent GP of this model has an external likelihood")
    return latent_gp_form(model, nodes, marginalise=True, several=False, any_likelihood=True)


def latent_gp_form(model: ir.Model, nodes: list[GPNode], marginalise: bool, several: bool = True,
               any_likelihood: bool = False) -> LatentGPFacts | Refusal:
    def refuse(detail):
        return Refusal(LATENT_GP_NEEDS, detail)

    sampled = [n for n in nodes if not (marginalise and n.plainly_marginalised)]
    if not sampled:
        return refuse("this model's sampled latent GP values: none (Gaussian likelihoods are integrated out)")
    integrated = {n.name for n in nodes if marginalise and n.plainly_marginalised}
    priors = model.priors()
    by_name = {n.name for n in nodes}
    others = [name for name in model.latents if name not in integrated and name not in by_name and name in priors]
    if others:
        return refuse(f"this model also has latent {', '.join(others)}")
    for node in sampled:
        var = model.latents[node.name]
        rows = var.type.container == "matrix" and takes_rows(node)
        if node.loops or var.type.container != "vector" and not rows or var.type.array_dims:
            return Refusal(LATENT_GP_NEEDS, f"'{node.name}' is {var.type.describe()}", node.statement.span)
    if len(sampled) > 1 and not several:
        return Refusal(LATENT_GP_NEEDS, f"this model samples {len(sampled)} latent GPs "
                       f"({', '.join(n.name for n in sampled)}); --method gibbs samples each in turn", suggests="gibbs")
    if len(sampled) > 1:
        return _several_latent_gps(model, sampled, marginalise)
    node = sampled[0]
    external = any_likelihood and isinstance(node.likelihood, ir.ExternalLikelihood)
    if node.likelihood is None or not (node.elementwise or external):
        return Refusal(LATENT_GP_NEEDS, f"the likelihood of '{node.name}' does not act on its elements one by one",
                       node.likelihood.span if node.likelihood is not None else node.statement.span)
    if any(s is node.likelihood and loops for s, loops in model.walk()):
        return Refusal(LATENT_GP_NEEDS, f"the likelihood of '{node.name}' sits in a loop; write it as one "
                       f"vectorised statement", node.likelihood.span)
    likelihood = node.likelihood
    name = likelihood.distribution.name if isinstance(likelihood, ir.LikelihoodStatement) else "external"
    return LatentGPFacts(node, name, likelihood.target.name, marginalise)


def hsgp_latent_gp_form(model: ir.Model, nodes: list[GPNode]) -> LatentGPFacts | Refusal:
    """One latent GP vector with ``approx = hsgp(...)`` (every GP of the model) under a likelihood on its elements."""
    approximate = [n for n in nodes if n.statement.approximated_by(HSGP)]
    if not approximate:
        return Refusal(HSGP_LATENT_GP_NEEDS, "this model has no GP with approx = hsgp(...)")
    exact = [n.name for n in nodes if n.statement.approximation is None]
    if exact:
        return Refusal(HSGP_LATENT_GP_NEEDS, f"this model also has the exact GP {', '.join(exact)}")
    facts = latent_gp_form(model, nodes, marginalise=False, several=False)
    if isinstance(facts, Refusal):
        return Refusal(HSGP_LATENT_GP_NEEDS, facts.detail, facts.span)
    return facts


def state_space_latent_gp_form(model: ir.Model, nodes: list[GPNode]) -> LatentGPFacts | Refusal:
    """One latent GP vector with ``approx = state_space`` (every GP of the model) under a likelihood on its elements
    that does not integrate it out (not ``normal(f, s)`` with scalar ``s``: that is ``state_space_regression``)."""
    approximate = [n for n in nodes if n.statement.approximated_by(STATE_SPACE)]
    if not approximate:
        return Refusal(STATE_SPACE_LATENT_GP_NEEDS, "this model has no GP with approx = state_space")
    others = [n.name for n in nodes if not n.statement.approximated_by(STATE_SPACE)]
    if others:
        return Refusal(STATE_SPACE_LATENT_GP_NEEDS, f"this model also has the GP {', '.join(others)} without "
                       "approx = state_space")
    integrated = [n.name for n in approximate if n.plainly_marginalised]
    if integrated:
        return Refusal(STATE_SPACE_LATENT_GP_NEEDS, f"'{integrated[0]}' is integrated out under its normal likelihood "
                       "by Kalman filtering (ml, pm and nuts run it)", suggests="ml")
    facts = latent_gp_form(model, nodes, marginalise=False, several=False)
    if isinstance(facts, Refusal):
        return Refusal(STATE_SPACE_LATENT_GP_NEEDS, facts.detail, facts.span)
    return facts


def takes_rows(node: GPNode) -> bool:
    """The likelihood of ``node`` reads it as a matrix with one row per observation (the logits of
    ``categorical_logit``): its columns are independent latent GPs over the same points."""
    likelihood = node.likelihood
    if not isinstance(likelihood, ir.LikelihoodStatement) or likelihood.distribution.name not in LIKELIHOODS:
        return False
    found = LIKELIHOODS[likelihood.distribution.name]
    return found.latent_param in found.row_params


def latent_gps_form(model: ir.Model, nodes: list[GPNode]) -> LatentGPFacts | Refusal:
    facts = latent_gp_form(model, nodes, marginalise=True)
    if isinstance(facts, LatentGPFacts) and not facts.others:
        return Refusal(LATENT_GPS_NEEDS, f"this model samples one latent GP, '{facts.name}'")
    return facts if isinstance(facts, LatentGPFacts) else Refusal(LATENT_GPS_NEEDS, facts.detail, facts.span)


def _several_latent_gps(model: ir.Model, sampled: list[GPNode], marginalise: bool) -> LatentGPFacts | Refusal:
    """Several latent GP vectors under one built-in likelihood that acts on each element by element."""
    names = ", ".join(n.name for n in sampled)
    likelihood = sampled[0].likelihood
    if likelihood is None or any(n.likelihood is not likelihood for n in sampled):
        return Refusal(LATENT_GP_NEEDS, f"this model's sampled latent GP values {names} are not all used by one "
                       "likelihood statement")
    if not isinstance(likelihood, ir.LikelihoodStatement):
        return Refusal(LATENT_GP_NEEDS, f"several latent GPs ({names}) need a built-in likelihood", likelihood.span)
    lengths = {model.latents[n.name].type.dims for n in sampled}
    if len(lengths) != 1 or any(not acts_elementwise(likelihood, n.name) for n in sampled):
        return Refusal(LATENT_GP_NEEDS, f"the likelihood of {names} does not act on their elements one by one",
                       likelihood.span)
    if any(s is likelihood and loops for s, loops in model.walk()):
        return Refusal(LATENT_GP_NEEDS, f"the likelihood of {names} sits in a loop; write it as one vectorised "
                       "statement", likelihood.span)
    return LatentGPFacts(sampled[0], likelihood.distribution.name, likelihood.target.name, marginalise,
                         tuple(sampled[1:]))


def gp_regression_form(model: ir.Model, nodes: list[GPNode]) -> LatentGPFacts | Refusal:
    needs = ("{method} needs GP regression: one GP f ~ gp(X, k) over observed inputs and y ~ normal(f, s) "
             "with scalar s")
    if len(nodes) != 1 or not nodes[0].marginalised:
        return Refusal(needs, "this model has no single GP integrated out under a normal likelihood")
    if _reads_latents(nodes[0].statement, model):
        return Refusal(needs, f"the inputs or kernel of '{nodes[0].name}' depend on latent values")
    facts = latent_gp_form(model, nodes, marginalise=False)
    if isinstance(facts, Refusal):
        return Refusal(needs, facts.detail)
    return facts


def state_space_regression_form(model: ir.Model, nodes: list[GPNode]) -> LatentGPFacts | Refusal:
    """GP regression (:func:`gp_regression_form`) whose GP has ``approx = state_space``: the Kalman filter integrates it
    out."""
    if not any(n.statement.approximated_by(STATE_SPACE) for n in nodes):
        return Refusal(STATE_SPACE_REGRESSION_NEEDS, "this model has no GP with approx = state_space")
    facts = gp_regression_form(model, nodes)
    if isinstance(facts, Refusal):
        return Refusal(STATE_SPACE_REGRESSION_NEEDS, facts.detail, facts.span)
    return facts


def student_t_process_form(model: ir.Model, nodes: list[GPNode]) -> LatentGPFacts | Refusal:
    """Student-t process regression: one process integrated out under ``y ~ normal(f, s)`` (the only use the checker
    admits), over inputs and a kernel free of latent values, and nothing else latent."""
    processes = student_t_process_nodes(model)
    if len(processes) != 1:
        return Refusal(STUDENT_T_PROCESS_NEEDS, f"this model has {len(processes)} Student-t processes")
    node = processes[0]
    if nodes or set(model.latents) - {node.name}:
        others = sorted(set(model.latents) - {node.name})
        return Refusal(STUDENT_T_PROCESS_NEEDS, f"this model also has latent {', '.join(others)}")
    if _reads_latents(node.statement, model):
        return Refusal(STUDENT_T_PROCESS_NEEDS, f"the inputs or kernel of '{node.name}' depend on latent values")
    return LatentGPFacts(node, "normal", node.likelihood.target.name)


def gplvm_form(model: ir.Model, nodes: list[GPNode], gp_prior: bool) -> GPLVMFacts | Refusal:
    needs = GP_PRIOR_GPLVM_NEEDS if gp_prior else GPLVM_NEEDS

    def refuse(detail):
        return Refusal(needs, detail)

    outputs = [n for n in nodes if n.plainly_marginalised]
    if not gp_prior and len(nodes) != 1:
        return refuse(f"this model has {len(nodes)} GP statements")
    if gp_prior and (len(nodes) != 2 or len(outputs) != 1):
        return refuse(f"this model has {len(nodes)} GP statements, {len(outputs)} of them integrated out")
    if not outputs:
        return refuse(f"'{nodes[0].name}' is not observed directly through a normal likelihood with a scalar "
                      "standard deviation")
    node = outputs[0]
    components = node.statement.inputs.components
    indexed = [leaf.name for leaf in node.statement.kernel.leaves()
               if leaf.name in KERNEL_SPECS and KERNEL_SPECS[leaf.name].index_input]
    if indexed:
        return refuse(f"the kernel of '{node.name}' has {indexed[0]}(...) over an observed output index, and the Psi "
                      "statistics of a GPLVM take kernels of its latent inputs only: sample the model with nuts")
    if len(components) != 1 or not isinstance(components[0], ir.Ref) or components[0].name not in model.latents:
        return refuse(f"the inputs of '{node.name}' are not a latent variable")
    latent = components[0].name
    var = model.latents[latent]
    if var.type.container != "matrix" or var.type.array_dims:
        return refuse(f"'{latent}' is {var.type.describe()}")
    latent_prior = None
    if gp_prior:
        priors = [n for n in nodes if n.name == latent]
        if not priors or priors[0].loops or priors[0].statement.target.indices:
            return refuse(f"'{latent}' has no GP prior {latent} ~ gp(t, k)")
        latent_prior = priors[0]
        if latent_prior.statement.mean is not None:
            return refuse(f"the GP prior of '{latent}' has a mean function; the latent inputs' GP prior is zero-mean")
        if _reads_latents(latent_prior.statement, model):
            return refuse(f"the GP prior of '{latent}' depends on latent values")
    elif not _is_standard_normal(model.priors().get(latent)):
        return refuse(f"'{latent}' must have the prior {latent} ~ normal(0, 1)")
    others = [name for name in model.latents if name not in (latent, node.name)]
    if others:
        return refuse(f"this model also has latent {', '.join(others)}")
    for statement, _ in model.walk():
        if isinstance(statement, ir.PriorStatement) and statement.target.name in model.parameters:
            if statement_refs(statement) & set(model.latents):
                return refuse(f"the prior of '{statement.target.name}' depends on latent values")
    return GPLVMFacts(latent, node, node.likelihood.target.name, latent_prior)


def _deep_output(model: ir.Model, nodes: list[GPNode], needs: str) -> GPNode | Refusal:
    """The GP whose inputs read another GP, observed through ``normal(f, s)``."""
    gp_names = {n.name for n in nodes}
    for node in nodes:
        if statement_refs(node.statement) & gp_names - {node.name}:
            if not node.plainly_marginalised:
                return Refusal(needs, f"'{node.name}' is not observed through normal({node.name}, s) with scalar s",
                               (node.likelihood or node.statement).span)
            return node
    return Refusal(needs, "no GP in this model takes inputs built from another GP")


def deep_mahalanobis_form(model: ir.Model, nodes: list[GPNode]) -> DeepGPFacts | Refusal:
    output = _deep_output(model, nodes, DEEP_MAHALANOBIS_NEEDS)
    if isinstance(output, Refusal):
        return output

    def refuse(detail, span):
        return Refusal(DEEP_MAHALANOBIS_NEEDS, detail, span)

    components = output.statement.inputs.components
    if len(components) != 1 or not isinstance(components[0], ir.Project):
        return refuse(f"the inputs of '{output.name}' are not project(W, X)", output.statement.span)
    project = components[0]
    if not (isinstance(project.weights, ir.Ref) and isinstance(project.inputs, ir.Ref)
            and project.inputs.name in model.data):
        return refuse("project(W, X) needs a latent W and a data matrix X", project.span)
    fields = [n for n in nodes if n.name == project.weights.name]
    if len(fields) != 1:
        return refuse(f"'{project.weights.name}' needs exactly one gp statement", project.span)
    field = fields[0]
    inputs = field.statement.inputs.components
    if (len(field.loops) != 1 or len(field.statement.target.indices) != 1
            or not isinstance(field.statement.target.indices[0], ir.Ref)
            or field.statement.target.indices[0].name != field.loops[0].variable
            or len(inputs) != 1 or not isinstance(inputs[0], ir.Ref) or inputs[0].name != project.inputs.name):
        return refuse(f"write the fields as 'for (q in 1:Q) {{ {field.name}[q] ~ gp({project.inputs.name}, k); }}'",
                      field.statement.span)
    other_latents = sorted(set(model.latents) - {field.name, output.name})
    if other_latents:
        return refuse(f"this model also has latent {', '.join(other_latents)}", output.statement.span)
    return DeepGPFacts(output, (field,))


def deep_gp_chain_form(model: ir.Model, nodes: list[GPNode]) -> DeepGPFacts | Refusal:
    output = _deep_output(model, nodes, DEEP_GP_CHAIN_NEEDS)
    if isinstance(output, Refusal):
        return output

    def refuse(detail, span):
        return Refusal(DEEP_GP_CHAIN_NEEDS, detail, span)

    output_type = model.latents[output.name].type
    if output.loops or output_type.container != "vector" or output_type.array_dims:
        return refuse(f"the last layer '{output.name}' is {output_type.describe()}; it must be one output, a "
                      "vector[N]", output.statement.span)
    by_name = {node.name: node for node in nodes}
    chain = [output]
    while True:
        components = chain[0].statement.inputs.components
        if len(components) != 1 or not isinstance(components[0], ir.Ref):
            return refuse(f"the inputs of '{chain[0].name}' are not one variable", chain[0].statement.span)
        source = components[0].name
        if source in model.data:
            break
        node = by_name.get(source)
        if node is None or node.loops or node.statement.target.indices or node in chain:
            return refuse(f"'{source}' is not a hidden layer 'H ~ gp(inputs, k)'", chain[0].statement.span)
        layer_type = model.latents[source].type
        if layer_type.container != "matrix" or layer_type.array_dims:
            return refuse(f"hidden layer '{source}' must be a matrix[N, D_l]", node.statement.span)
        mean = node.statement.mean
        inputs = node.statement.inputs.components
        if mean is not None and not (isinstance(mean, ir.Ref) and len(inputs) == 1 and isinstance(inputs[0], ir.Ref)
                                     and mean.name == inputs[0].name):
            return refuse(f"the mean of '{source}' must be its own inputs (the identity) or none", mean.span)
        chain.insert(0, node)
    unused = sorted(set(model.latents) - {node.name for node in chain})
    if unused:
        return refuse(f"this model also has latent {', '.join(unused)}", output.statement.span)
    return DeepGPFacts(output, tuple(chain[:-1]))


def sequential_form(model: ir.Model, nodes: list[GPNode]) -> GPNode | Refusal:
    for node in nodes:
        components = node.statement.inputs.components
        if len(components) != 2 or node.likelihood is None or node.loops:
            continue
        if any(s is node.likelihood and loops for s, loops in model.walk()):
            return _sequential_steps(model, node)
    return Refusal(SEQUENTIAL_NEEDS, "no GP over a (time, inputs) tuple with a likelihood inside a loop")


def _sequential_steps(model: ir.Model, node: GPNode) -> GPNode | Refusal:
    """``node`` when its times, its values and its likelihood's loop are one per time step."""
    statement = node.statement
    time = statement.inputs.components[0]
    if time.type.container != "vector" or time.type.array_dims or not isinstance(time.type.dims[0], str):
        return Refusal(SEQUENTIAL_NEEDS, f"the first input of '{node.name}' must be a vector of times, vector[T]",
                       statement.span)
    time_size = time.type.dims[0]
    var = model.latents[node.name]
    if not var.type.array_dims or var.type.array_dims[0] != time_size or len(var.type.shape) != 2:
        return Refusal(SEQUENTIAL_NEEDS, f"'{node.name}' must be array[{time_size}] vector[N] (one vector per time "
                       f"step); it is {var.type.describe()}", statement.span)
    loops = next(loops for s, loops in model.walk() if s is node.likelihood)
    if len(loops) != 1 or not isinstance(loops[0].stop, ir.Ref) or loops[0].stop.name != time_size \
            or not (isinstance(loops[0].start, ir.Constant) and loops[0].start.value == 1):
        return Refusal(SEQUENTIAL_NEEDS, f"the likelihood must sit in one loop for (i in 1:{time_size})",
                       node.likelihood.span)
    others = [name for name in model.latents if name != node.name]
    if others:
        return Refusal(SEQUENTIAL_NEEDS, f"this model also has latent {', '.join(others)}")
    return node


def _reads_latents(statement: ir.Statement, model: ir.Model) -> bool:
    return bool(statement_refs(statement) & set(model.latents))


def _is_standard_normal(prior) -> bool:
    if prior is None or prior.distribution.name != "normal" or prior.target.indices:
        return False
    values = [v for _, v in prior.distribution.args]
    return (len(values) == 2 and all(isinstance(v, ir.Constant) for v in values)
            and values[0].value == 0 and values[1].value == 1)
