"""A warning before a run when a continuous outcome is far from the scale that priors are usually written for.

Priors on a noise or signal variance mean something only on a scale: the shipped models' (and most users')
assume outputs of about unit variance around zero (``gpdsl data --standardize``). An outcome of a normal or
Student-t likelihood whose sd is outside [0.1, 10], or whose mean is more than two sds from zero, is named
with its mean and sd before the run starts, unless the data file records that it was standardised.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from gpdsl.ir.nodes import LikelihoodStatement, Model

LOCATION_SCALE = ("normal", "student_t")
SPREAD_RANGE = (0.1, 10.0)
MAX_MEAN_IN_SDS = 2.0


def outcome_scale_warnings(model: Model, data: Mapping[str, Any], standardised=()) -> list[str]:
    """One message per continuous outcome far from unit scale.

    Parameters
    ----------
    model : Model
        The checked model; a model without priors (every parameter point-estimated) gets no warning.
    data : mapping
        The validated data.
    standardised : iterable of str
        Data variables the data file records as standardised (:mod:`gpdsl.data.scaling`).

    Returns
    -------
    list of str
    """
    if not model.priors():
        return []
    skipped = set(standardised)
    messages = []
    for statement in model.likelihoods():
        name = statement.target.name
        if not isinstance(statement, LikelihoodStatement) or statement.distribution.name not in LOCATION_SCALE \
                or name in skipped or name not in data:
            continue
        skipped.add(name)
        values = np.asarray(data[name], dtype=float)
        columns = values.reshape(len(values), -1) if values.ndim > 1 else values.reshape(-1, 1)
        finite = [column[np.isfinite(column)] for column in columns.T]
        stats = [(float(np.mean(c)), float(np.std(c))) for c in finite if c.size > 1]
        far = [(mean, sd) for mean, sd in stats
               if not SPREAD_RANGE[0] <= sd <= SPREAD_RANGE[1] or abs(mean) > MAX_MEAN_IN_SDS * sd]
        if far:
            mean, sd = max(far, key=lambda pair: abs(np.log(max(pair[1], 1e-300))) + abs(pair[0]))
            shown = f"mean {mean:.4g} and sd {sd:.4g}"
            where = f"has {shown}" if len(stats) == 1 else \
                f"is far from unit scale in {len(far)} of its {len(stats)} columns (the farthest has {shown})"
            messages.append(f"data '{name}' {where}: the model's priors on noise "
                            f"and signal scales act in these units; standardise it (gpdsl data --standardize, or "
                            f"(value - mean) / sd) or check that the priors suit this scale")
    return messages
