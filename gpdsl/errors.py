"""The error hierarchy: every user-facing problem is a :class:`GpdslError`.

A ``GpdslError`` with a :class:`~gpdsl.source.Span` renders as ``file:line:col: message``, the source
line and a caret. Anything else that escapes is an internal error (a bug in gpdsl). Rendered messages show
control characters (from a data or model file) as escapes (:func:`~gpdsl.source.printable`).
"""

from __future__ import annotations

from gpdsl.source import Span, printable


class GpdslError(Exception):
    """A problem the user can fix: bad model text, bad data, a method that does not fit.

    A subclass names its kind of problem, the label before the message (``data error: ...``), as a
    class keyword: ``class DataError(GpdslError, kind="data error")``; without one it keeps its base's.

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

    def __init_subclass__(cls, kind: str | None = None, **kwargs):
        super().__init_subclass__(**kwargs)
        if kind is not None:
            cls.kind = kind

    def __init__(self, message: str, span: Span | None = None, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.span = span
        self.hint = hint

    def render(self) -> str:
        """The full message: location, text, excerpt with caret and hint."""
        head = f"{self.kind}: {printable(str(self.message))}"
        if self.span is not None:
            head = f"{printable(self.span.location())}: {head}\n{self.span.excerpt()}"
        if self.hint:
            head += f"\n  hint: {printable(str(self.hint))}"
        return head

    def __str__(self) -> str:
        return self.render()


class ModelSyntaxError(GpdslError, kind="syntax error"):
    """The model text does not parse."""


class ModelCheckError(GpdslError, kind="error"):
    """The model parses but is ill-formed: names, types, shapes, constraints."""


class DataError(GpdslError, kind="data error"):
    """Data disagree with the model's declarations (shape, type, constraint, NaN)."""


class MethodError(GpdslError, kind="method error"):
    """An inference method or backend cannot run this model or these settings."""


class NumericalError(GpdslError, kind="numerical error"):
    """A numerical failure (non-PD kernel matrix, NaN likelihood) with the values involved."""


class BackendError(GpdslError, kind="backend error"):
    """A backend (stanc, PyStan, CmdStan) failed; the message carries its output."""


class DatasetError(GpdslError, kind="dataset error"):
    """A dataset could not be found, downloaded or verified."""


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
            return f"warning: {printable(self.message)}"
        return f"{printable(self.span.location())}: warning: {printable(self.message)}\n{self.span.excerpt()}"

    def __repr__(self) -> str:
        return f"CheckWarning({self.message!r})"
