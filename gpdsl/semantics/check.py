"""The checker: AST to typed IR, with name resolution, types, shapes and constraints.

``check_program`` returns the :class:`~gpdsl.ir.nodes.Model` and a list of warnings, or raises a
:class:`~gpdsl.errors.ModelCheckError` carrying a span.

This module only sets the order of the checks. Each concern has its own module in
:mod:`gpdsl.semantics`, a set of functions sharing a :class:`~gpdsl.semantics.context.CheckContext`
(see there why functions rather than a class):

========================  =========================================================
``blocks``                which blocks, in which order
``declarations``          declared variables: roles, types, sizes, bounds
``transformed``           transformed parameters: typed values that stand in for their names
``latents``               types of undeclared GP targets; no cyclic latent values
``statements``            ``~`` statements and loops, dispatched by their target
``gp``                    ``gp(inputs, kernel, mean = m)``, ``student_t_process(nu, inputs, kernel)``
``kernels``               kernel expressions and their hyperparameters
``distributions``         the arguments of a distribution
``priors``                priors, and their fit to declared constraints
``likelihoods``           likelihoods on data, ``external(...)``
``expressions``           names, arithmetic, indexing, function calls
``constants``             values of constant expressions
``shapes``                comparing and printing shapes
``whole_program``         what is judged once every statement is checked
========================  =========================================================
"""

from __future__ import annotations

from gpdsl.errors import CheckWarning
from gpdsl.ir import nodes as ir
from gpdsl.semantics.blocks import BLOCK_ORDER, find_blocks
from gpdsl.semantics.context import CheckContext
from gpdsl.semantics.declarations import LARGEST_SIZE, declare
from gpdsl.semantics.approximations import verify_latent_hsgp_priors
from gpdsl.semantics.gp import verify_student_t_processes
from gpdsl.semantics.latents import infer_latents, verify_latents_acyclic
from gpdsl.semantics.statements import check_declared_prior, check_statement
from gpdsl.semantics.transformed import define
from gpdsl.semantics.whole_program import verify_whole_program
from gpdsl.syntax import ast

__all__ = ["LARGEST_SIZE", "check_program"]


def check_program(program: ast.Program) -> tuple[ir.Model, list[CheckWarning]]:
    """Check a parsed program and build its typed IR.

    Parameters
    ----------
    program : gpdsl.syntax.ast.Program
        The parsed model.

    Returns
    -------
    model : gpdsl.ir.nodes.Model
    warnings : list of CheckWarning

    Raises
    ------
    ModelCheckError
        The first problem found, with its span.
    """
    ctx = CheckContext(program)
    blocks = find_blocks(program)
    for kind in BLOCK_ORDER:
        for decl in blocks[kind].declarations:
            ctx.declarations.setdefault(decl.name, decl)
    for decl in blocks["data"].declarations:
        declare(ctx, decl, "data")
    statements: list[ir.Statement] = []
    for decl in blocks["parameters"].declarations:
        declare(ctx, decl, "parameter")
    transformed = [define(ctx, decl) for decl in blocks["transformed parameters"].declarations]
    for decl in blocks["latent"].declarations:
        declare(ctx, decl, "latent")
    verify_latents_acyclic(ctx, blocks)
    for decl in blocks["parameters"].declarations + blocks["latent"].declarations:
        if decl.prior is not None:
            statements.append(check_declared_prior(ctx, decl))
    infer_latents(ctx, blocks["model"].statements)
    for statement in blocks["model"].statements:
        statements.append(check_statement(ctx, statement))
    verify_whole_program(ctx)
    verify_student_t_processes(statements)
    verify_latent_hsgp_priors(statements)
    model = ir.Model(
        source=program.source,
        sizes=tuple(ctx.sizes),
        data={n: v for n, v in ctx.variables.items() if v.role == "data"},
        parameters={n: v for n, v in ctx.variables.items() if v.role == "parameter"},
        latents={n: v for n, v in ctx.variables.items() if v.role == "latent"},
        statements=tuple(statements),
        transformed={t.name: t for t in transformed},
    )
    return model, ctx.warnings
