"""Source text, spans and excerpts with a caret."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

EXCERPT_WIDTH = 200
"""Characters of a source line shown in an error's excerpt (a longer line is cut around the column)."""
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` with the characters a terminal would act on or hide shown as escapes.

    C0 and C1 control characters (tab and newline kept), DEL and the bidirectional-text controls become
    ``\\xNN`` or ``\\uNNNN``, so that a name from a data or model file cannot move the cursor, recolour the
    terminal or reorder what a message shows.

    Parameters
    ----------
    text : str

    Returns
    -------
    str
    """
    return _CONTROLS.sub(lambda found: repr(found.group())[1:-1], text)


@dataclass(frozen=True)
class Source:
    """A model file's text and the name it is reported under.

    Parameters
    ----------
    text : str
        The full source text.
    name : str
        The file name shown in messages (``<string>`` for text not read from a file).
    """

    text: str
    name: str = "<string>"

    @cached_property
    def lines(self) -> list[str]:
        """The text's lines, without their newlines (split once: a model with thousands of warnings quotes them
        all)."""
        return self.text.splitlines()

    def line(self, lineno: int) -> str:
        """Return line ``lineno`` (1-based) without its newline, or ``""`` past the end."""
        return self.lines[lineno - 1] if 1 <= lineno <= len(self.lines) else ""

    def position(self, offset: int) -> tuple[int, int]:
        """Return the 1-based (line, column) of a character offset."""
        offset = max(0, min(offset, len(self.text)))
        line = self.text.count("\n", 0, offset) + 1
        column = offset - (self.text.rfind("\n", 0, offset) + 1) + 1
        return line, column


@dataclass(frozen=True)
class Span:
    """A region of a source: 1-based line and column of its start and end (end exclusive).

    Parameters
    ----------
    source : Source
        The source the span points into.
    line, column : int
        Start position.
    end_line, end_column : int
        End position; equal to the start for a point.
    """

    source: Source
    line: int
    column: int
    end_line: int
    end_column: int

    @classmethod
    def point(cls, source: Source, line: int, column: int) -> "Span":
        """A zero-width span at one position."""
        return cls(source, line, column, line, column)

    @classmethod
    def from_offsets(cls, source: Source, start: int, end: int) -> "Span":
        """A span between two character offsets."""
        line, column = source.position(start)
        end_line, end_column = source.position(end)
        return cls(source, line, column, end_line, end_column)

    def location(self) -> str:
        """``file:line:col``."""
        return f"{self.source.name}:{self.line}:{self.column}"

    def excerpt(self) -> str:
        """The source line with a caret (or a run of carets) under the span; a long line cut to
        :data:`EXCERPT_WIDTH` characters around the column, the cuts marked ``...``."""
        text = self.source.line(self.line)
        width = 1
        if self.end_line == self.line and self.end_column > self.column:
            width = self.end_column - self.column
        width = max(1, min(width, max(1, len(text) - self.column + 1)))
        column = self.column
        if len(text) > EXCERPT_WIDTH:
            start = max(0, min(column - 1 - EXCERPT_WIDTH // 2, len(text) - EXCERPT_WIDTH))
            head, tail = ("..." if start else ""), ("..." if start + EXCERPT_WIDTH < len(text) else "")
            text = head + text[start:start + EXCERPT_WIDTH] + tail
            column = column - start + len(head)
            width = min(width, EXCERPT_WIDTH - (column - 1 - len(head)))
        gutter = f"{self.line:>4} | "
        before, marked = printable(text[: column - 1]), printable(text[column - 1: column - 1 + width])
        pad = "".join("\t" if ch == "\t" else " " for ch in before)
        return f"{gutter}{printable(text)}\n{' ' * (len(gutter) - 2)}| {pad}{'^' * max(1, len(marked))}"
