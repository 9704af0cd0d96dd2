"""The error hierarchy: every user-facing problem is a :class:`GpdslError`.

A ``GpdslError`` with a :class:`~gpdsl.source.Span` renders as ``file:line:col: message``, the source
line and a caret. Anything else that escapes is an internal error (a bug in gpdsl).
"""

from __future__ import annotations

from gpdsl.source import Span


class GpdslError(Exception):
    """A problem the user can fix: bad model text, bad data, a method that does not fit.

    Parameters
    ----------
    message : str
        What is wrong, in one sentence.
    span : Span, optional
        Where in a model file; omitted for errors that are not about model text.
    hint : str, optional
        What to try, rendered on its own line after the excerpt.
    """

    kind = "error"

    def __init__(self, message: str, span: Span | None = None, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.span = span
        self.hint = hint

    def render(self) -> str:
        """The full message: location, text, excerpt with caret and hint."""
        head = f"{self.kind}: {self.message}"
        if self.span is not None:
            head = f"{self.span.location()}: {head}\n{self.span.excerpt()}"
        if self.hint:
            head += f"\n  hint: {self.hint}"
        return head

    def __str__(self) -> str:
        return self.render()


class ModelSyntaxError(GpdslError):
    """The model text does not parse."""

    kind = "syntax error"


class ModelCheckError(GpdslError):
    """The model parses but is ill-formed: names, types, shapes, constraints."""

    kind = "error"


class DataError(GpdslError):
    """Data disagree with the model's declarations (shape, type, constraint, NaN)."""

    kind = "data error"


class MethodError(GpdslError):
    """An inference method or backend cannot run this model or these settings."""

    kind = "method error"


class NumericalError(GpdslError):
    """A numerical failure (non-PD kernel matrix, NaN likelihood) with the values involved."""

    kind = "numerical error"


class BackendError(GpdslError):
    """A backend (stanc, PyStan, CmdStan) failed; the message carries its output."""

    kind = "backend error"


class DatasetError(GpdslError):
    """A dataset could not be found, downloaded or verified."""

    kind = "dataset error"


class CheckWarning:
    """A warning from the checker: a message and a span, printed by the CLI.

    Parameters
    ----------
    message : str
        The warning text.
    span : Span, optional
        Where it applies.
    """

    def __init__(self, message: str, span: Span | None = None):
        self.message = message
        self.span = span

    def render(self) -> str:
        """``file:line:col: warning: ...`` with the excerpt."""
        if self.span is None:
            return f"warning: {self.message}"
        return f"{self.span.location()}: warning: {self.message}\n{self.span.excerpt()}"

    def __repr__(self) -> str:
        return f"CheckWarning({self.message!r})"
