// The Hilbert-space approximate GP (Solin & Särkkä 2020; Riutort-Mayol, Bürkner, Andersen, Solin & Vehtari 2023).
// On the box [-L_d, L_d] around the centre of the inputs, the Laplacian's eigenfunctions are
// phi_j(x) = prod_d L_d^(-1/2) sin(omega_jd (x_d - centre_d + L_d)), omega_jd = j_d pi / (2 L_d), for the index
// tuples j of the tensor product 1..m_1 x ... x 1..m_D (last dimension fastest), and a GP with a stationary kernel
// of spectral density S is f = PHI * (sqrt(S(omega)) .* z), z ~ std_normal(). The spectral densities take the
// frequency vectors as the rows of a matrix omega (M x D) and return S at each row, with
// k(tau) = (2 pi)^-D int S(omega) exp(i omega . tau) d omega.

/**
 * The index tuples of the tensor-product basis, the last dimension varying fastest.
 *
 * @param m  array[D] int, basis functions per dimension
 * @return   array[prod(m), D] int, entries from 1
 */
array[,] int hsgp_indices(array[] int m) {
  int d = size(m);
  array[prod(m), d] int indices;
  for (k in 1:prod(m)) {
    int rest = k - 1;
    for (step in 1:d) {
      int dim = d - step + 1;
      indices[k, dim] = rest % m[dim] + 1;
      rest = rest %/% m[dim];
    }
  }
  return indices;
}

/**
 * The centre of a point set: the midpoint of its range in each dimension.
 *
 * @param x  array[N] vector[D]
 * @return   vector[D]
 */
vector hsgp_centre(array[] vector x) {
  int d = num_elements(x[1]);
  vector[d] low = x[1];
  vector[d] high = x[1];
  for (n in 2:size(x)) {
    low = fmin(low, x[n]);
    high = fmax(high, x[n]);
  }
  return (low + high) / 2;
}

/**
 * The half-widths L of the box: c times the largest distance of the points from the centre, per dimension.
 *
 * @param x       array[N] vector[D]
 * @param centre  vector[D]
 * @param c       the boundary factor (> 1)
 * @return        vector[D]; rejects inputs with no spread in a dimension
 */
vector hsgp_half_widths(array[] vector x, vector centre, real c) {
  int d = num_elements(centre);
  vector[d] reach = rep_vector(0, d);
  for (n in 1:size(x)) {
    reach = fmax(reach, abs(x[n] - centre));
  }
  for (j in 1:d) {
    if (reach[j] <= 0) {
      reject("hsgp: input column ", j, " has the same value at every point; its box is c times their half range");
    }
  }
  return c * reach;
}

/**
 * The square roots of the Laplacian's eigenvalues per dimension, omega[k, d] = indices[k, d] pi / (2 L[d]).
 *
 * @param indices  array[M, D] int from hsgp_indices
 * @param L        vector[D] of half-widths
 * @return         matrix[M, D]
 */
matrix hsgp_frequencies(array[,] int indices, vector L) {
  int m = size(indices);
  int d = num_elements(L);
  matrix[m, d] omega;
  for (k in 1:m) {
    for (j in 1:d) {
      omega[k, j] = indices[k, j] * pi() / (2 * L[j]);
    }
  }
  return omega;
}

/**
 * The basis functions at the points: PHI[n, k] = prod_d sin(omega[k, d] (x[n][d] - centre[d] + L[d])) / sqrt(L[d]).
 *
 * @param x       array[N] vector[D]
 * @param centre  vector[D]
 * @param L       vector[D]
 * @param omega   matrix[M, D] from hsgp_frequencies
 * @return        matrix[N, M]
 */
matrix hsgp_eigenfunctions(array[] vector x, vector centre, vector L, matrix omega) {
  int m = rows(omega);
  matrix[size(x), m] phi;
  for (n in 1:size(x)) {
    vector[num_elements(L)] shifted = x[n] - centre + L;
    for (k in 1:m) {
      phi[n, k] = prod(sin(omega[k]' .* shifted) ./ sqrt(L));
    }
  }
  return phi;
}

/**
 * log N(y_d | 0, A A' + s2 I) summed over the columns y_d of Y, by the Woodbury identity and the determinant
 * lemma in O(N M^2): with B = s2 I_M + A' A = L L', y' (A A' + s2 I)^-1 y = (y' y - |L^-1 A' y|^2) / s2 and
 * log |A A' + s2 I| = (N - M) log s2 + log |B|. The marginal likelihood of an HSGP over latent inputs under a
 * normal likelihood (A = PHI(X) diag(sqrt(S)), N x M), never forming an N x N matrix.
 *
 * @param Y               matrix[N, D], one output per column
 * @param A               matrix[N, M]
 * @param noise_variance  s2 (the noise variance plus the GP's jitter)
 * @return                the log density
 */
real hsgp_normal_marginal_lpdf(matrix Y, matrix A, real noise_variance) {
  int n = rows(A);
  int m = cols(A);
  matrix[m, m] L = cholesky_decompose(add_diag(crossprod(A), noise_variance));
  matrix[m, cols(Y)] V = mdivide_left_tri_low(L, A' * Y);
  real quadratic = (dot_self(to_vector(Y)) - dot_self(to_vector(V))) / noise_variance;
  real log_det = (n - m) * log(noise_variance) + 2 * sum(log(diagonal(L)));
  return -0.5 * (quadratic + cols(Y) * (n * log(2 * pi()) + log_det));
}

/**
 * Spectral density of rbf: variance (2 pi)^(D/2) prod_d l_d exp(-sum_d l_d^2 omega_d^2 / 2).
 *
 * @param omega        matrix[M, D] of frequency vectors
 * @param variance     marginal variance
 * @param lengthscale  vector[D]
 * @return             vector[M]
 */
vector rbf_spd(matrix omega, real variance, vector lengthscale) {
  int d = cols(omega);
  return variance * pow(2 * pi(), d / 2.0) * prod(lengthscale) * exp(-0.5 * (square(omega) * square(lengthscale)));
}

/**
 * Spectral density of rbf with inverse squared length-scales inv_ls2 = 1 / lengthscale^2.
 *
 * @param omega     matrix[M, D]
 * @param variance  marginal variance
 * @param inv_ls2   vector[D]
 * @return          vector[M]
 */
vector rbf_inv_ls2_spd(matrix omega, real variance, vector inv_ls2) {
  return rbf_spd(omega, variance, inv_sqrt(inv_ls2));
}

/**
 * Spectral density of the Matérn kernel of order nu (Rasmussen & Williams eq. 4.15, a length-scale per dimension):
 * variance 2^D pi^(D/2) Gamma(nu + D/2) (2 nu)^nu / Gamma(nu) prod_d l_d (2 nu + sum_d l_d^2 omega_d^2)^-(nu + D/2).
 *
 * @param omega        matrix[M, D]
 * @param nu           the order
 * @param variance     marginal variance
 * @param lengthscale  vector[D]
 * @return             vector[M]
 */
vector matern_spd(matrix omega, real nu, real variance, vector lengthscale) {
  int d = cols(omega);
  real log_constant = d * log(2) + 0.5 * d * log(pi()) + lgamma(nu + d / 2.0) + nu * log(2 * nu) - lgamma(nu);
  vector[rows(omega)] quadratic = 2 * nu + square(omega) * square(lengthscale);
  return variance * exp(log_constant) * prod(lengthscale) * exp(-(nu + d / 2.0) * log(quadratic));
}

/**
 * Spectral density of matern12 (the Matérn kernel of order 1/2).
 *
 * @param omega        matrix[M, D]
 * @param variance     marginal variance
 * @param lengthscale  vector[D]
 * @return             vector[M]
 */
vector matern12_spd(matrix omega, real variance, vector lengthscale) {
  return matern_spd(omega, 0.5, variance, lengthscale);
}

/**
 * Spectral density of matern32 (the Matérn kernel of order 3/2).
 *
 * @param omega        matrix[M, D]
 * @param variance     marginal variance
 * @param lengthscale  vector[D]
 * @return             vector[M]
 */
vector matern32_spd(matrix omega, real variance, vector lengthscale) {
  return matern_spd(omega, 1.5, variance, lengthscale);
}

/**
 * Spectral density of matern52 (the Matérn kernel of order 5/2).
 *
 * @param omega        matrix[M, D]
 * @param variance     marginal variance
 * @param lengthscale  vector[D]
 * @return             vector[M]
 */
vector matern52_spd(matrix omega, real variance, vector lengthscale) {
  return matern_spd(omega, 2.5, variance, lengthscale);
}

/**
 * The basis of a periodic kernel's cosine series truncated after J harmonics, at one-column points:
 * columns 1, cos(w t), sin(w t), ..., cos(J w t), sin(J w t), w = 2 pi / period.
 *
 * @param x       array[N] vector[1]
 * @param period  the kernel's period
 * @param order   the harmonics J
 * @return        matrix[N, 2 J + 1]
 */
matrix hsgp_periodic_basis(array[] vector x, real period, int order) {
  matrix[size(x), 2 * order + 1] phi;
  if (!(period > 0) || is_inf(period)) {
    reject("hsgp_periodic_basis: the period of a periodic term is ", period, "; its cosine series needs a positive, finite period");
  }
  for (n in 1:size(x)) {
    phi[n, 1] = 1;
    for (j in 1:order) {
      real angle = j * 2 * pi() * x[n][1] / period;
      phi[n, 2 * j] = cos(angle);
      phi[n, 2 * j + 1] = sin(angle);
    }
  }
  return phi;
}

/**
 * The variances of the weights of a periodic kernel's cosine series (GPy's StdPeriodic, z = 1 / (4 lengthscale^2)):
 * c_0 = variance exp(-z) I_0(z), then c_j = 2 variance exp(-z) I_j(z) twice (the cosine and the sine), j = 1..J.
 *
 * @param order        the harmonics J
 * @param variance     marginal variance
 * @param lengthscale  vector[1]
 * @return             vector[2 J + 1]
 */
vector hsgp_periodic_variances(int order, real variance, vector lengthscale) {
  real z = 0.25 / square(lengthscale[1]);
  vector[2 * order + 1] c;
  c[1] = variance * exp(log_modified_bessel_first_kind(0, z) - z);
  for (j in 1:order) {
    c[2 * j] = 2 * variance * exp(log_modified_bessel_first_kind(j, z) - z);
    c[2 * j + 1] = c[2 * j];
  }
  return c;
}
