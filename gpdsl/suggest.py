"""'Did you mean' for a misspelt name: the one suggestion every command, run file and API call gives."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(name: str, candidates: Iterable[str]) -> str | None:
    """``did you mean 'x'?`` for the closest of ``candidates`` to ``name``, or None when none is close."""
    match = difflib.get_close_matches(str(name), [str(c) for c in candidates], n=1, cutoff=0.6)
    return f"did you mean '{match[0]}'?" if match else None


def unknown_name_hint(name: str, candidates: Iterable[str], what: str) -> str:
    """The suggestion for ``name``, or the list of the known ``what`` when none is close."""
    candidates = list(candidates)
    return did_you_mean(name, candidates) or f"the {what}: {', '.join(map(str, candidates))}"
