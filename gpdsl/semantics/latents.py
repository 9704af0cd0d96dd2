"""Latent variables beyond their declarations: types for undeclared GP targets, and no cycles.

``f ~ gp(X, k);`` may introduce ``f`` without a declaration: its type is a vector over the inputs'
points, or the matrix shape of the data it is a likelihood argument of (``Y ~ normal(F, s)`` with
``matrix[N, D] Y``). Latent variables are typed before any statement is checked, so a statement may use
one introduced further down. No latent value may be built from itself (:mod:`gpdsl.semantics.dependencies`).
"""

from __future__ import annotations

from gpdsl.ir import nodes as ir
from gpdsl.semantics.context import CheckContext, fail
from gpdsl.semantics.dependencies import distributions, verify_acyclic
from gpdsl.semantics.catalog import PROCESSES, STUDENT_T_PROCESS
from gpdsl.semantics.gp import check_inputs, verify_gp_arguments, verify_student_t_process_arguments
from gpdsl.semantics.shapes import same_dim
from gpdsl.ir.types import VarType
from gpdsl.syntax import ast


def infer_latents(ctx: CheckContext, statements):
    """Give undeclared GP targets a type: vector over the inputs' points, or the data's matrix shape.

    Parameters
    ----------
    ctx : CheckContext
        With every declaration; the inferred latent variables are added to ``ctx.variables``.
    statements : sequence of gpdsl.syntax.ast.Statement
        The model block.

    Raises
    ------
    ModelCheckError
        For an undeclared GP target that is indexed or in a loop, or a GP statement with bad inputs.
    """
    likelihood_shapes: dict[str, VarType] = {}
    gp_targets: list[ast.Tilde] = []
    loop_variables: set[str] = set()

    def visit(items):
        for s in items:
            if isinstance(s, ast.For):
                loop_variables.add(s.variable)
                visit(s.body)
            elif isinstance(s, ast.Tilde):
                if s.distribution.function in PROCESSES:
                    gp_targets.append(s)
                var = ctx.variables.get(s.target.name)
                first = s.distribution.args[0] if s.distribution.args else None
                if (var is not None and var.role == "data" and not s.target.indices
                        and isinstance(first, ast.Name)):
                    likelihood_shapes.setdefault(first.name, var.type)

    visit(statements)
    for s in gp_targets:
        name = s.target.name
        if name in ctx.variables:
            continue
        if s.target.indices:
            fail(f"cannot infer the shape of latent '{name}' from an indexed statement", s.target.span,
                 f"declare it in a latent block, e.g. 'latent {{ array[Q] matrix[N, D] {name}; }}'")
        if s.distribution.function == STUDENT_T_PROCESS:
            verify_student_t_process_arguments(s.distribution)
            inputs_arg = s.distribution.args[1]
        else:
            verify_gp_arguments(s.distribution)
            inputs_arg = s.distribution.args[0]
        if any(ref.name in loop_variables for ref in ast.references(inputs_arg)):
            fail(f"cannot infer the shape of latent '{name}' inside a loop", s.target.span,
                 f"declare it in a latent block, e.g. 'latent {{ array[T] vector[N] {name}; }}'")
        inputs = check_inputs(ctx, inputs_arg)
        observed = likelihood_shapes.get(name)
        index_shape = inputs.index_shape
        if (observed is not None and observed.container == "matrix" and not observed.array_dims
                and len(index_shape) == 1 and same_dim(observed.dims[0], index_shape[0])):
            vartype = VarType("real", "matrix", observed.dims)
        elif len(index_shape) == 1:
            vartype = VarType("real", "vector", index_shape)
        else:
            vartype = VarType("real", "vector", index_shape[-1:], index_shape[:-1])
        ctx.variables[name] = ir.Variable(name, "latent", vartype, s.target.span, declared=False)


def verify_latents_acyclic(ctx: CheckContext, blocks: dict[str, ast.Block]):
    """Fail at the first distribution, declared priors first, that makes a latent variable depend on itself.

    Parameters
    ----------
    ctx : CheckContext
        With every declaration.
    blocks : dict of str to gpdsl.syntax.ast.Block
        The program's blocks by kind.

    Raises
    ------
    ModelCheckError
        ``cycle X -> Z -> X``, see :func:`gpdsl.semantics.dependencies.verify_acyclic`.
    """
    tildes = [ast.Tilde(decl.span, ast.Target(decl.name_span, decl.name, ()), decl.prior)
              for decl in blocks["latent"].declarations if decl.prior is not None]
    tildes += distributions(blocks["model"].statements)
    latent = {t.target.name for t in tildes
              if t.target.name not in ctx.variables or ctx.variables[t.target.name].role == "latent"}
    verify_acyclic(tildes, latent)
