"""Why Stan could not start sampling: the reasons of an initialization failure, read from Stan's console text.

CmdStan writes one console file per chain and repeats the reason for each of its (up to 100) rejected
initial values; PyStan returns the same lines joined into one. Both are turned into the same few lines.
"""

from __future__ import annotations

import collections
import re

import numpy as np

from gpdsl.errors import BackendError

REJECTED = "Rejecting initial value:"
UNRECOVERABLE = "Unrecoverable error evaluating the log probability at the initial value."
FAILED = "Initialization failed"
_MARKERS = re.compile(
    r"Rejecting initial value:|Unrecoverable error evaluating the log probability at the initial value\."
    r"|Initialization between \(|Initialization failed"
)
_ATTEMPTS = re.compile(r"Initialization between \((-?[0-9.eE+-]+), ([0-9.eE+-]+)\) failed after (\d+) attempts")
_BOILERPLATE = (
    "Error evaluating the log probability at the initial value.",
    "Stan can't start sampling from this initial value.",
)
_LOCATION = re.compile(r"\(in '[^']*', ([^()]*)\)")
REASONS_SHOWN = 3
INIT_CHARACTERS = 240
HINT_DRAWN = (
    "a reason that names data (a scale of 0, a size) holds wherever Stan starts: check the data; otherwise give "
    "initial values (init) inside the parameters' support, or reparameterize"
)
HINT_GIVEN = "give initial values inside each parameter's declared bounds, or leave init out to let Stan draw them"


def rejection_reasons(console: str) -> list[str]:
    """The distinct reasons Stan gave for rejecting initial values, most frequent first.

    Parameters
    ----------
    console : str
        Stan's console output: CmdStan's console files of one run, or PyStan's error text.

    Returns
    -------
    list of str
        Each reason once, without Stan's ``Exception:`` prefix and with the program's file name left out
        of its location (``line 21, column 2 to column 39 of the Stan program``).
    """
    text = " ".join(console.split())
    counts: collections.Counter[str] = collections.Counter()
    marks = list(_MARKERS.finditer(text))
    for mark, following in zip(marks, marks[1:] + [None]):
        if mark.group() not in (REJECTED, UNRECOVERABLE):
            continue
        reason = _reason(text[mark.end():following.start() if following else len(text)])
        if reason:
            counts[reason] += 1
    return [reason for reason, _ in counts.most_common()]


def initialization_failure(console: str, init=None) -> BackendError | None:
    """Stan's initialization failure as a short :class:`~gpdsl.errors.BackendError`, or ``None``.

    Parameters
    ----------
    console : str
        Stan's console output (see :func:`rejection_reasons`).
    init : dict or list of dict, optional
        The initial values the run was given, shown in the message.

    Returns
    -------
    BackendError or None
        ``None`` when ``console`` reports no initialization failure.
    """
    if FAILED not in console and UNRECOVERABLE not in " ".join(console.split()):
        return None
    reasons = rejection_reasons(console)
    head = "Initialization failed: Stan rejected "
    attempts = _ATTEMPTS.search(" ".join(console.split()))
    if init is not None:
        head += f"the initial values given ({format_init(init)})"
    elif attempts:
        low, high, count = attempts.groups()
        head += f"every initial value it tried ({count} drawn uniformly from ({low}, {high}) on the unconstrained scale)"
    else:
        head += "every initial value it tried"
    lines = [head + ":" if reasons else head + "; Stan gave no reason"]
    lines += [f"  {reason}" for reason in reasons[:REASONS_SHOWN]]
    if len(reasons) > REASONS_SHOWN:
        lines.append(f"  and {len(reasons) - REASONS_SHOWN} other reasons")
    return BackendError("\n".join(lines), hint=HINT_DRAWN if init is None else HINT_GIVEN)


def format_init(init) -> str:
    """Initial values in one short line: ``mu=0.5, tau=-1`` (one dict per chain as ``chain 1: ...``)."""
    if isinstance(init, dict):
        text = ", ".join(f"{name}={_value(value)}" for name, value in init.items())
    else:
        chains = list(init)
        if all(_same(chain, chains[0]) for chain in chains):
            return format_init(chains[0])
        text = "; ".join(f"chain {number}: {format_init(chain)}" for number, chain in enumerate(chains, 1))
    return text if len(text) <= INIT_CHARACTERS else text[:INIT_CHARACTERS - 3] + "..."


def _reason(segment: str) -> str:
    exception = segment.find("Exception:")
    if exception >= 0:
        segment = segment[exception + len("Exception:"):]
    for sentence in _BOILERPLATE:
        segment = segment.replace(sentence, "")
    return _LOCATION.sub(r"(\1 of the Stan program)", " ".join(segment.split()))


def _value(value) -> str:
    array = np.asarray(value)
    if array.ndim == 0:
        return f"{array.item():.6g}" if np.issubdtype(array.dtype, np.floating) else str(array.item())
    return np.array2string(array, precision=4, threshold=6, edgeitems=2, separator=", ").replace("\n", "")


def _same(first: dict, second: dict) -> bool:
    return first.keys() == second.keys() and all(np.array_equal(first[k], second[k]) for k in first)
