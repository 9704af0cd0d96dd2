"""Stan programs as block fragments, and the library of Stan functions that fills the functions block.

A :class:`StanBlocks` collects lines per Stan block; :meth:`StanBlocks.render` writes the blocks in
Stan's fixed order with a ``functions`` block holding only the template functions the other blocks
call (and the functions those call). Templates are the ``*.stan`` files of the
``gpdsl.stan_templates`` package: each function chunk starts with a ``/** ... */`` doc comment and
holds one function (or several overloads of it).
"""

from __future__ import annotations

import functools
import importlib.resources
import re
from dataclasses import dataclass, field

BLOCK_ORDER = (
    "functions",
    "data",
    "transformed data",
    "parameters",
    "transformed parameters",
    "model",
    "generated quantities",
)
"""Stan's blocks, in the order a program must list them."""

TEMPLATE_FILES = ("inputs.stan", "distributions.stan", "likelihoods.stan", "kernels.stan", "hsgp.stan",
                  "state_space.stan")
"""Template files, in the order their functions are emitted (helpers before their users)."""

INDENT = "  "

_SIGNATURE = re.compile(r"^[a-z][\w\[\], ]*?\b(\w+)\(", re.MULTILINE)


@dataclass(frozen=True)
class StanFunction:
    """One template chunk: a documented Stan function and its overloads.

    Parameters
    ----------
    name : str
        The function's name (``_lpdf`` suffix included).
    text : str
        The chunk: doc comment and definitions.
    calls : frozenset of str
        Other library functions it calls.
    """

    name: str
    text: str
    calls: frozenset[str] = frozenset()


@functools.cache
def function_library() -> dict[str, StanFunction]:
    """Every template function by name, in emission order."""
    chunks: list[tuple[str, str]] = []
    templates = importlib.resources.files("gpdsl.stan_templates")
    for filename in TEMPLATE_FILES:
        text = templates.joinpath(filename).read_text()
        for chunk in re.split(r"\n(?=/\*\*)", text)[1:]:
            names = _SIGNATURE.findall(chunk)
            if names:
                chunks.append((names[0], chunk.strip()))
    names = [name for name, _ in chunks]
    return {name: StanFunction(name, text, frozenset(n for n in names if n != name and calls(text, n)))
            for name, text in chunks}


def calls(code: str, function: str) -> bool:
    """Whether ``code`` calls ``function`` (``function(`` or, for a density, ``name_lpdf(`` / ``name(``)."""
    return re.search(rf"\b{re.escape(function)}\s*\(", code) is not None


def used_functions(code: str) -> list[StanFunction]:
    """Library functions ``code`` calls, with their dependencies, in emission order."""
    library = function_library()
    needed = {name for name in library if calls(code, name)}
    pending = list(needed)
    while pending:
        for dependency in library[pending.pop()].calls:
            if dependency not in needed:
                needed.add(dependency)
                pending.append(dependency)
    return [function for name, function in library.items() if name in needed]


@dataclass
class StanBlocks:
    """Lines of Stan code per block; nesting is written into the lines as leading indentation."""

    lines: dict[str, list[str]] = field(default_factory=lambda: {block: [] for block in BLOCK_ORDER})

    def add(self, block: str, *lines: str) -> None:
        """Append lines to a block."""
        self.lines[block].extend(lines)

    def merge(self, other: "StanBlocks") -> None:
        """Append every block of ``other`` to the same block of this one."""
        for block in BLOCK_ORDER:
            self.lines[block].extend(other.lines[block])

    def render(self, header: list[str]) -> str:
        """The program: header comment lines, the functions it needs, then the non-empty blocks."""
        body = [line for block in BLOCK_ORDER[1:] for line in self.lines[block]]
        functions = [f.text for f in used_functions("\n".join(body + self.lines["functions"]))]
        if self.lines["functions"]:
            functions.append("\n".join(self.lines["functions"]))
        out = list(header)
        if functions:
            out.append("functions {")
            out.append("\n\n".join(_indent(text) for text in functions))
            out.append("}")
        for block in BLOCK_ORDER[1:]:
            if self.lines[block] or block == "model":
                out.append(block + " {")
                out.extend(INDENT + line if line else line for line in self.lines[block])
                out.append("}")
        return "\n".join(out) + "\n"


def _indent(text: str) -> str:
    return "\n".join(INDENT + line if line else line for line in text.splitlines())
