"""The ``log_likelihood``, ``posterior_predictive`` and ``predictions`` groups of a sampler's output.

One path for every method on the latent-GP and GP-regression families, NUTS included: from the named,
constrained draws in a :class:`~gpdsl.results.method_output.MethodOutput` (the hyperparameters, and ``f``
where the method records it) the groups are computed draw by draw (:mod:`gpdsl.inference.predict.draws`).

========================  ====================================  ==========================================
family                    log_likelihood and posterior_predictive  predictions (``--predict``)
========================  ====================================  ==========================================
latent GP, f recorded     ``log p(y_i | f_i, theta)``; y_rep       f* from the GP conditional given f, y*
latent GP, theta only     not written (needs f draws)           f* from the Gaussian approximation, y*
GP regression             exact LOO ``log p(y_i | y_-i, theta)``;  the exact predictive at each theta
                          y_rep from the exact conditional
========================  ====================================  ==========================================

NUTS writes its pointwise groups from Stan's generated quantities (the same quantities,
:mod:`gpdsl.backends.stan.codegen`) and takes only the predictions from here.
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
