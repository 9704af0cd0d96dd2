"""Model text to the typed IR: parse, then check (the first two stages of the pipeline, in one call)."""

from __future__ import annotations

from gpdsl.errors import CheckWarning
from gpdsl.ir.nodes import Model
from gpdsl.semantics.check import check_program
from gpdsl.syntax.parser import parse


def check_text(text: str, name: str = "<string>") -> tuple[Model, list[CheckWarning]]:
    """Parse and check model text.

    Parameters
    ----------
    text : str
        Model source.
    name : str
        File name for messages.

    Returns
    -------
    model : Model
        The typed IR.
    warnings : list of CheckWarning
    """
    return check_program(parse(text, name))
