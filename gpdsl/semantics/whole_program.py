"""Checks that need the whole program: what is never used, what has no distribution, and likelihoods.

Some questions have an answer only after the last statement: a parameter's constraint may be narrowed
by its prior after it was passed as an argument, a variable may be used further down. Statements
note what they see (:func:`note_parameter_argument`, ``ctx.used``, ``ctx.defined``);
:func:`verify_whole_program` judges it at the end.
"""

from __future__ import annotations

from gpdsl.errors import CheckWarning
from gpdsl.ir import nodes as ir
from gpdsl.semantics.context import CheckContext, fail
from gpdsl.semantics.support import SUPPORTS, Interval, declared_interval
from gpdsl.syntax import ast


def note_parameter_argument(ctx: CheckContext, what: str, support: Interval, value: ir.Expr):
    """Remember a parameter or latent variable passed where ``support`` is required; :func:`verify_whole_program`
    compares its declared bounds with it.

    Parameters
    ----------
    ctx : CheckContext
    what : str
        The argument, as the warning names it: ``argument 'sigma' of normal``.
    support : Interval
        The support the argument needs.
    value : gpdsl.ir.nodes.Expr
        The checked argument; only a parameter or latent variable (a GP's values), or an element of one, is
        remembered.
    """
    base = value.base if isinstance(value, ir.Index) else value
    if isinstance(base, ir.Ref) and base.role in ("parameter", "latent") and support != SUPPORTS["real"]:
        what += " is an element of" if isinstance(value, ir.Index) else " is"
        ctx.parameter_arguments.append((what, support, base))


def verify_whole_program(ctx: CheckContext):
    """Warn of parameters that may leave an argument's support, unused data and parameters, missing priors.

    Parameters
    ----------
    ctx : CheckContext
        After every statement is checked.

    Raises
    ------
    ModelCheckError
        For a latent variable with no distribution, or a model with no likelihood.
    """
    for what, support, ref in ctx.parameter_arguments:
        t = ctx.variables[ref.name].type
        if not declared_interval(t.lower, t.upper).within(support):
            role = "latent" if ref.role == "latent" else "parameter"
            ctx.warnings.append(CheckWarning(
                f"{what} the {role} '{ref.name}', declared {t.describe()}, which can leave its "
                f"support {support.describe()}", ref.span))
    distributed = {key.partition("[")[0] for key in ctx.defined}
    for name, var in ctx.variables.items():
        if var.role == "data" and name not in ctx.used:
            ctx.warnings.append(CheckWarning(f"data '{name}' is declared but never used", var.span))
        if var.role == "parameter" and name not in ctx.defined:
            ctx.warnings.append(CheckWarning(
                f"parameter '{name}' has no prior: methods that optimise point-estimate it, "
                "samplers refuse it", var.span))
        if var.role == "parameter" and name not in ctx.used:
            ctx.warnings.append(CheckWarning(f"parameter '{name}' is never used", var.span))
        if var.role == "latent" and name not in distributed:
            fail(f"latent '{name}' has no distribution", var.span,
                 f"give it one in the model block, e.g. '{name} ~ normal(0, 1);' or '{name} ~ gp(X, k);'")
    has_likelihood = False

    def visit(statements):
        nonlocal has_likelihood
        for s in statements:
            if isinstance(s, ast.For):
                visit(s.body)
            elif isinstance(s, ast.Tilde) and ctx.variables.get(s.target.name) is not None \
                    and ctx.variables[s.target.name].role == "data":
                has_likelihood = True

    for block in ctx.program.blocks:
        if block.kind == "model":
            visit(block.statements)
    if not has_likelihood:
        model_block = next(b for b in ctx.program.blocks if b.kind == "model")
        fail("the model has no likelihood: no data appear on the left of '~'", model_block.span,
             "add e.g. 'y ~ normal(f, sigma);'")
