"""What the Laplace approximation and EP need of a likelihood and of a latent-GP model, as refusals.

The registry's checks (``gpdsl methods``, and every run before it starts) and the approximations themselves
ask the same functions, so a model the listing accepts is one the approximation runs.
"""

from __future__ import annotations

from gpdsl.errors import MethodError
from gpdsl.likelihoods import LIKELIHOODS, capability, supporting

LIKELIHOOD_NEEDS = {
    "laplace": ("derivatives", "the Laplace approximation"),
    "ep": ("tilted_moments", "expectation propagation"),
}
"""What each approximation needs of the likelihood: a capability, and the method as messages name it."""

LAPLACE_ALTERNATIVES = "use --method gibbs (elliptical slice sampling of f) or nuts, or --approximation ep"
"""What the Laplace approximation's refusal of a likelihood that is not log-concave suggests."""


def likelihood_refusal(approximation: str, likelihood: str, what: str = "likelihood",
                       alternatives: str | None = None) -> str | None:
    """Why ``likelihood`` lacks what ``approximation`` needs of it, in one sentence, or None when it has it.

    Parameters
    ----------
    approximation : {"laplace", "ep"}
        A key of :data:`LIKELIHOOD_NEEDS`: the Laplace approximation needs ``derivatives`` of a log density
        concave in the latent value, expectation propagation ``tilted_moments`` (which every registered scalar
        likelihood has, by quadrature where it gives no closed form); a likelihood on rows of latent values
        (``categorical_logit``) has the multiclass Laplace approximation and no EP.
    likelihood : str
        A likelihood name.
    what : str
        What ``likelihood`` is, as the message names it.
    alternatives : str, optional
        What to use instead, ending the message (``"use --method gibbs"``); by default the options of ``pm``.
    """
    found = LIKELIHOODS.get(likelihood)
    if found is not None and found.latent_param in found.row_params:
        if approximation == "laplace":
            return None
        return (f"expectation propagation takes one latent value per observation; {what} is {likelihood}, with a "
                f"row of latent values per observation (a softmax): "
                f"{alternatives or 'use --approximation laplace (the multiclass Laplace approximation) or --method gibbs'}")
    if approximation == "laplace" and found is not None and not found.log_concave:
        return (f"the Laplace approximation needs a likelihood whose log density is concave in the latent value; "
                f"{what} is {likelihood}, which is not ({found.not_log_concave}): "
                f"{alternatives or LAPLACE_ALTERNATIVES}")
    field, method = LIKELIHOOD_NEEDS[approximation]
    if capability(likelihood, field) is not None:
        return None
    if alternatives is None and approximation == "laplace":
        alternatives = "use --method gibbs, which runs every built-in likelihood"
    elif alternatives is None:
        laplace_runs = found is not None and found.log_concave and found.derivatives is not None
        alternatives = f"use {'--approximation laplace or ' if laplace_runs else ''}--method gibbs"
    if approximation == "ep":
        return (f"{method} needs the tilted moments of a built-in likelihood (every one has them, by quadrature "
                f"where no closed form); {what} is {likelihood}: {alternatives}")
    names = supporting(field)
    listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
    return f"{method} supports {listed}; {what} is {likelihood}: {alternatives}"


def check_likelihood(approximation: str, likelihood: str, what: str = "likelihood") -> None:
    """Raise :class:`MethodError` unless ``likelihood`` has what ``approximation`` needs of it
    (:func:`likelihood_refusal`).

    Raises
    ------
    MethodError
        When ``likelihood`` lacks that capability.
    """
    refusal = likelihood_refusal(approximation, likelihood, what)
    if refusal is not None:
        raise MethodError(refusal)


def approximation_refusal(facts, approximation: str, alternatives: str | None = None) -> str | None:
    """Why a Gaussian approximation of ``f`` cannot run a latent-GP model, in one sentence, or None.

    Parameters
    ----------
    facts : LatentGPFacts
        The model's latent-GP facts (:mod:`gpdsl.ir.family_forms`).
    approximation : {"laplace", "ep"}
    alternatives : str, optional
        What to use instead (see :func:`likelihood_refusal`).

    Returns
    -------
    str or None
        The likelihood lacks what the approximation needs, the model samples several latent GP vectors, or the
        likelihood's latent argument is not ``f`` plus terms free of it.
    """
    if facts.others:
        names = ", ".join(node.name for node in facts.nodes)
        return (f"the Laplace and EP approximations need one latent GP vector; this model samples {names}: "
                "use --method gibbs, which samples each in turn")
    refusal = likelihood_refusal(approximation, facts.likelihood, "the model's likelihood", alternatives)
    if refusal is None and facts.likelihood in LIKELIHOODS and not facts.node.shifted:
        return (f"the Laplace and EP approximations need the latent argument of {facts.likelihood} to be "
                f"'{facts.node.name}' plus terms free of it (an offset): write the location as offset + "
                f"{facts.node.name}, or {alternatives or 'use --method gibbs'}")
    return refusal
