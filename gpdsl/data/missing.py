"""Missing outcomes: NaN entries of a likelihood's observed variable, left out of the likelihood and imputed.

:func:`observed_masks` says which entries of each outcome are observed; :func:`verify_missing_outcomes` refuses
what cannot be marginalised exactly: an outcome with no observed entry, or one the model reads elsewhere than
as the target of its likelihood (a GP input, a likelihood argument, a prior's argument), or, outside the
GPLVMs, one observed in a loop, through indices or as a matrix.
"""

from __future__ import annotations

import numpy as np

from gpdsl.errors import DataError
from gpdsl.ir.nodes import ExternalLikelihood, LikelihoodStatement, Model
from gpdsl.ir.structure import expression_refs, statement_refs


def outcome_names(model: Model) -> list[str]:
    """The data variables observed through a likelihood (real or int), in declaration order."""
    targets = {statement.target.name for statement in model.likelihoods()}
    return [name for name in model.data if name in targets and name not in model.sizes]


def observed_masks(model: Model, data: dict) -> dict[str, np.ndarray]:
    """``{outcome: mask}`` (True where observed) of the outcomes that have missing (NaN) entries."""
    masks = {}
    for name in outcome_names(model):
        value = np.asarray(data.get(name, ()))
        if value.dtype.kind == "f" and np.isnan(value).any():
            masks[name] = ~np.isnan(value)
    return masks


def verify_missing_outcomes(model: Model, data: dict, whole_vectors: bool = True) -> None:
    """Refuse missing outcomes that a run cannot leave out of the likelihood exactly.

    Parameters
    ----------
    model : Model
    data : dict
        Validated data.
    whole_vectors : bool
        Outcomes with missing entries must be vectors (or one-dimensional arrays) observed whole by one
        likelihood statement outside loops (GP regression and latent-GP models); False for the GPLVMs, whose
        engines take a matrix of outputs with missing entries.

    Raises
    ------
    DataError
        Naming the outcome and, where the model is at fault, the statement (file:line:col).
    """
    for name, mask in observed_masks(model, data).items():
        if not mask.any():
            raise DataError(f"data '{name}' holds no observed value: every entry is NaN (missing)")
        where = f"data '{name}' has missing entries (NaN at {_first_missing(name, mask)})"
        for statement, loops in model.walk():
            if name in statement_refs(statement, indices=True) or any(
                    name in expression_refs(loop.start) | expression_refs(loop.stop) for loop in loops):
                raise DataError(f"{where}, but the model reads '{name}' here, not only as the target of its "
                                "likelihood: a missing value cannot be used", statement.span,
                                hint=f"give '{name}' in full, or drop the rows where it is missing")
            if not isinstance(statement, (LikelihoodStatement, ExternalLikelihood)) or statement.target.name != name:
                continue
            if isinstance(statement, ExternalLikelihood):
                raise DataError(f"{where}, but it is observed through an external likelihood, which receives "
                                "every entry", statement.span, hint="drop the rows where it is missing")
            if whole_vectors and (loops or statement.target.indices or mask.ndim != 1):
                raise DataError(f"{where}: missing outcomes are left out of a likelihood that observes a whole "
                                "vector outside loops, not of this one", statement.span,
                                hint="observe the outcome as a vector (y ~ dist(f, ...)), or drop the missing rows")


def _first_missing(name: str, mask: np.ndarray) -> str:
    index = np.argwhere(~mask)[0]
    return f"{name}[{', '.join(str(int(i) + 1) for i in index)}]"
