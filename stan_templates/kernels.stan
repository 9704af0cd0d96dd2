// Covariance functions of the gpdsl kernels, in the parameterisations of gpdsl.kernel_table, whose
// entries name the function each kernel compiles to (KernelSpec.stan).
// Each takes two point sets (array[] vector, one vector per point) and returns the matrix
// K[i, j] = k(x1[i], x2[j]). Hyperparameters that may be ARD are vectors with one entry per input
// dimension; the code generator passes rep_vector(value, D) for an isotropic (scalar) value.
// Elementwise formulas are written so that K(X, X) is exactly symmetric.

/**
 * Weighted squared distances r2[i, j] = sum_d w[d] * (x1[i][d] - x2[j][d])^2.
 *
 * @param x1  array[N1] vector[D]
 * @param x2  array[N2] vector[D]
 * @param w   vector[D] of weights (inverse squared length-scales)
 * @return    matrix[N1, N2]
 */
matrix weighted_sq_dist(array[] vector x1, array[] vector x2, vector w) {
  matrix[size(x1), size(x2)] r2;
  for (i in 1:size(x1)) {
    for (j in 1:size(x2)) {
      r2[i, j] = dot_product(w, square(x1[i] - x2[j]));
    }
  }
  return r2;
}

/**
 * Elementwise square root of squared distances, with a zero (and zero gradient) where r2 is zero,
 * so that Matérn kernels have finite gradients on the diagonal of K(X, X).
 *
 * @param r2  matrix of squared distances
 * @return    matrix of distances
 */
matrix distances(matrix r2) {
  matrix[rows(r2), cols(r2)] r = rep_matrix(0, rows(r2), cols(r2));
  for (j in 1:cols(r2)) {
    for (i in 1:rows(r2)) {
      if (r2[i, j] > 0) {
        r[i, j] = sqrt(r2[i, j]);
      }
    }
  }
  return r;
}

/**
 * rbf (squared exponential): variance * exp(-r^2 / 2), r^2 = sum_d (x_d - x'_d)^2 / lengthscale_d^2.
 *
 * Stan's gp_exp_quad_cov (ARD form), whose hand-written gradient is cheaper than autodiff of the
 * distances.
 *
 * @param variance     marginal variance
 * @param lengthscale  vector[D] of length-scales
 */
matrix rbf_kernel(array[] vector x1, array[] vector x2, real variance, vector lengthscale) {
  return gp_exp_quad_cov(x1, x2, sqrt(variance), to_array_1d(lengthscale));
}

/**
 * rbf with inverse squared length-scales: variance * exp(-r^2 / 2), r^2 = sum_d inv_ls2_d (x_d - x'_d)^2.
 *
 * @param variance  marginal variance
 * @param inv_ls2   vector[D] of inverse squared length-scales (ARD weights)
 */
matrix rbf_inv_ls2_kernel(array[] vector x1, array[] vector x2, real variance, vector inv_ls2) {
  return variance * exp(-0.5 * weighted_sq_dist(x1, x2, inv_ls2));
}

/**
 * matern12 (exponential): variance * exp(-r), r = sqrt(sum_d (x_d - x'_d)^2 / lengthscale_d^2).
 *
 * @param variance     marginal variance
 * @param lengthscale  vector[D] of length-scales
 */
matrix matern12_kernel(array[] vector x1, array[] vector x2, real variance, vector lengthscale) {
  matrix[size(x1), size(x2)] r = distances(weighted_sq_dist(x1, x2, inv(square(lengthscale))));
  return variance * exp(-r);
}

/**
 * matern32: variance * (1 + sqrt(3) r) * exp(-sqrt(3) r), r as for matern12.
 *
 * @param variance     marginal variance
 * @param lengthscale  vector[D] of length-scales
 */
matrix matern32_kernel(array[] vector x1, array[] vector x2, real variance, vector lengthscale) {
  matrix[size(x1), size(x2)] s = sqrt(3.0)
      * distances(weighted_sq_dist(x1, x2, inv(square(lengthscale))));
  return variance * ((1 + s) .* exp(-s));
}

/**
 * matern52: variance * (1 + sqrt(5) r + 5 r^2 / 3) * exp(-sqrt(5) r), r as for matern12.
 *
 * @param variance     marginal variance
 * @param lengthscale  vector[D] of length-scales
 */
matrix matern52_kernel(array[] vector x1, array[] vector x2, real variance, vector lengthscale) {
  matrix[size(x1), size(x2)] s = sqrt(5.0)
      * distances(weighted_sq_dist(x1, x2, inv(square(lengthscale))));
  return variance * ((1 + s + square(s) / 3) .* exp(-s));
}

/**
 * periodic: variance * exp(-1/2 sum_d sin^2(pi (x_d - x'_d) / period_d) / lengthscale_d^2)
 * (GPy's StdPeriodic).
 *
 * @param variance     marginal variance
 * @param lengthscale  vector[D] of length-scales
 * @param period       vector[D] of periods
 */
matrix periodic_kernel(array[] vector x1, array[] vector x2, real variance, vector lengthscale,
                       vector period) {
  matrix[size(x1), size(x2)] k;
  for (i in 1:size(x1)) {
    for (j in 1:size(x2)) {
      k[i, j] = variance
                * exp(-0.5 * sum(square(sin(pi() * (x1[i] - x2[j]) ./ period) ./ lengthscale)));
    }
  }
  return k;
}

/**
 * linear: sum_d variance_d x_d x'_d.
 *
 * @param variance  vector[D] of variances of the linear coefficients
 */
matrix linear_kernel(array[] vector x1, array[] vector x2, vector variance) {
  matrix[size(x1), size(x2)] k;
  for (i in 1:size(x1)) {
    for (j in 1:size(x2)) {
      k[i, j] = dot_product(variance, x1[i] .* x2[j]);
    }
  }
  return k;
}

/**
 * white: variance on the diagonal of K(X, X) (a point set with itself, same_points = 1), zero between
 * different point sets (same_points = 0), even where points coincide.
 *
 * @param variance     noise variance
 * @param same_points  1 when x1 and x2 are the same point set
 */
matrix white_kernel(array[] vector x1, array[] vector x2, real variance, int same_points) {
  if (same_points) {
    return diag_matrix(rep_vector(variance, size(x1)));
  }
  return rep_matrix(0, size(x1), size(x2));
}

/**
 * same: 1 when two points agree in every input (e.g. the same sequence label), else 0.
 */
matrix same_kernel(array[] vector x1, array[] vector x2) {
  matrix[size(x1), size(x2)] K;
  for (i in 1:size(x1)) {
    for (j in 1:size(x2)) {
      K[i, j] = max(abs(x1[i] - x2[j])) == 0 ? 1 : 0;
    }
  }
  return K;
}

/**
 * constant: variance between every pair of points.
 *
 * @param variance  variance of a shared offset
 */
matrix constant_kernel(array[] vector x1, array[] vector x2, real variance) {
  return rep_matrix(variance, size(x1), size(x2));
}

/**
 * mlp (arc-sine): variance * 2/pi * asin(p(x, x') / sqrt((p(x, x) + 1) (p(x', x') + 1))),
 * p(x, x') = sum_d weight_variance_d x_d x'_d + bias_variance.
 *
 * @param variance         overall scale
 * @param weight_variance  vector[D] of hidden-unit weight variances
 * @param bias_variance    hidden-unit bias variance
 */
matrix mlp_kernel(array[] vector x1, array[] vector x2, real variance, vector weight_variance,
                  real bias_variance) {
  vector[size(x1)] norm1;
  vector[size(x2)] norm2;
  matrix[size(x1), size(x2)] k;
  for (i in 1:size(x1)) {
    norm1[i] = dot_product(weight_variance, x1[i] .* x1[i]) + bias_variance + 1;
  }
  for (j in 1:size(x2)) {
    norm2[j] = dot_product(weight_variance, x2[j] .* x2[j]) + bias_variance + 1;
  }
  for (i in 1:size(x1)) {
    for (j in 1:size(x2)) {
      k[i, j] = variance * 2 / pi()
                * asin((dot_product(weight_variance, x1[i] .* x2[j]) + bias_variance)
                       / sqrt(norm1[i] * norm2[j]));
    }
  }
  return k;
}

/**
 * rational_quadratic: variance * (1 + r^2 / (2 alpha))^(-alpha), r^2 = sum_d (x_d - x'_d)^2 / lengthscale_d^2.
 *
 * @param variance     marginal variance
 * @param lengthscale  vector[D] of length-scales
 * @param alpha        shape of the gamma mixture over inverse squared length-scales
 */
matrix rational_quadratic_kernel(array[] vector x1, array[] vector x2, real variance, vector lengthscale,
                                 real alpha) {
  matrix[size(x1), size(x2)] r2 = weighted_sq_dist(x1, x2, inv(square(lengthscale)));
  return variance * exp(-alpha * log1p(r2 / (2 * alpha)));
}

/**
 * cosine: variance * cos(2 pi sum_d (x_d - x'_d) / period_d), a sinusoid of random phase.
 *
 * @param variance  marginal variance
 * @param period    vector[D] of periods along the input columns
 */
matrix cosine_kernel(array[] vector x1, array[] vector x2, real variance, vector period) {
  matrix[size(x1), size(x2)] k;
  for (i in 1:size(x1)) {
    for (j in 1:size(x2)) {
      k[i, j] = variance * cos(2 * pi() * sum((x1[i] - x2[j]) ./ period));
    }
  }
  return k;
}

/**
 * polynomial: (sum_d variance_d x_d x'_d + bias)^degree.
 *
 * @param variance  vector[D] of weights of the inner product
 * @param bias      non-negative offset
 * @param degree    the power, at least 1
 */
matrix polynomial_kernel(array[] vector x1, array[] vector x2, vector variance, real bias, int degree) {
  matrix[size(x1), size(x2)] k;
  for (i in 1:size(x1)) {
    for (j in 1:size(x2)) {
      k[i, j] = (dot_product(variance, x1[i] .* x2[j]) + bias) ^ degree;
    }
  }
  return k;
}

/**
 * spectral_mixture: sum_q weights_q exp(-2 pi^2 scales_q^2 tau^2) cos(2 pi means_q tau), tau = x - x'
 * over one input column (Wilson & Adams 2013).
 *
 * @param weights  vector[Q] of component variances
 * @param means    vector[Q] of component frequencies
 * @param scales   vector[Q] of component frequency standard deviations
 */
matrix spectral_mixture_kernel(array[] vector x1, array[] vector x2, vector weights, vector means,
                               vector scales) {
  matrix[size(x1), size(x2)] k;
  for (i in 1:size(x1)) {
    for (j in 1:size(x2)) {
      real tau = x1[i][1] - x2[j][1];
      k[i, j] = dot_product(weights, exp(-2 * square(pi() * tau * scales)) .* cos(2 * pi() * tau * means));
    }
  }
  return k;
}

/**
 * matern: the Matérn kernel of half-integer order nu = p + 1/2,
 * variance exp(-s) p!/(2p)! sum_{i=0}^{p} (p+i)!/(i!(p-i)!) (2s)^(p-i), s = sqrt(2 nu) r,
 * r = sqrt(sum_d (x_d - x'_d)^2 / lengthscale_d^2) (Rasmussen & Williams eq. 4.16), by Horner's rule.
 *
 * @param nu           the order, a constant p + 1/2 with p = 0, 1, 2, ...
 * @param variance     marginal variance
 * @param lengthscale  vector[D] of length-scales
 */
matrix matern_kernel(array[] vector x1, array[] vector x2, real nu, real variance, vector lengthscale) {
  matrix[size(x1), size(x2)] s = sqrt(2 * nu) * distances(weighted_sq_dist(x1, x2, inv(square(lengthscale))));
  real p = nu - 0.5;
  real log_lead = lgamma(p + 1) - lgamma(2 * p + 1);
  matrix[size(x1), size(x2)] polynomial = rep_matrix(exp(log_lead + p * log2()), size(x1), size(x2));
  real i = 1;
  while (i <= p) {
    polynomial = polynomial .* s
                 + exp(log_lead + lgamma(p + i + 1) - lgamma(i + 1) - lgamma(p - i + 1) + (p - i) * log2());
    i += 1;
  }
  return variance * (polynomial .* exp(-s));
}

/**
 * changepoint: (1 - s(x)) before(x, x') (1 - s(x')) + s(x) after(x, x') s(x'),
 * s(x) = inv_logit(steepness (x - location)) over one input column.
 *
 * @param before     matrix K_before(x1, x2) of the kernel below the location
 * @param after      matrix K_after(x1, x2) of the kernel above it
 * @param location   where s is 1/2
 * @param steepness  rate of the sigmoid
 */
matrix changepoint_kernel(array[] vector x1, array[] vector x2, matrix before, matrix after, real location,
                          real steepness) {
  vector[size(x1)] s1;
  vector[size(x2)] s2;
  for (i in 1:size(x1)) {
    s1[i] = inv_logit(steepness * (x1[i][1] - location));
  }
  for (j in 1:size(x2)) {
    s2[j] = inv_logit(steepness * (x2[j][1] - location));
  }
  return diag_post_multiply(diag_pre_multiply(1 - s1, before), 1 - s2)
         + diag_post_multiply(diag_pre_multiply(s1, after), s2);
}

/**
 * kumaraswamy_warp: the points x (in [0, 1]) mapped through the Kumaraswamy CDF, w_d = 1 - (1 - x_d^a_d)^b_d,
 * the inputs of the kernel inside warp(...). Exact 0 and 1 at the ends, so gradients stay finite there.
 *
 * @param a  vector[D] of first shapes
 * @param b  vector[D] of second shapes
 */
array[] vector kumaraswamy_warp(array[] vector x, vector a, vector b) {
  array[size(x)] vector[rows(a)] w;
  for (i in 1:size(x)) {
    for (d in 1:rows(a)) {
      if (x[i][d] <= 0) {
        w[i][d] = 0;
      } else if (x[i][d] >= 1) {
        w[i][d] = 1;
      } else {
        w[i][d] = 1 - pow(1 - pow(x[i][d], a[d]), b[d]);
      }
    }
  }
  return w;
}

/**
 * gibbs: variance sqrt(2 l(x) l(x') / (l(x)^2 + l(x')^2)) exp(-(x - x')^2 / (l(x)^2 + l(x')^2)),
 * l(x) = lengthscale exp(slope x) over one input column (Gibbs 1997; Rasmussen & Williams eq. 4.32).
 *
 * @param variance     marginal variance
 * @param lengthscale  the length-scale at x = 0
 * @param slope        rate of change of log l(x)
 */
matrix gibbs_kernel(array[] vector x1, array[] vector x2, real variance, real lengthscale, real slope) {
  matrix[size(x1), size(x2)] k;
  for (i in 1:size(x1)) {
    real l1 = lengthscale * exp(slope * x1[i][1]);
    for (j in 1:size(x2)) {
      real l2 = lengthscale * exp(slope * x2[j][1]);
      real total = square(l1) + square(l2);
      k[i, j] = variance * sqrt(2 * l1 * l2 / total) * exp(-square(x1[i][1] - x2[j][1]) / total);
    }
  }
  return k;
}

/**
 * coregion: B[i, j], B = W W' + diag(kappa), over one input column of output indices i, j in 1..P
 * (the intrinsic coregionalisation model; GPy's Coregionalize). The indices are data (to_int needs data).
 *
 * @param W      matrix[P, R] of mixing weights
 * @param kappa  vector[P] of each output's own variance
 */
matrix coregion_kernel(data array[] vector x1, data array[] vector x2, matrix W, vector kappa) {
  matrix[rows(W), rows(W)] B = add_diag(tcrossprod(W), kappa);
  matrix[size(x1), size(x2)] k;
  for (i in 1:size(x1)) {
    for (j in 1:size(x2)) {
      k[i, j] = B[to_int(x1[i][1]), to_int(x2[j][1])];
    }
  }
  return k;
}

/**
 * coregion_corr: B[i, j], B = diag(sigma) L L' diag(sigma), over one input column of output indices i, j in
 * 1..P: coregionalisation by the outputs' correlation matrix L L' and standard deviations sigma.
 *
 * @param L      matrix[P, P], the Cholesky factor of the correlation matrix
 * @param sigma  vector[P] of each output's standard deviation
 */
matrix coregion_corr_kernel(data array[] vector x1, data array[] vector x2, matrix L, vector sigma) {
  matrix[rows(L), rows(L)] B = quad_form_diag(tcrossprod(L), sigma);
  matrix[size(x1), size(x2)] k;
  for (i in 1:size(x1)) {
    for (j in 1:size(x2)) {
      k[i, j] = B[to_int(x1[i][1]), to_int(x2[j][1])];
    }
  }
  return k;
}

/**
 * Log density of y ~ multi_normal(0, B ⊗ Kx + noise_variance I) for outputs observed at the same M points
 * (isotopic data), y output-major: y[(p - 1) M + i] is output p at point i. By the eigendecompositions
 * Kx = Qx diag(lambda_x) Qx' and B = Qb diag(lambda_b) Qb', the covariance's eigenvalues are
 * lambda_x[i] lambda_b[p] + noise_variance with eigenvectors Qb ⊗ Qx: O(M^3 + P^3), not O((M P)^3).
 *
 * @param y               vector[M * P] of observations
 * @param Kx              matrix[M, M], the input kernel at the M points
 * @param B               matrix[P, P], the outputs' covariance
 * @param noise_variance  the variance added to every observation (noise plus jitter)
 */
real kronecker_normal_lpdf(vector y, matrix Kx, matrix B, real noise_variance) {
  int M = rows(Kx);
  int P = rows(B);
  matrix[M, P] Z = eigenvectors_sym(Kx)' * to_matrix(y, M, P) * eigenvectors_sym(B);
  matrix[M, P] D = eigenvalues_sym(Kx) * eigenvalues_sym(B)' + noise_variance;
  return -0.5 * (sum(square(Z) ./ D) + sum(log(D)) + M * P * log(2 * pi()));
}

/**
 * Whether a design is isotopic in output-major order: N = M P observations, observation (p - 1) M + i of output
 * p at the same point as observation i, for every output p and point i.
 *
 * @param output  array[N] int, the output index of each observation (1..P)
 * @param points  array[N] vector, the inputs of each observation (without the index)
 * @param P       the number of outputs
 * @return        1 when isotopic, else 0
 */
int isotopic_design(array[] int output, array[] vector points, int P) {
  int N = size(output);
  int M = N %/% P;
  if (P < 1 || M * P != N) {
    return 0;
  }
  for (p in 1:P) {
    for (i in 1:M) {
      int n = (p - 1) * M + i;
      if (output[n] != p || max(abs(points[n] - points[i])) > 0) {
        return 0;
      }
    }
  }
  return 1;
}

/**
 * The output levels 1..P as one-dimensional points (the rows of a coregionalisation matrix).
 *
 * @param P  the number of outputs
 * @return   array[P] vector[1]
 */
array[] vector output_levels(int P) {
  array[P] vector[1] points;
  for (p in 1:P) {
    points[p] = rep_vector(p, 1);
  }
  return points;
}
