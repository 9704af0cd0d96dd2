"""The library API the CLI and case studies use: load and check models."""

from __future__ import annotations

from pathlib import Path

from gpdsl.errors import CheckWarning
from gpdsl.ir.nodes import Model
from gpdsl.semantics.check import check_program
from gpdsl.syntax.parser import parse, parse_file


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


def check_file(path: str | Path) -> tuple[Model, list[CheckWarning]]:
    """Parse and check a ``.gpm`` file (see :func:`check_text`)."""
    return check_program(parse_file(path))


def load_model(path_or_text: str | Path) -> Model:
    """The checked model of a file path, or of model text if it contains a newline or brace."""
    text = str(path_or_text)
    if isinstance(path_or_text, Path) or ("{" not in text and "\n" not in text):
        return check_file(path_or_text)[0]
    return check_text(text)[0]
