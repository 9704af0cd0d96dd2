"""The blocks of a program: ``data``, ``parameters``, ``transformed parameters``, ``latent`` and ``model``, each at
most once, in that order."""

from __future__ import annotations

from gpdsl.semantics.context import fail
from gpdsl.source import Span
from gpdsl.syntax import ast

BLOCK_ORDER = ("data", "parameters", "transformed parameters", "latent", "model")
"""The blocks in the order a program writes them."""


def find_blocks(program: ast.Program) -> dict[str, ast.Block]:
    """The program's blocks by kind, an empty block for each one left out.

    Parameters
    ----------
    program : gpdsl.syntax.ast.Program

    Returns
    -------
    dict of str to gpdsl.syntax.ast.Block
        One per kind of :data:`BLOCK_ORDER`.

    Raises
    ------
    ModelCheckError
        For a block written twice or out of order, or a program with no model block.
    """
    found: dict[str, ast.Block] = {}
    last = -1
    for block in program.blocks:
        if block.kind in found:
            fail(f"the {block.kind} block appears twice", block.span,
                 f"merge it with the one at line {found[block.kind].span.line}")
        order = BLOCK_ORDER.index(block.kind)
        if order < last:
            fail(f"the {block.kind} block must come before the {BLOCK_ORDER[last]} block", block.span,
                 "blocks go in the order: " + ", ".join(BLOCK_ORDER))
        last = order
        found[block.kind] = block
    if "model" not in found:
        span = program.blocks[-1].span if program.blocks else Span.point(program.source, 1, 1)
        fail("the program has no model block", span, "add 'model { ... }' with at least one likelihood")
    empty = Span.point(program.source, 1, 1)
    for kind in BLOCK_ORDER:
        found.setdefault(kind, ast.Block(empty, kind))
    return found
