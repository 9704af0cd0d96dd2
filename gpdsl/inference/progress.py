"""Progress on standard error, for every stage of a run a user waits for: the chains' bar, the draw-by-draw work after
them (pointwise log-likelihood, replicates, predictions, latent draws), the optimisers' iterations.

A method opens a :func:`stage` with its run's ``progress`` flag; code inside it that works in batches (such as
:func:`gpdsl.inference.draw_map.over_draws`) moves the stage's bar with :func:`advance` without being told about
progress. Nothing is shown when the flag is off, and nothing shown changes what is computed.
"""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np

_CURRENT: ContextVar = ContextVar("gpdsl_progress_stage", default=None)


def bar(total: int, *, description: str | None = None, initial: int = 0, unit: str = "it", enabled: bool = True):
    """A tqdm bar on standard error, or None when ``enabled`` is False.

    Parameters
    ----------
    total : int
        Steps of the whole bar.
    description : str, optional
        Shown before the bar.
    initial : int
        Steps already done (a resumed run).
    unit : str
        What a step is.
    enabled : bool
        Show it.

    Returns
    -------
    tqdm.tqdm or None
    """
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, desc=description, file=sys.stderr, unit=unit, dynamic_ncols=True)


def say(text: str, enabled: bool = True) -> None:
    """One line on standard error (an optimiser's iteration, a stage without steps), when ``enabled``."""
    if enabled:
        print(text, file=sys.stderr, flush=True)


def counted(number: int, thing: str) -> str:
    """``"1 draw"``, ``"2 draws"``: a number of things in a stage's description."""
    return f"{number} {thing}{'' if number == 1 else 's'}"


@contextmanager
def stage(description: str, *, total: int | None = None, unit: str = "draw", enabled: bool = True):
    """Show a stage of work on standard error while the block runs.

    With ``total``, a bar of that many steps that :func:`advance` moves (it shows the time taken when it closes);
    without, the line ``description ...`` now and ``description: done in S s`` at the end. When ``enabled`` is
    False nothing is shown and :func:`advance` does nothing.

    Parameters
    ----------
    description : str
        What the stage does, e.g. ``"predictions at 68 new inputs"``.
    total : int, optional
        Its steps (e.g. the draws).
    unit : str
        What a step is.
    enabled : bool
        The run's progress flag.
    """
    current = _Stage(description, total, unit) if enabled else None
    token = _CURRENT.set(current)
    try:
        yield current
    finally:
        _CURRENT.reset(token)
        if current is not None:
            current.close()


def draw_stage(what: str, draws, enabled: bool = True):
    """The :func:`stage` of ``what`` computed for every draw of ``draws`` (an array ``(chain, draw, ...)``): a bar of
    ``chain * draw`` steps, shown when ``enabled``."""
    chains, num = (int(n) for n in np.shape(draws)[:2])
    return stage(what, total=chains * num, unit="draw", enabled=enabled)


def advance(steps: int = 1) -> None:
    """Move the bar of the stage the caller runs in by ``steps``; nothing outside a shown stage."""
    current = _CURRENT.get()
    if current is not None:
        current.advance(steps)


class _Stage:
    """A shown stage: its bar, or its start time for the closing line."""

    def __init__(self, description, total, unit):
        self.description = description
        self.started = time.perf_counter()
        self.bar = None if total is None else bar(total, description=description, unit=unit)
        if self.bar is None:
            say(f"{description} ...")

    def advance(self, steps):
        if self.bar is not None:
            self.bar.update(steps)

    def close(self):
        if self.bar is not None:
            self.bar.close()
        else:
            say(f"{self.description}: done in {time.perf_counter() - self.started:.1f} s")
