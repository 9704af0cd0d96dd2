"""Survival data expanded into piecewise-exponential rows, for a Cox model with a GP log hazard as Poisson counts.

Cut the time axis at ``0 = s_0 < s_1 < ... < s_J`` and let the hazard be constant within each piece,
``h_i(t) = exp(eta_ij)`` for ``t`` in ``(s_{j-1}, s_j]``. A subject followed up to ``t_i`` (an event there when
``event_i = 1``, right-censored when 0) has the log likelihood ``event_i eta_ij(t_i) - sum_j e_ij exp(eta_ij)``
with ``e_ij`` the time spent in piece ``j``. One row per subject and piece entered, with the count
``d_ij`` (1 in the piece where the event happened, else 0) and the offset ``log e_ij``, gives the same
function of ``eta`` as ``sum d_ij ~ poisson_log(log e_ij + eta_ij)`` up to the constant ``sum d_ij log e_ij``:
what ``y ~ poisson_log(log_exposure + f)`` fits (docs/language.md, "Survival models").
"""

from __future__ import annotations

import numpy as np

from gpdsl.errors import DataError


def piecewise_exponential_rows(time, event, cuts) -> dict[str, np.ndarray]:
    """One row per subject and time piece the subject entered.

    Parameters
    ----------
    time : array_like, shape (n,)
        Follow-up times, positive.
    event : array_like, shape (n,)
        1 where the follow-up ended with the event, 0 where it was right-censored.
    cuts : array_like, shape (J - 1,)
        Interior cut points, increasing and positive; pieces are ``(s_{j-1}, s_j]``, the last one open.

    Returns
    -------
    dict
        ``subject`` (1-based, int), ``piece`` (1-based, int), ``exposure`` (time spent in the piece, positive),
        ``log_exposure``, ``event`` (0/1 int: the event happened in this piece) and ``start`` (the piece's
        start, e.g. for a GP over time), each of one entry per row, subjects in order.

    Raises
    ------
    DataError
        For times that are not positive and finite, events other than 0 and 1, cut points that do not increase
        from above 0, or arrays of different lengths.
    """
    time, event = np.asarray(time, dtype=float), np.asarray(event)
    edges = np.concatenate([[0.0], np.asarray(cuts, dtype=float), [np.inf]])
    if time.ndim != 1 or event.shape != time.shape:
        raise DataError(f"time and event must be vectors of one length, got shapes {time.shape} and {event.shape}")
    bad = ~(np.isfinite(time) & (time > 0))
    if bad.any():
        raise DataError(f"time must be positive and finite: time[{int(np.argmax(bad)) + 1}] = {time[bad][0]:g}")
    bad = ~np.isin(event, (0, 1))
    if bad.any():
        raise DataError(f"event must be 0 (censored) or 1: event[{int(np.argmax(bad)) + 1}] = {event[bad][0]}")
    if not np.all(np.diff(edges) > 0):
        raise DataError(f"cuts must increase from above 0, got {list(np.asarray(cuts, dtype=float))}")
    rows = {"subject": [], "piece": [], "exposure": [], "event": [], "start": []}
    for i, (t, happened) in enumerate(zip(time, event)):
        last = int(np.searchsorted(edges, t, side="left")) - 1  # the piece (s_j, s_{j+1}] that holds t > 0
        last = max(last, 0)
        for j in range(last + 1):
            rows["subject"].append(i + 1)
            rows["piece"].append(j + 1)
            rows["exposure"].append(min(t, edges[j + 1]) - edges[j])
            rows["event"].append(int(happened) if j == last else 0)
            rows["start"].append(edges[j])
    out = {name: np.asarray(values) for name, values in rows.items()}
    out["log_exposure"] = np.log(out["exposure"])
    return out
