"""The ``log_likelihood``, ``posterior_predictive`` and ``predictions`` groups of a sampler's output, for every
sampler (NUTS included): the family the method runs the model as computes them from the draws
(:class:`~gpdsl.ir.families.Family`, ``draw_groups``; the groups of each family are described in
:mod:`gpdsl.inference.predict.draw_groups`).
"""

from __future__ import annotations

from gpdsl.ir.families import FAMILIES, classify, predicting_families


def drawing_family(model, family: str, facts):
    """``(Family, facts)`` whose draw groups serve a run of ``model`` as ``family``, or ``(None, None)``.

    The family the method runs the model as when it has draw groups; for a method of any model (NUTS), the
    model's own family among :func:`~gpdsl.ir.families.predicting_families`.
    """
    if family in FAMILIES and FAMILIES[family].draw_groups is not None:
        return FAMILIES[family], facts
    found = classify(model).facts
    name = next((f for f in predicting_families() if f in found), None)
    return (None, None) if name is None else (FAMILIES[name], found[name])


def add_draw_groups(output, model, data, context, *, pointwise: bool = True, approximation: str = "ep",
                    tol=None) -> None:
    """Fill ``output.log_likelihood``, ``output.posterior_predictive`` and ``output.predictions``.

    Parameters
    ----------
    output : MethodOutput
        A sampler's output; its ``posterior`` holds the hyperparameters by name (and ``f`` if recorded).
    model, data
        The checked model and its validated data.
    context : RunContext
        Family, facts, seed and new inputs.
    pointwise : bool
        Compute the pointwise groups (False when the method wrote them itself, as NUTS does).
    approximation : {"ep", "laplace"}
        For predictions of latent-GP models without f draws.
    tol : float, optional
        The approximation's convergence tolerance.
    """
    family, facts = drawing_family(model, context.family, context.facts)
    if family is not None:
        family.add_draw_groups(output, model, data, facts, context, pointwise=pointwise, approximation=approximation,
                               tol=tol)
