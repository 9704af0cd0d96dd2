"""The coregionalisation kernel: B = W W' + diag(kappa) indexed by output, alone, in products, through the
model's lowering, against GPy's Coregionalize when it is installed, and its refusals."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gpdsl
from gpdsl.api import check_file
from gpdsl.backends.jax.lowering import lower
from gpdsl.errors import DataError, ModelCheckError
from gpdsl.ir import nodes as ir
from gpdsl.kernels import RBF, Coregion, build_kernel

W = np.array([[1.0, 0.3], [0.8, -0.5], [-0.4, 0.9]])
KAPPA = np.array([0.2, 0.05, 0.4])


def points(rng, n):
    """Rows (x, output index) with every output present."""
    return np.column_stack([rng.uniform(0, 3, n), np.r_[1, 2, 3, rng.integers(1, 4, n - 3)]])


def numpy_rbf(a, b, ell):
    return np.exp(-0.5 * (a[:, None] - b[None]) ** 2 / ell**2)


def test_coregion_is_b_indexed_by_output():
    rng = np.random.default_rng(0)
    X1, X2 = points(rng, 9), points(rng, 6)
    B = W @ W.T + np.diag(KAPPA)
    kernel = Coregion(W, KAPPA, active_dims=(1,))
    i1, i2 = X1[:, 1].astype(int) - 1, X2[:, 1].astype(int) - 1
    np.testing.assert_allclose(kernel(X1, X2), B[np.ix_(i1, i2)], rtol=1e-14)
    np.testing.assert_allclose(kernel(X1), B[np.ix_(i1, i1)], rtol=1e-14)
    np.testing.assert_allclose(kernel.output_covariance(), B, rtol=1e-14)
    shared = Coregion(W, 0.3, active_dims=(1,))
    np.testing.assert_allclose(shared(X1), (W @ W.T + 0.3 * np.eye(3))[np.ix_(i1, i1)], rtol=1e-14)


def test_icm_product_is_the_kronecker_form_on_isotopic_data():
    """All outputs at the same inputs, ordered output-major: K = B kron K_x."""
    x = np.linspace(0, 2, 5)
    X = np.column_stack([np.tile(x, 3), np.repeat([1, 2, 3], 5)])
    kernel = RBF(lengthscale=0.7, active_dims=(0,)) * Coregion(W, KAPPA, active_dims=(1,))
    expected = np.kron(W @ W.T + np.diag(KAPPA), numpy_rbf(x, x, 0.7))
    np.testing.assert_allclose(kernel(X), expected, rtol=1e-13)


def test_coregion_gradient_matches_finite_differences():
    X = points(np.random.default_rng(1), 8)
    weights = np.random.default_rng(2).normal(size=(8, 8))

    def objective(theta):
        return jnp.sum(weights * Coregion(theta[:6].reshape(3, 2), theta[6:], active_dims=(1,))(X))

    theta = np.r_[W.ravel(), KAPPA]
    grad = jax.grad(objective)(jnp.asarray(theta))
    eps = 1e-6
    numeric = [(objective(theta + eps * e) - objective(theta - eps * e)) / (2 * eps) for e in np.eye(9)]
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-8)


def test_coregion_matches_gpy():
    GPy = pytest.importorskip("GPy")
    X = points(np.random.default_rng(3), 10)
    gpy = GPy.kern.Coregionalize(1, output_dim=3, rank=2, W=W, kappa=KAPPA, active_dims=[1])
    zero_based = np.column_stack([X[:, 0], X[:, 1] - 1])
    np.testing.assert_allclose(Coregion(W, KAPPA, active_dims=(1,))(X), gpy.K(zero_based), rtol=1e-12)


def test_python_constructor_refuses_a_vector_w():
    with pytest.raises(ModelCheckError, match="'W' must be a matrix"):
        build_kernel("coregion", W=np.ones(3), kappa=1.0)
    with pytest.raises(ModelCheckError, match="missing required parameter 'W'"):
        build_kernel("coregion", kappa=1.0)


def multi_output_data(rng, n=9):
    return {"N": n, "P": 2, "R": 1, "x": rng.uniform(0, 3, n), "output": np.r_[1, 2, rng.integers(1, 3, n - 2)],
            "y": rng.normal(size=n)}


def test_model_covariance_is_rbf_times_b_of_the_outputs():
    model, _ = check_file("models/gp_multi_output.gpm")
    data, _ = gpdsl.load_data(multi_output_data(np.random.default_rng(4)), model)
    jax_model = lower(model, data)
    w, kappa = np.array([[0.9], [-0.6]]), np.array([0.3, 0.1])
    env = jax_model.environment({"lengthscale": jnp.asarray(0.8), "W": jnp.asarray(w), "kappa": jnp.asarray(kappa),
                                 "noise": jnp.asarray(0.2)})
    gp = next(s for s in model.statements if isinstance(s, ir.GPStatement))
    index = np.asarray(data["output"]) - 1
    expected = numpy_rbf(np.asarray(data["x"]), np.asarray(data["x"]), 0.8) * (w @ w.T + np.diag(kappa))[np.ix_(index, index)]
    np.testing.assert_allclose(jax_model.gp_covariance(gp, env), expected + 1e-8 * np.eye(len(index)), rtol=1e-12)


@pytest.mark.parametrize("bad, message", [
    (3, r"data 'output' violates its upper bound 2 .*: output\[4\] = 3"),
    (0, r"data 'output' violates its lower bound 1 .*: output\[4\] = 0"),
    (1.5, r"data 'output' must hold integers .*; output\[4\] = 1.5"),
])
def test_an_output_index_outside_one_to_p_is_a_data_error_naming_the_entry(bad, message):
    model, _ = check_file("models/gp_multi_output.gpm")
    data = multi_output_data(np.random.default_rng(5))
    data["output"] = data["output"].astype(float)
    data["output"][3] = bad
    with pytest.raises(DataError, match=message):
        gpdsl.load_data(data, model)


KRONECKER_CHECK = """
functions {
  FUNCTIONS
}
data {
  int M; int P;
  vector[M * P] y; matrix[M, M] Kx; matrix[P, P] B; real s2;
  array[M * P] int output; array[M * P] vector[1] points;
}
transformed data {
  int isotopic = isotopic_design(output, points, P);
  matrix[M * P, M * P] C;
  for (p in 1:P) for (q in 1:P) for (i in 1:M) for (j in 1:M)
    C[(p - 1) * M + i, (q - 1) * M + j] = B[p, q] * Kx[i, j];
}
parameters { real z; }
model {
  target += kronecker_normal_lpdf(y | Kx, B, s2) - multi_normal_lpdf(y | rep_vector(0, M * P), add_diag(C, s2))
            + isotopic;
}
"""


@pytest.mark.slow
def test_kronecker_log_density_and_isotopic_design_in_stan():
    """The Stan program's isotopic route: its Kronecker log density is multi_normal's with B ⊗ Kx + s2 I, and
    isotopic_design is 1 exactly for output-major designs with every output at the same points (log_prob of a
    program whose target is their difference plus the flag)."""
    from gpdsl.backends.stan.fragments import function_library
    from gpdsl.backends.stan.runners import log_prob_pystan

    library = function_library()
    code = KRONECKER_CHECK.replace("FUNCTIONS", "\n".join(library[name].text for name in
                                                          ("kronecker_normal_lpdf", "isotopic_design")))
    rng = np.random.default_rng(6)
    x = rng.uniform(0, 3, 5)
    Kx = numpy_rbf(x, x, 0.8)
    isotopic = {"M": 5, "P": 3, "y": rng.normal(size=15), "Kx": Kx, "B": W @ W.T + np.diag(KAPPA), "s2": 0.05,
                "output": np.repeat([1, 2, 3], 5), "points": np.r_[x, x, x][:, None]}
    shuffled = dict(isotopic, output=np.r_[np.repeat([1, 2, 3], 5)[1:], 1])
    moved = dict(isotopic, points=np.r_[x, x, x + 0.1][:, None])
    values = [float(log_prob_pystan(code, data, np.zeros((1, 1)), jacobian=True)[0])
              for data in (isotopic, shuffled, moved)]
    np.testing.assert_allclose(values, [1.0, 0.0, 0.0], atol=1e-8)
