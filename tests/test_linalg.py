"""Jittered Cholesky, its error reporting, and Gaussian log densities from a factor."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import multivariate_normal

from gpdsl.errors import NumericalError
from gpdsl.kernels import RBF, White
from gpdsl.numerics.linalg import (
    checked_cholesky,
    cholesky_with_jitter,
    jitter_ladder,
    logdet_chol,
    mvn_logpdf_chol,
    solve_chol,
)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def spd(rng, n=6):
    A = rng.normal(size=(n, n))
    return A @ A.T + n * np.eye(n)


def rank_deficient(rng, n=8, rank=2):
    A = rng.normal(size=(n, rank))
    return A @ A.T


def test_jitter_ladder():
    ladder = jitter_ladder()
    assert len(ladder) == 5 and ladder[0] == 0.0
    np.testing.assert_allclose(ladder[1], 1e-8)
    np.testing.assert_allclose(ladder[-1], 1e-6)
    assert list(ladder) == sorted(ladder)
    assert jitter_ladder(max_tries=1) == (0.0,)


def test_no_jitter_for_positive_definite(rng):
    K = spd(rng)
    L, used = cholesky_with_jitter(K)
    assert float(used) == 0.0
    np.testing.assert_allclose(L, np.linalg.cholesky(K), rtol=1e-12)


def test_jitter_escalation_for_rank_deficient(rng):
    K = rank_deficient(rng)
    assert np.any(np.isnan(np.asarray(jnp.linalg.cholesky(K))))
    L, used = jax.jit(cholesky_with_jitter)(K)
    assert np.all(np.isfinite(L))
    assert 0.0 < float(used) <= 1e-6 * np.mean(np.diag(K)) * (1 + 1e-12)
    np.testing.assert_allclose(L @ L.T, K + float(used) * np.eye(8), atol=1e-10)


def test_duplicate_inputs_need_jitter_and_get_it():
    X = np.repeat(np.linspace(0, 1, 5), 2)[:, None]
    K = RBF(lengthscale=0.5)(X)
    L, used = checked_cholesky(K, {"tau": 0.5})
    assert np.all(np.isfinite(L))
    assert used >= 0.0


def test_gradient_through_jittered_cholesky_matches_plain(rng):
    K = spd(rng)

    def f(chol):
        return lambda M: jnp.sum(jnp.sin(chol(M)))

    ours = jax.grad(f(lambda M: cholesky_with_jitter(M)[0]))(K)
    plain = jax.grad(f(jnp.linalg.cholesky))(K)
    np.testing.assert_allclose(ours, plain, rtol=1e-10, atol=1e-12)


def test_gradient_of_log_likelihood_in_hyperparameters(rng):
    X = rng.normal(size=(10, 2))
    y = rng.normal(size=10)

    def loglik(theta):
        K = (theta[0] * RBF(lengthscale=theta[1]) + White(1e-6))(X)
        return mvn_logpdf_chol(y, cholesky_with_jitter(K)[0])

    theta = jnp.array([1.3, 0.8])
    grad = jax.jit(jax.grad(loglik))(theta)
    eps = 1e-6
    fd = [(loglik(theta.at[i].add(eps)) - loglik(theta.at[i].add(-eps))) / (2 * eps) for i in range(2)]
    np.testing.assert_allclose(grad, fd, rtol=1e-6)


def test_vmap_over_matrices(rng):
    Ks = jnp.stack([spd(rng), rank_deficient(rng, n=6)])
    Ls, used = jax.vmap(cholesky_with_jitter)(Ks)
    assert np.all(np.isfinite(Ls))
    assert float(used[0]) == 0.0 and float(used[1]) > 0.0


def test_checked_cholesky_reports_context_for_indefinite(rng):
    K = spd(rng)
    K[0, 0] = -5.0
    with pytest.raises(NumericalError) as info:
        checked_cholesky(K, {"sigma": 1.5, "tau": 0.25})
    message = str(info.value)
    assert "not positive definite" in message
    assert "sigma=1.5" in message and "tau=0.25" in message
    assert "white(1e-6)" in info.value.hint


def test_checked_cholesky_reports_non_finite(rng):
    K = spd(rng)
    K[1, 2] = K[2, 1] = np.nan
    with pytest.raises(NumericalError, match="NaN or infinite.*ls=\\[0.5, 2"):
        checked_cholesky(K, {"ls": np.array([0.5, 2.0])})


def test_mvn_logpdf_matches_scipy(rng):
    K = spd(rng, n=7)
    x = rng.normal(size=7)
    L = jnp.linalg.cholesky(K)
    expected = multivariate_normal(mean=np.zeros(7), cov=K).logpdf(x)
    np.testing.assert_allclose(mvn_logpdf_chol(x, L), expected, rtol=1e-12)


def test_solve_and_logdet(rng):
    K = spd(rng)
    L = jnp.linalg.cholesky(K)
    b = rng.normal(size=(6, 3))
    np.testing.assert_allclose(solve_chol(L, b), np.linalg.solve(K, b), rtol=1e-10)
    np.testing.assert_allclose(solve_chol(L, b[:, 0]), np.linalg.solve(K, b[:, 0]), rtol=1e-10)
    np.testing.assert_allclose(logdet_chol(L), np.linalg.slogdet(K)[1], rtol=1e-12)


def _spd_batch(batch, n, seed=0):
    rng = np.random.default_rng(seed)
    B = rng.normal(size=(batch, n, n))
    return jnp.asarray(B @ np.swapaxes(B, 1, 2) / n + np.eye(n))


def test_vmap_safe_factorisation_and_solves_equal_jax():
    from jax.scipy import linalg as scipy_linalg

    from gpdsl.numerics.linalg import cho_solve, cholesky, solve_triangular

    A = _spd_batch(3, 6)
    b = jnp.asarray(np.random.default_rng(1).normal(size=(3, 6, 2)))
    L = jax.vmap(cholesky)(A)
    np.testing.assert_allclose(L, jnp.linalg.cholesky(A), atol=1e-13)
    for trans in (0, 1):
        ours = jax.vmap(lambda l, r: solve_triangular(l, r, trans=trans, lower=True))(L, b)
        theirs = jax.vmap(lambda l, r: scipy_linalg.solve_triangular(l, r, trans=trans, lower=True))(L, b)
        np.testing.assert_allclose(ours, theirs, atol=1e-12)
    shared = jax.vmap(lambda r: cho_solve((L[0], True), r))(b)
    np.testing.assert_allclose(shared, jax.vmap(lambda r: scipy_linalg.cho_solve((L[0], True), r))(b), atol=1e-12)
    upper = jax.vmap(lambda l, r: cho_solve((l.T, False), r))(L, b)
    np.testing.assert_allclose(upper, jnp.linalg.solve(A, b), atol=1e-10)


@pytest.mark.parametrize("b_shape", [(3, 6, 2), (3, 6), (6, 2)])
def test_batched_triangular_solves_broadcast_the_right_hand_side_like_jax(b_shape):
    from jax.scipy import linalg as scipy_linalg

    from gpdsl.numerics.linalg import solve_triangular

    L = jnp.linalg.cholesky(_spd_batch(3, 6))
    b = jnp.asarray(np.random.default_rng(2).normal(size=b_shape))
    np.testing.assert_allclose(solve_triangular(L, b, lower=True),
                               scipy_linalg.solve_triangular(L, b, lower=True), atol=1e-12)


def test_vmap_safe_solves_differentiate_like_jax():
    from jax.scipy import linalg as scipy_linalg

    from gpdsl.numerics.linalg import cho_solve, cholesky

    A = _spd_batch(1, 5)[0]
    b = jnp.arange(5.0)

    def ours(a):
        return jnp.sum(cho_solve((cholesky(a), True), b) ** 2)

    def theirs(a):
        return jnp.sum(scipy_linalg.cho_solve((jnp.linalg.cholesky(a), True), b) ** 2)

    np.testing.assert_allclose(jax.grad(ours)(A), jax.grad(theirs)(A), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(jax.jacfwd(ours)(A), jax.jacfwd(theirs)(A), rtol=1e-9, atol=1e-12)


def test_gpdsl_code_uses_the_vmap_safe_linear_algebra():
    import pathlib
    import re

    import gpdsl

    root = pathlib.Path(gpdsl.__file__).parent
    pattern = re.compile(r"jnp\.linalg\.(cholesky|solve|inv|slogdet|det|eigh)\b|jax\.scipy\.linalg|"
                         r"from jax\.scipy\.linalg import|from jax\.scipy import linalg")
    offenders = [f"{path.relative_to(root)}:{number}" for path in sorted(root.rglob("*.py")) if path.name != "linalg.py"
                 for number, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]
    assert offenders == []


def test_eigh_under_vmap_equals_one_matrix_at_a_time(rng):
    from gpdsl.numerics.linalg import eigh

    batch = np.stack([spd(rng) for _ in range(3)])
    values, vectors = jax.vmap(eigh)(jnp.asarray(batch))
    for k in range(3):
        expected = np.linalg.eigvalsh(batch[k])
        np.testing.assert_allclose(np.asarray(values[k]), expected, rtol=1e-10)
        rebuilt = np.asarray(vectors[k]) @ np.diag(expected) @ np.asarray(vectors[k]).T
        np.testing.assert_allclose(rebuilt, batch[k], atol=1e-9)


def _equations(jaxpr):
    """Every equation of ``jaxpr``, those of its sub-jaxprs included."""
    from jax.extend import core as jax_core

    for equation in jaxpr.eqns:
        yield equation
        for param in equation.params.values():
            for sub in param if isinstance(param, (tuple, list)) else (param,):
                if isinstance(sub, jax_core.ClosedJaxpr):
                    yield from _equations(sub.jaxpr)
                elif isinstance(sub, jax_core.Jaxpr):
                    yield from _equations(sub)


def _batched_lapack_calls(jaxpr) -> list[str]:
    """Triangular solves and Cholesky factorisations in ``jaxpr`` whose matrix has a batch dimension: those
    jaxlib fans out into the thread pool."""
    return [f"{e.primitive.name}{e.invars[0].aval.shape}" for e in _equations(jaxpr)
            if e.primitive.name in ("triangular_solve", "cholesky") and e.invars[0].aval.ndim > 2]


def test_derivatives_under_vmap_work_one_matrix_at_a_time():
    """Forward, reverse and second derivatives of the safe factorisation and solves, vmapped, never batch a
    LAPACK call (the derivative rules used to call the raw solves, and ``jax.hessian`` under ``vmap`` then
    batched them) and equal JAX's own."""
    from jax.scipy import linalg as scipy_linalg

    from gpdsl.numerics.linalg import cholesky, solve_triangular

    A = _spd_batch(3, 5)
    b = jnp.arange(5.0)

    def ours(a):
        L = cholesky(a)
        return jnp.sum(solve_triangular(L, b, lower=True) ** 2) + jnp.sum(solve_triangular(L, b, trans=1, lower=True))

    def theirs(a):
        L = jnp.linalg.cholesky(a)
        return (jnp.sum(scipy_linalg.solve_triangular(L, b, lower=True) ** 2)
                + jnp.sum(scipy_linalg.solve_triangular(L, b, trans=1, lower=True)))

    for transform in (jax.grad, jax.jacfwd, jax.hessian):
        batched = jax.vmap(transform(ours))
        assert _batched_lapack_calls(jax.make_jaxpr(batched)(A).jaxpr) == [], transform.__name__
        np.testing.assert_allclose(batched(A), jax.vmap(transform(theirs))(A), rtol=1e-8, atol=1e-10)


def _loops(jaxpr) -> int:
    """``while`` and ``scan`` equations in ``jaxpr``, sub-jaxprs included."""
    return sum(e.primitive.name in ("while", "scan") for e in _equations(jaxpr))


@pytest.mark.parametrize("b_shape", [(4, 6), (4, 6, 2)])
def test_one_matrix_with_vmapped_right_hand_sides_is_one_solve(b_shape):
    """vmap over the right-hand sides alone (a Hessian's tangents, draws against one factor) solves once with
    every column, not once per batch entry."""
    from jax.scipy import linalg as scipy_linalg

    from gpdsl.numerics.linalg import solve_triangular

    L = jnp.linalg.cholesky(_spd_batch(1, 6)[0])
    b = jnp.asarray(np.random.default_rng(3).normal(size=b_shape))
    for trans in (0, 1):
        ours = jax.vmap(lambda r: solve_triangular(L, r, trans=trans, lower=True))
        assert _loops(jax.make_jaxpr(ours)(b).jaxpr) == 0
        theirs = jax.vmap(lambda r: scipy_linalg.solve_triangular(L, r, trans=trans, lower=True))
        np.testing.assert_allclose(ours(b), theirs(b), atol=1e-12)


def test_expm_of_a_stack_is_one_matrix_at_a_time(rng):
    import scipy.linalg

    from gpdsl.numerics.linalg import expm

    stack = rng.normal(size=(2, 3, 4, 4))
    expected = np.array([[scipy.linalg.expm(a) for a in row] for row in stack])
    np.testing.assert_allclose(expm(stack[0, 0]), expected[0, 0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(expm(stack), expected, rtol=1e-12, atol=1e-12)
    lu = [e for e in _equations(jax.make_jaxpr(expm)(stack).jaxpr) if e.primitive.name == "lu"]
    assert lu and all(e.invars[0].aval.ndim == 2 for e in lu)
