"""Stationary kernels: functions of the scaled distance between inputs."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from gpdsl.errors import MethodError, ModelCheckError
from gpdsl.kernel_table import KERNEL_SPECS
from gpdsl.kernels.base import Kernel
from gpdsl.kernels.params import check_ard, safe_sqrt, scaled_sqdist, sum_over_inputs
from gpdsl.kernels.state_space import (PERIODIC_ORDER, StateSpace, cosine_series, cosine_series_transitions,
                                       cosine_series_weights)


class RBF(Kernel):
    r"""Squared-exponential kernel ``variance * exp(-r^2 / 2)``.

    ``r^2 = sum_d (x_d - x'_d)^2 / l_d^2`` with ``lengthscale`` ``l``, or equivalently
    ``r^2 = sum_d w_d (x_d - x'_d)^2`` with inverse squared length-scales
    ``inv_ls2`` ``w_d = 1 / l_d^2`` (GPy/Titsias ARD weights). Give exactly one of the two.
    Matches ``GPy.kern.RBF``.

    Parameters
    ----------
    variance : float
        Marginal variance ``k(x, x)``.
    lengthscale : float or array of shape (d,), optional
        Isotropic (scalar) or ARD (one per active input dimension) length-scale.
    inv_ls2 : float or array of shape (d,), optional
        Inverse squared length-scale(s), instead of ``lengthscale``.
    active_dims : tuple of int or slice, optional
        Input columns the kernel sees; all by default.
    """

    spec = KERNEL_SPECS["rbf"]
    lengthscale = None
    inv_ls2 = None

    def __init__(self, variance=1.0, lengthscale=None, inv_ls2=None, *, active_dims=None):
        if (lengthscale is None) == (inv_ls2 is None):
            raise ModelCheckError("rbf() needs exactly one of lengthscale, inv_ls2")
        if lengthscale is not None:
            self._set_hyperparameters(active_dims, variance=variance, lengthscale=lengthscale)
        else:
            self._set_hyperparameters(active_dims, variance=variance, inv_ls2=inv_ls2)

    def evaluate(self, x1, x2):
        scale = self.lengthscale if self.lengthscale is not None else self.inv_ls2
        check_ard(scale, self._param_names[1], "rbf", x1.shape[-1])
        r2 = scaled_sqdist(x1, x2, self.lengthscale, self.inv_ls2)
        return self.variance * jnp.exp(-0.5 * r2)

    def spectral_density(self, omega):
        """``variance (2 pi)^(D/2) prod_d l_d exp(-sum_d l_d^2 omega_d^2 / 2)``."""
        omega = jnp.atleast_2d(jnp.asarray(omega, dtype=float))
        scale = self.lengthscale if self.lengthscale is not None else 1.0 / jnp.sqrt(self.inv_ls2)
        scale = jnp.broadcast_to(scale, omega.shape[-1:])
        dims = omega.shape[-1]
        return (self.variance * (2.0 * jnp.pi) ** (dims / 2.0) * jnp.prod(scale)
                * jnp.exp(-0.5 * jnp.sum(jnp.square(scale * omega), axis=-1)))


def matern_spectral_density(nu: float, variance, lengthscale, omega) -> jax.Array:
    """The spectral density of the Matérn kernel of order ``nu`` at the rows of ``omega`` (M, D), ARD or not:
    ``variance 2^D pi^(D/2) Gamma(nu + D/2) (2 nu)^nu / Gamma(nu) prod_d l_d (2 nu + sum_d l_d^2
    omega_d^2)^(-(nu + D/2))`` (Rasmussen & Williams 2006, eq. 4.15, with a length-scale per input)."""
    omega = jnp.atleast_2d(jnp.asarray(omega, dtype=float))
    dims = omega.shape[-1]
    scale = jnp.broadcast_to(lengthscale, omega.shape[-1:])
    log_constant = (dims * math.log(2.0) + 0.5 * dims * math.log(math.pi) + math.lgamma(nu + dims / 2.0)
                    + nu * math.log(2.0 * nu) - math.lgamma(nu))
    quadratic = 2.0 * nu + jnp.sum(jnp.square(scale * omega), axis=-1)
    return variance * math.exp(log_constant) * jnp.prod(scale) * quadratic ** (-(nu + dims / 2.0))


def _matern_doc(title: str, name: str, gpy: str) -> str:
    """The docstring of a Matérn kernel class: its covariance is the table's doc text."""
    return f"""{title} kernel ``{KERNEL_SPECS[name].doc}``.

    ``r = sqrt(sum_d (x_d - x'_d)^2 / l_d^2)``. Matches ``GPy.kern.{gpy}``.

    Parameters
    ----------
    variance : float
        Marginal variance.
    lengthscale : float or array of shape (d,)
        Isotropic or ARD length-scale.
    active_dims : tuple of int or slice, optional
        Input columns the kernel sees.
    """


class _Matern(Kernel):
    """A half-integer Matérn kernel ``variance * polynomial(s) * exp(-s)`` with ``s = sqrt(2 nu) r``.

    A subclass gives its :mod:`gpdsl.kernel_table` name, the title and GPy class its docstring names
    (:func:`_matern_doc`) and ``two_nu`` (``2 nu``) as class keywords, and defines the static methods
    ``polynomial`` and ``companion`` (its state-space form).

    Over a scalar input the kernel of order ``nu = p + 1/2`` is the covariance of the first component of
    the state ``(f, f', ..., f^(p))`` of ``d = p + 1`` dimensions (Hartikainen & Särkkä 2010): ``F`` is the
    companion matrix of ``(x + rate)^d``, ``rate = sqrt(2 nu) / lengthscale``, driven through its last
    component (``L = e_d``) by white noise of spectral density ``Qc = 2^(2p+1) (p!)^2 / (2p)! variance
    rate^(2p+1)``, and ``H = e_1``. ``N = F + rate I`` is nilpotent, so ``expm(F dt) = exp(-rate dt) sum_{j<d}
    (N dt)^j / j!`` exactly (:meth:`discretise`).
    """

    two_nu: float
    has_state_space = True

    def __init_subclass__(cls, *, name: str, title: str, gpy: str, two_nu: float, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.spec = KERNEL_SPECS[name]
        cls.__doc__ = _matern_doc(title, name, gpy)
        cls.two_nu = two_nu

    def __init__(self, variance=1.0, lengthscale=None, *, active_dims=None):
        self._set_hyperparameters(active_dims, variance=variance, lengthscale=lengthscale)

    def evaluate(self, x1, x2):
        check_ard(self.lengthscale, "lengthscale", self.spec.name, x1.shape[-1])
        s = jnp.sqrt(self.two_nu) * safe_sqrt(scaled_sqdist(x1, x2, self.lengthscale))
        return self.variance * (self.polynomial(s) * jnp.exp(-s))

    def spectral_density(self, omega):
        """:func:`matern_spectral_density` of order ``nu = two_nu / 2``."""
        return matern_spectral_density(self.two_nu / 2.0, self.variance, self.lengthscale, omega)

    def _rate_and_companion(self) -> tuple[jax.Array, jax.Array, jax.Array]:
        """``(rate, P_inf, N)``: ``F = N - rate I`` with ``N`` nilpotent.

        Raises
        ------
        MethodError
            The kernel has several length-scales (a state space needs a scalar input).
        """
        if self.lengthscale.size != 1:
            raise MethodError(f"{self.spec.name}() has a state-space form over one input only; "
                              f"got {self.lengthscale.size} length-scales")
        rate = jnp.sqrt(self.two_nu) / jnp.reshape(self.lengthscale, ())
        return rate, *self.companion(self.variance, rate)

    def state_space(self, periodic_order: int = PERIODIC_ORDER) -> StateSpace:
        """:meth:`Kernel.state_space`, the SDE of the class docstring (``L`` is ``(d, 1)``, ``Qc`` ``(1, 1)``).

        Raises :class:`~gpdsl.errors.MethodError` when the kernel has several length-scales.
        """
        rate, P_inf, nilpotent = self._rate_and_companion()
        d = P_inf.shape[0]
        p = d - 1
        constant = 2.0 ** (2 * p + 1) * math.factorial(p) ** 2 / math.factorial(2 * p)
        density = constant * self.variance * rate ** (2 * p + 1)
        return StateSpace(nilpotent - rate * jnp.eye(d), jnp.eye(d, 1, -p), jnp.reshape(density, (1, 1)),
                          jnp.eye(1, d), P_inf)

    def discretise(self, dt, periodic_order: int = PERIODIC_ORDER) -> tuple[jax.Array, jax.Array]:
        """:meth:`Kernel.discretise`, ``expm(F dt)`` by the finite series of the nilpotent part (class docstring).

        Raises :class:`~gpdsl.errors.MethodError` when the kernel has several length-scales.
        """
        rate, P_inf, nilpotent = self._rate_and_companion()
        d = P_inf.shape[0]
        dt = jnp.asarray(dt)
        lead = (None,) * dt.ndim
        dt = dt[..., None, None]
        series, power = jnp.eye(d)[lead], jnp.eye(d)[lead]
        for j in range(1, d):
            power = power @ (nilpotent[lead] * dt) / j
            series = series + power
        return jnp.exp(-rate * dt) * series, P_inf


def _matrix(rows) -> jax.Array:
    """A small matrix from nested lists of scalars and scalar arrays."""
    return jnp.stack([jnp.stack([jnp.asarray(x, dtype=float) for x in row]) for row in rows])


class Matern12(_Matern, name="matern12", title="Matérn-1/2 (exponential)", gpy="Exponential", two_nu=1.0):
    @staticmethod
    def polynomial(s):
        """The polynomial of ``variance * polynomial(s) * exp(-s)``, ``s = r``: 1."""
        return 1.0

    @staticmethod
    def companion(variance, rate):
        """``(P_inf, N)`` of the state ``f``: an Ornstein-Uhlenbeck process."""
        return jnp.reshape(variance, (1, 1)), jnp.zeros((1, 1))


class Matern32(_Matern, name="matern32", title="Matérn-3/2", gpy="Matern32", two_nu=3.0):
    @staticmethod
    def polynomial(s):
        """The polynomial of ``variance * polynomial(s) * exp(-s)``, ``s = sqrt(3) r``: ``1 + s``."""
        return 1.0 + s

    @staticmethod
    def companion(variance, rate):
        """``(P_inf, N)`` of the state ``(f, f')``."""
        return jnp.diag(jnp.stack([variance, rate ** 2 * variance])), _matrix([[rate, 1.0], [-rate ** 2, -rate]])


class Matern52(_Matern, name="matern52", title="Matérn-5/2", gpy="Matern52", two_nu=5.0):
    @staticmethod
    def polynomial(s):
        """The polynomial of ``variance * polynomial(s) * exp(-s)``, ``s = sqrt(5) r``: ``1 + s + s^2 / 3``."""
        return 1.0 + s + s * s / 3.0

    @staticmethod
    def companion(variance, rate):
        """``(P_inf, N)`` of the state ``(f, f', f'')``."""
        kappa = variance * rate ** 2 / 3.0
        P_inf = _matrix([[variance, 0.0, -kappa], [0.0, kappa, 0.0], [-kappa, 0.0, rate ** 4 * variance]])
        return P_inf, _matrix([[rate, 1.0, 0.0], [0.0, rate, 1.0], [-rate ** 3, -3.0 * rate ** 2, -2.0 * rate]])


class Periodic(Kernel):
    """Standard periodic kernel in GPy's ``StdPeriodic`` parameterisation.

    ``k(x, x') = variance * exp(-1/2 * sum_d sin^2(pi (x_d - x'_d) / p_d) / l_d^2)``

    This is GPy's form, with the factor ``1/2`` and the sum over dimensions inside the
    exponential. MacKay's form ``exp(-2 sin^2(pi |x - x'| / p) / l^2)`` is the same kernel
    with ``l_MacKay = 2 * l``.

    Parameters
    ----------
    variance : float
        Marginal variance.
    lengthscale : float or array of shape (d,)
        Isotropic or ARD length-scale (GPy's ``ARD2``).
    period : float or array of shape (d,)
        Isotropic or per-dimension period (GPy's ``ARD1``).
    active_dims : tuple of int or slice, optional
        Input columns the kernel sees.

    Notes
    -----
    Over a scalar input, with ``z = 1 / (4 l^2)`` and ``w = 2 pi / p``, ``sin^2(x) = (1 - cos 2x) / 2`` and the
    generating function of the modified Bessel functions give the cosine series (Solin & Särkkä 2014)

        ``k(tau) = variance exp(-z) [I_0(z) + 2 sum_{j >= 1} I_j(z) cos(j w tau)]``,

    all of whose coefficients are positive. Its first ``J`` harmonics (``periodic_order``) are the state-space form
    (:func:`~gpdsl.kernels.state_space.cosine_series`, a state of ``2 J + 1`` dimensions). The truncated kernel
    differs from the exact one by at most the dropped coefficients' sum, reached at ``tau = 0`` (and every whole
    period), :meth:`truncation_error`. The coefficients ``exp(-z) I_j(z)`` fall off like ``(z / 2)^j / j!`` once
    ``j`` passes ``z``, and like ``exp(-j^2 / (2 z))`` before that, so ``J`` must grow like ``1 / l``: the default
    ``J = 7`` leaves a relative error of 8e-8 at ``l = 0.5``, 6e-5 at ``l = 0.3`` and 2.5e-2 at ``l = 0.15``.
    """

    spec = KERNEL_SPECS["periodic"]
    has_state_space = True

    def __init__(self, variance=1.0, lengthscale=None, period=None, *, active_dims=None):
        self._set_hyperparameters(active_dims, variance=variance, lengthscale=lengthscale, period=period)

    def evaluate(self, x1, x2):
        check_ard(self.lengthscale, "lengthscale", "periodic", x1.shape[-1])
        check_ard(self.period, "period", "periodic", x1.shape[-1])
        sines = jnp.sin(jnp.pi * (x1 - x2) / self.period) / self.lengthscale
        return self.variance * jnp.exp(-0.5 * sum_over_inputs(jnp.square(sines)))

    def series_coefficients(self, periodic_order: int = PERIODIC_ORDER) -> tuple[jax.Array, jax.Array]:
        """The coefficients ``c_0 .. c_J`` of the truncated cosine series (class notes) and its frequency ``w``.

        Raises
        ------
        MethodError
            The kernel has several length-scales or periods (a state space needs a scalar input).
        """
        for name in ("lengthscale", "period"):
            if getattr(self, name).size != 1:
                raise MethodError(f"periodic() has a state-space form over one input only; "
                                  f"got {getattr(self, name).size} values of {name}")
        concentration = 0.25 / jnp.square(jnp.reshape(self.lengthscale, ()))
        weights = cosine_series_weights(concentration, periodic_order)
        coefficients = self.variance * weights * jnp.concatenate([jnp.ones(1), jnp.full(periodic_order, 2.0)])
        return coefficients, 2.0 * jnp.pi / jnp.reshape(self.period, ())

    def truncation_error(self, periodic_order: int = PERIODIC_ORDER) -> jax.Array:
        """``max_tau |k(tau) - k_J(tau)|`` of the series truncated after ``J`` harmonics: ``variance - sum_j c_j``."""
        coefficients, _ = self.series_coefficients(periodic_order)
        return self.variance - jnp.sum(coefficients)

    def state_space(self, periodic_order: int = PERIODIC_ORDER) -> StateSpace:
        """:meth:`Kernel.state_space` of the truncated cosine series (class notes), ``2 J + 1`` dimensions.

        Raises :class:`~gpdsl.errors.MethodError` when the kernel has several length-scales or periods.
        """
        return cosine_series(*self.series_coefficients(periodic_order))

    def discretise(self, dt, periodic_order: int = PERIODIC_ORDER) -> tuple[jax.Array, jax.Array]:
        """:meth:`Kernel.discretise`: ``expm(F dt)`` is a rotation of each harmonic's two components."""
        coefficients, frequency = self.series_coefficients(periodic_order)
        return (cosine_series_transitions(periodic_order, frequency, dt),
                cosine_series(coefficients, frequency).P_inf)


class RationalQuadratic(Kernel):
    """Rational quadratic kernel ``variance * (1 + r^2 / (2 alpha))^(-alpha)``.

    ``r^2 = sum_d (x_d - x'_d)^2 / l_d^2``, as for :class:`RBF`. It is a scale mixture of RBF kernels
    whose inverse squared length-scales are gamma distributed with shape ``alpha`` (Rasmussen & Williams
    2006, eq. 4.19), and tends to the RBF kernel as ``alpha -> inf``. GPflow's ``RationalQuadratic``;
    GPy's ``RatQuad`` lacks the ``2 alpha`` (it is ``(1 + r^2 / 2)^(-power)``).

    Parameters
    ----------
    variance : float
        Marginal variance.
    lengthscale : float or array of shape (d,)
        Isotropic or ARD length-scale.
    alpha : float
        Shape of the mixture over length-scales; smaller values mix more scales.
    active_dims : tuple of int or slice, optional
        Input columns the kernel sees.
    """

    spec = KERNEL_SPECS["rational_quadratic"]

    def __init__(self, variance=1.0, lengthscale=None, alpha=1.0, *, active_dims=None):
        self._set_hyperparameters(active_dims, variance=variance, lengthscale=lengthscale, alpha=alpha)

    def evaluate(self, x1, x2):
        check_ard(self.lengthscale, "lengthscale", self.spec.name, x1.shape[-1])
        r2 = scaled_sqdist(x1, x2, self.lengthscale)
        return self.variance * jnp.exp(-self.alpha * jnp.log1p(r2 / (2.0 * self.alpha)))


class Matern(Kernel):
    """Matérn kernel of a half-integer order ``nu = p + 1/2`` (``p = 0, 1, 2, ...``).

    ``k = variance exp(-s) p!/(2p)! sum_{i=0}^{p} (p+i)! / (i! (p-i)!) (2 s)^(p-i)`` with
    ``s = sqrt(2 nu) r`` and ``r`` as for :class:`RBF` (Rasmussen & Williams 2006, eq. 4.16): the
    closed form of ``variance 2^(1-nu) / Gamma(nu) s^nu K_nu(s)`` at half-integer ``nu``. ``nu = 1/2, 3/2,
    5/2`` are :class:`Matern12`, :class:`Matern32`, :class:`Matern52`; the kernel tends to :class:`RBF`
    as ``nu -> inf``. Other orders have no closed form and are not accepted.

    Parameters
    ----------
    nu : float
        The order, a constant ``p + 1/2`` (static, not a pytree leaf).
    variance : float
        Marginal variance.
    lengthscale : float or array of shape (d,)
        Isotropic or ARD length-scale.
    active_dims : tuple of int or slice, optional
        Input columns the kernel sees.
    """

    spec = KERNEL_SPECS["matern"]

    def __init__(self, nu=None, variance=1.0, lengthscale=None, *, active_dims=None):
        self._set_hyperparameters(active_dims, nu=nu, variance=variance, lengthscale=lengthscale)

    def evaluate(self, x1, x2):
        check_ard(self.lengthscale, "lengthscale", self.spec.name, x1.shape[-1])
        s = math.sqrt(2.0 * self.nu) * safe_sqrt(scaled_sqdist(x1, x2, self.lengthscale))
        polynomial = 0.0
        for coefficient in half_integer_matern_coefficients(self.nu):
            polynomial = polynomial * s + coefficient
        return self.variance * polynomial * jnp.exp(-s)

    def spectral_density(self, omega):
        """:func:`matern_spectral_density` of order ``nu``."""
        return matern_spectral_density(self.nu, self.variance, self.lengthscale, omega)


def half_integer_matern_coefficients(nu: float) -> list[float]:
    """Coefficients of the Matérn polynomial in ``s`` of order ``nu = p + 1/2``, highest power first.

    ``c_i = p!/(2p)! (p+i)!/(i! (p-i)!) 2^(p-i)`` multiplies ``s^(p-i)``; the constant term is 1.
    """
    p = int(nu - 0.5)
    return [math.factorial(p) * math.factorial(p + i) * 2.0 ** (p - i)
            / (math.factorial(2 * p) * math.factorial(i) * math.factorial(p - i)) for i in range(p + 1)]
