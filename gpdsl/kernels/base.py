"""The kernel base class: pytree plumbing, vectorisation and composition operators."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from gpdsl.errors import MethodError, ModelCheckError
from gpdsl.kernel_table import KernelSpec
from gpdsl.kernels.params import as_param, normalise_active_dims, select_columns
from gpdsl.kernels.state_space import PERIODIC_ORDER, StateSpace
from gpdsl.numerics.linalg import expm


class Kernel:
    """A covariance function, defined pointwise and vectorised by this base class.

    Subclasses implement :meth:`evaluate` on single points restricted to their active
    input columns, list their hyperparameters in ``self._param_names`` and are
    registered as JAX pytrees automatically: hyperparameters are leaves, everything
    else (parameter names, ``active_dims``) is static. A kernel can therefore be passed
    through ``jax.jit``, ``jax.grad`` and ``jax.vmap``.

    Two Gram matrices are distinguished, as in GPy:

    * ``k(X)`` (:meth:`gram`) is the covariance of the points ``X`` with themselves,
      including terms that exist only between a point and itself (the ``White`` noise
      term adds ``variance * I`` even when rows of ``X`` repeat);
    * ``k(X1, X2)`` (:meth:`cross`) is the covariance between two sets of points,
      which never includes same-index terms, even when ``X1`` and ``X2`` are equal.

    Kernels compose: ``k1 + k2`` is a :class:`Sum`, ``k1 * k2`` a :class:`Product` and
    ``c * k`` or ``k * c`` a :class:`Scale` by a (possibly traced) scalar; ``c + k``
    adds a :class:`Constant` kernel.

    A kernel of the language has its :mod:`gpdsl.kernel_table` entry as the class attribute ``spec``; its
    constant hyperparameters (a polynomial's degree, a Matérn order) are Python numbers and static, not
    leaves; kernel-valued arguments of a combinator are child pytrees.
    A kernel of a scalar input that is the covariance of a linear SDE has ``has_state_space`` true and
    implements :meth:`state_space` (:mod:`gpdsl.kernels.state_space`); sums, products and scalings have it when
    all their parts have it. A stationary kernel whose table entry spells a spectral density
    (:attr:`~gpdsl.kernel_table.KernelSpec.spectral_density`) implements :meth:`spectral_density`; sums and
    scalings of such kernels have theirs.
    """

    __array_ufunc__ = None
    spec: KernelSpec | None = None
    has_state_space: bool = False
    _param_names: tuple[str, ...] = ()
    active_dims = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        jax.tree_util.register_pytree_node_class(cls)

    def evaluate(self, x1, x2):
        """Covariance between two single points (1-D arrays of the active input columns).

        Parameters
        ----------
        x1, x2 : jax.Array
            Shape ``(d,)``, already restricted to ``active_dims``.

        Returns
        -------
        jax.Array
            A scalar.
        """
        raise NotImplementedError

    def evaluate_same(self, x):
        """Covariance of a point with itself at the same index; ``evaluate(x, x)`` unless overridden."""
        return self.evaluate(x, x)

    def state_space(self, periodic_order: int = PERIODIC_ORDER) -> StateSpace:
        """The linear SDE whose output has this kernel's covariance (traceable).

        Parameters
        ----------
        periodic_order : int
            Number of cosine terms of a periodic kernel's truncated series (static; other kernels ignore it).

        Returns
        -------
        StateSpace

        Raises
        ------
        MethodError
            The kernel has no finite-dimensional state-space form (``has_state_space`` is false).
        """
        raise MethodError(f"{type(self).__name__} has no state-space form (a linear SDE over a scalar input); "
                          "the half-integer Matérn kernels, the periodic and constant kernels, and their sums, "
                          "products and scalings have one")

    def spectral_density(self, omega) -> jax.Array:
        """The spectral density ``S`` at angular frequencies ``omega`` (traceable).

        ``k(tau) = (2 pi)^-D int S(omega) exp(i omega.tau) d omega`` over the kernel's ``D`` input columns.

        Parameters
        ----------
        omega : array_like, shape (M, D)
            One frequency vector per row.

        Returns
        -------
        jax.Array, shape (M,)

        Raises
        ------
        MethodError
            The kernel has no spectral density here (it is not stationary, or none is implemented).
        """
        raise MethodError(f"{type(self).__name__} has no spectral density; the rbf and Matérn kernels, their "
                          "sums and scalings have one")

    def discretise(self, dt, periodic_order: int = PERIODIC_ORDER) -> tuple[jax.Array, jax.Array]:
        """Transition matrices ``A = expm(F dt)`` over time steps ``dt`` and the stationary covariance ``P_inf``.

        A step of ``dt`` maps the state's stationary distribution ``N(0, P_inf)`` to itself, with process noise
        ``P_inf - A P_inf A^T``. By default ``expm`` of :meth:`state_space`'s ``F``; a kernel with a closed form
        overrides this. Traceable.

        Parameters
        ----------
        dt : array_like
            Time steps, any shape.
        periodic_order : int
            As in :meth:`state_space`.

        Returns
        -------
        A : jax.Array, shape ``dt.shape + (d, d)``
        P_inf : jax.Array, shape (d, d)

        Raises
        ------
        MethodError
            The kernel has no state-space form.
        """
        F, _, _, _, P_inf = self.state_space(periodic_order)
        return expm(jnp.asarray(dt, dtype=jnp.float64)[..., None, None] * F), P_inf

    def pair(self, x1, x2):
        """Covariance between two single points given with all input columns."""
        return self.evaluate(select_columns(x1, self.active_dims), select_columns(x2, self.active_dims))

    def same(self, x):
        """Same-index variance of a single point given with all input columns."""
        return self.evaluate_same(select_columns(x, self.active_dims))

    def cross(self, X1, X2):
        """Cross-covariance matrix between two sets of points.

        Parameters
        ----------
        X1 : array_like, shape (n1, d) or (n1,)
        X2 : array_like, shape (n2, d) or (n2,)

        Returns
        -------
        jax.Array, shape (n1, n2)
            No same-index terms (``White`` contributes zero).
        """
        return _cross(self, _as_matrix(X1), _as_matrix(X2))

    def diag(self, X):
        """Diagonal of :meth:`gram`, shape ``(n,)``, without forming the matrix."""
        return _diag(self, _as_matrix(X))

    def gram(self, X):
        """Covariance matrix of the points ``X`` with themselves, shape ``(n, n)``.

        Off the diagonal it equals :meth:`cross` ``(X, X)``; the diagonal is :meth:`diag`,
        which includes same-index terms such as white noise.
        """
        return _gram(self, _as_matrix(X))

    def __call__(self, X1, X2=None):
        """``gram(X1)`` when ``X2`` is omitted, else ``cross(X1, X2)``."""
        return self.gram(X1) if X2 is None else self.cross(X1, X2)

    @property
    def params(self) -> dict:
        """Hyperparameters by name (child kernels for composite kernels)."""
        return {name: getattr(self, name) for name in self._param_names}

    def tree_flatten(self):
        """JAX pytree protocol: the array hyperparameters as leaves; names, active dims and constant ones as aux."""
        static = tuple((name, getattr(self, name)) for name in self._param_names
                       if self.spec is not None and self.spec.param(name) is not None and self.spec.param(name).static)
        leaves = tuple(name for name in self._param_names if name not in dict(static))
        return tuple(getattr(self, name) for name in leaves), (self._param_names, self.active_dims, static)

    @classmethod
    def tree_unflatten(cls, aux, children):
        """JAX pytree protocol: the kernel of :meth:`tree_flatten`'s ``aux`` with ``children`` as its leaves."""
        kernel = object.__new__(cls)
        kernel._param_names, kernel.active_dims, static = aux
        leaves = [name for name in kernel._param_names if name not in dict(static)]
        for name, value in [*zip(leaves, children), *static]:
            setattr(kernel, name, value)
        return kernel

    def _set_hyperparameters(self, active_dims=None, **values) -> None:
        """Set hyperparameters (keyword order is positional order) as ``spec`` allows them.

        Raises
        ------
        ModelCheckError
            A required hyperparameter is None, one has more dimensions than ``spec`` allows, or an integer
            one is not a whole number of at least 1.
        """
        spec = self.spec
        spec.verify_required(name for name, value in values.items() if value is not None)
        converted = {}
        for n, v in values.items():
            if n in spec.kernels:
                if not isinstance(v, Kernel):
                    raise ModelCheckError(f"{spec.name}() argument '{n}' must be a kernel, got {type(v).__name__}")
                converted[n] = v
            else:
                param = spec.param(n)
                converted[n] = as_param(v, n, spec.name, param.vector_allowed, param.integer, param.half_integer,
                                        param.matrix)
        self._set_params(converted, active_dims)

    def _set_params(self, values: dict, active_dims=None) -> None:
        self._param_names = tuple(values)
        for name, value in values.items():
            setattr(self, name, value)
        self.active_dims = normalise_active_dims(active_dims)

    def __add__(self, other):
        from gpdsl.kernels.composite import Sum
        from gpdsl.kernels.static import Constant

        if isinstance(other, Kernel):
            return Sum(self, other)
        if _is_scalar_like(other):
            return Sum(self, Constant(other))
        return NotImplemented

    def __radd__(self, other):
        from gpdsl.kernels.composite import Sum
        from gpdsl.kernels.static import Constant

        if _is_scalar_like(other):
            return Sum(Constant(other), self)
        return NotImplemented

    def __mul__(self, other):
        from gpdsl.kernels.composite import Product, Scale

        if isinstance(other, Kernel):
            return Product(self, other)
        if _is_scalar_like(other):
            return Scale(other, self)
        return NotImplemented

    def __rmul__(self, other):
        from gpdsl.kernels.composite import Scale

        if _is_scalar_like(other):
            return Scale(other, self)
        return NotImplemented

    def __repr__(self) -> str:
        parts = [f"{name}={_short(value)}" for name, value in self.params.items()]
        if self.active_dims is not None:
            parts.append(f"active_dims={self.active_dims}")
        return f"{type(self).__name__}({', '.join(parts)})"


@jax.jit
def _cross(kernel, X1, X2):
    return jax.vmap(jax.vmap(kernel.pair, (None, 0)), (0, None))(X1, X2)


@jax.jit
def _diag(kernel, X):
    return jax.vmap(kernel.same)(X)


@jax.jit
def _gram(kernel, X):
    on_diagonal = jnp.eye(X.shape[0], dtype=bool)
    return jnp.where(on_diagonal, _diag(kernel, X)[:, None], _cross(kernel, X, X))


def _as_matrix(X):
    X = jnp.asarray(X, dtype=jnp.float64)
    return X[:, None] if X.ndim == 1 else X


def _is_scalar_like(value) -> bool:
    return isinstance(value, (int, float)) or hasattr(value, "shape") and hasattr(value, "dtype")


def _short(value) -> str:
    if isinstance(value, Kernel):
        return repr(value)
    try:
        return str(jnp.asarray(value).tolist())
    except Exception:
        return type(value).__name__
