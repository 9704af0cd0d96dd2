"""'Did you mean' for a misspelt name: the one suggestion every command, run file and API call gives."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def edit_distance(a: str, b: str) -> int:
    """Damerau-Levenshtein distance (optimal string alignment): a transposition of neighbours is one edit.

    Parameters
    ----------
    a, b : str
        The two names.

    Returns
    -------
    int
        The fewest insertions, deletions, substitutions and swaps of adjacent characters that turn ``a``
        into ``b`` (no substring edited twice): ``edit_distance("matern23", "matern32") == 1``.
    """
    previous, current = None, list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        before, previous, current = previous, current, [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                current[j] = min(current[j], before[j - 2] + 1)
    return current[len(b)]


LONGEST_NAME = 100
"""Names (and candidates) longer than this get no suggestion: comparing them costs the product of their lengths,
and nobody misspells a name that long."""


def closest(name: str, candidates: Iterable[str], fallback: bool = True) -> str | None:
    """The candidate nearest to ``name``, or None when none is close.

    Candidates within ``max(1, len(name) // 3)`` edits (:func:`edit_distance`) come first, the fewest
    edits winning, then the higher :mod:`difflib` similarity, then the earlier candidate; failing those,
    and if ``fallback``, :func:`difflib.get_close_matches` with a cutoff of 0.6. Names and candidates longer
    than :data:`LONGEST_NAME` are never compared.
    """
    name = str(name)
    if len(name) > LONGEST_NAME:
        return None
    candidates = [c for c in dict.fromkeys(str(c) for c in candidates) if len(c) <= LONGEST_NAME]
    limit = max(1, len(name) // 3)
    ranked = sorted(
        (edit_distance(name, c), -difflib.SequenceMatcher(None, name, c).ratio(), i, c)
        for i, c in enumerate(candidates))
    if ranked and ranked[0][0] <= limit:
        return ranked[0][-1]
    if not fallback:
        return None
    match = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    return match[0] if match else None


def did_you_mean(name: str, candidates: Iterable[str]) -> str | None:
    """``did you mean 'x'?`` for the closest of ``candidates`` to ``name``, or None when none is close."""
    match = closest(name, candidates)
    return f"did you mean '{match}'?" if match else None


def unknown_name_hint(name: str, candidates: Iterable[str], what: str) -> str:
    """The suggestion for ``name``, or the list of the known ``what`` when none is close."""
    candidates = list(candidates)
    return did_you_mean(name, candidates) or f"the {what}: {', '.join(map(str, candidates))}"
