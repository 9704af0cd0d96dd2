"""Censored outcomes: ``y ~ normal_censored(mu, sigma, cens, upper)``, ``lognormal_censored(mu, sigma, cens,
upper)`` and ``weibull_censored(eta, shape, cens, upper)``.

The censoring code ``cens`` (integer data, one per observation or one for all) follows brms' ``cens()``:
``0`` the value ``y`` is observed (the density), ``1`` right-censored (the event is after ``y``: the log
survival function), ``-1`` left-censored (before ``y``: the log CDF), ``2`` interval-censored (between ``y``
and ``upper``: the log of the CDF's difference). ``upper`` is read only where ``cens = 2``; data without
interval censoring pass ``y`` itself. ``lognormal_censored`` is Stan's ``lognormal(mu, sigma)`` (``mu`` the
mean of ``log y``) and ``weibull_censored`` Stan's ``weibull(shape, exp(eta))``: a log-scale (accelerated
failure time) link, so a GP on ``eta`` or ``mu`` with right-censored times is a GP survival model.

Each family is a location-scale family of ``y`` or ``log y`` with a log-concave standard density (the
normal, the minimum-Gumbel for the Weibull), so the probability of every censoring event, an integral of
that density over a set, is log-concave in the location (Prekopa): the Laplace approximation runs all
three, with derivatives by automatic differentiation. Draws (``sample``, Stan's ``_rng``) are of the
uncensored outcome, which ``cens = 0`` observes.
"""

from __future__ import annotations

from gpdsl.likelihoods.base import Likelihood, StanArguments, autodiff_derivatives

CENSORING_CODES = {0: "observed", 1: "right-censored", -1: "left-censored", 2: "interval-censored"}
"""brms' censoring codes and what each says of ``y``."""


def _log_difference(log_a, log_b):
    """``log(exp(log_a) - exp(log_b))`` for ``log_a > log_b``."""
    import jax.numpy as jnp

    return log_a + jnp.log(-jnp.expm1(log_b - log_a))


def _censored(cens, y, upper, log_pdf, log_cdf, log_ccdf, log_interval):
    """The log probability of each observation's censoring event from the family's log functions.

    ``upper`` is replaced by a value above ``y`` where it is not read, so that no unused branch is NaN
    (``jnp.where`` passes the gradients of both branches).
    """
    import jax.numpy as jnp

    cens = jnp.asarray(cens)
    upper = jnp.where(cens == 2, upper, y + 1.0)
    return jnp.where(cens == 0, log_pdf(y), jnp.where(cens == 1, log_ccdf(y), jnp.where(
        cens == -1, log_cdf(y), log_interval(y, upper))))


def _normal_scale_log_density(on_log_scale: bool):
    """The censored log density of ``normal(mu, sigma)`` (``on_log_scale`` false) or of ``lognormal(mu, sigma)``
    (true): the normal's events for the standardised ``(y - mu) / sigma`` or ``(log y - mu) / sigma``, with the
    Jacobian ``-log y`` in the lognormal's density."""
    def log_density(y, mu, sigma, cens, upper):
        import jax.numpy as jnp

        from gpdsl.numerics.special import log_ndtr

        def z_of(v):
            return ((jnp.log(v) if on_log_scale else v) - mu) / sigma

        def log_pdf(v):
            z = z_of(v)
            jacobian = -jnp.log(v) if on_log_scale else 0.0
            return -0.5 * z * z - 0.5 * jnp.log(2.0 * jnp.pi) - jnp.log(sigma) + jacobian

        def log_interval(lower, upper):
            a, b = z_of(lower), z_of(upper)
            upper_tail = a > 0.0  # both ends above the location: difference of survival functions
            return jnp.where(upper_tail, _log_difference(log_ndtr(-a), log_ndtr(-b)),
                             _log_difference(log_ndtr(b), log_ndtr(a)))

        return _censored(cens, y, upper, log_pdf, lambda v: log_ndtr(z_of(v)), lambda v: log_ndtr(-z_of(v)),
                         log_interval)

    return log_density


def _weibull_log_density(y, eta, shape, cens, upper):
    import jax.numpy as jnp

    def cumulative_hazard(v):
        return jnp.exp(shape * (jnp.log(v) - eta))

    def log_pdf(v):
        return jnp.log(shape) - eta + (shape - 1.0) * (jnp.log(v) - eta) - cumulative_hazard(v)

    def log_interval(lower, upper):
        """``log(S(lower) - S(upper))`` with ``H(upper) - H(lower) = H(lower) expm1(shape log(upper / lower))``
        (no cancellation where both hazards are small)."""
        lower_hazard = cumulative_hazard(lower)
        gap = lower_hazard * jnp.expm1(shape * (jnp.log(upper) - jnp.log(lower)))
        return -lower_hazard + jnp.log(-jnp.expm1(-gap))

    return _censored(cens, y, upper, log_pdf, lambda v: jnp.log(-jnp.expm1(-cumulative_hazard(v))),
                     lambda v: -cumulative_hazard(v), log_interval)


def _normal_scale_sample(on_log_scale: bool):
    """Draws of the uncensored ``normal(mu, sigma)`` (``on_log_scale`` false) or ``lognormal(mu, sigma)`` (true)."""
    def sample(key, shape, mu, sigma, cens, upper):
        import jax
        import jax.numpy as jnp

        value = mu + sigma * jax.random.normal(key, shape)
        return jnp.exp(value) if on_log_scale else value

    return sample


def _weibull_sample(key, shape_, eta, shape, cens, upper):
    import jax
    import jax.numpy as jnp

    return jnp.exp(eta) * jax.random.exponential(key, shape_) ** (1.0 / shape)


def _spellings(function: str, params: tuple[str, str], rng: str):
    """``stan`` and ``stan_rng`` of a censored likelihood whose Stan log density is the template function
    ``<function>_lpdf`` (scalar and vector overloads, the codes an ``int`` or an ``array[] int``) and whose Stan
    draw is ``rng`` with each of ``{params}`` replaced by its argument."""
    def stan(y: str, args: StanArguments, vectorised: bool) -> str:
        first, second = (args[p] for p in params)
        cens, upper = args["cens"], args["upper"]
        if not vectorised:
            values = [first[0], second[0], cens[0], upper[0]]
        else:
            values = [f"to_vector({text})" if shaped else f"rep_vector({text}, size({y}))"
                      for text, shaped in (first, second)]
            values.append(cens[0] if cens[1] else f"rep_array({cens[0]}, size({y}))")
            values.append(f"to_vector({upper[0]})" if upper[1] else f"rep_vector({upper[0]}, size({y}))")
            y = f"to_vector({y})"
        return f"{function}_lpdf({y} | {', '.join(values)})"

    def stan_rng(args: StanArguments) -> str:
        return rng.format(**{p: args[p][0] for p in params})

    return stan, stan_rng


def _invalid(positive: bool):
    """``invalid_observations``: an unknown censoring code, an interval whose upper end is not above ``y``, or
    (``positive``) a value that is not positive."""
    def invalid(y, args):
        import numpy as np

        cens, upper = args.get("cens"), args.get("upper")
        if cens is not None:
            cens = np.broadcast_to(cens, np.shape(y))
            unknown = ~np.isin(cens, list(CENSORING_CODES))
            if unknown.any():
                return unknown, ("entries whose censoring code cens is 0 (observed), 1 (right), -1 (left) or "
                                 "2 (interval, up to upper)")
            if upper is not None:
                empty = (cens == 2) & ~(np.broadcast_to(upper, np.shape(y)) > y)
                if empty.any():
                    return empty, "a lower end below its upper bound where cens = 2 (interval-censored)"
        if positive:
            return ~(y > 0), "a positive value"
        return ~np.isfinite(y), "a finite value"

    return invalid


def _censored_likelihood(name, params, support, uncensored, log_density, sample, rng):
    """The censored likelihood ``name`` with the Stan template function ``<name>_lpdf``: ``uncensored`` names the
    outcome's distribution, ``rng`` is Stan's draw of it (a format string of ``params``), and the second of
    ``params`` is positive."""
    stan, stan_rng = _spellings(name, params, rng)
    doc = f"{uncensored} observed (cens = 0), right- (1), left- (-1) or interval-censored (2, up to upper)"
    return Likelihood(
        name, (*params, "cens", "upper"), support, doc, log_density=log_density, stan=stan, stan_rng=stan_rng,
        sample=sample, derivatives=autodiff_derivatives(log_density),
        param_support={params[1]: "positive", "cens": "censoring"}, integer_params=("cens",),
        invalid_observations=_invalid(support == "positive"))


NORMAL_CENSORED = _censored_likelihood(
    "normal_censored", ("mu", "sigma"), "real", "normal(mu, sigma)", _normal_scale_log_density(False),
    _normal_scale_sample(False), "normal_rng({mu}, {sigma})")
"""Censored real outcomes (a detection limit, a top-coded scale); log-concave in ``mu``."""

LOGNORMAL_CENSORED = _censored_likelihood(
    "lognormal_censored", ("mu", "sigma"), "positive", "lognormal(mu, sigma) (log y normal with mean mu)",
    _normal_scale_log_density(True), _normal_scale_sample(True), "lognormal_rng({mu}, {sigma})")
"""Censored positive outcomes (survival times) with the log-scale location ``mu``; log-concave in ``mu``."""

WEIBULL_CENSORED = _censored_likelihood(
    "weibull_censored", ("eta", "shape"), "positive",
    "Stan's weibull(shape, exp(eta)) (scale exp(eta), survival exp(-(y / exp(eta))^shape))", _weibull_log_density,
    _weibull_sample, "weibull_rng({shape}, exp({eta}))")
"""Censored survival times with log scale ``eta`` (an accelerated failure time model); log-concave in ``eta``."""
