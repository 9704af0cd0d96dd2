// Densities of gpdsl priors that Stan does not have built in.

/**
 * Log density of the scaled sigmoid-normal distribution (Tegner et al. 2018, eq. 9):
 * x = lower + (upper - lower) * inv_logit(z) with z ~ normal(mu, sigma), so
 * log p(x) = normal_lpdf(logit((x - lower) / (upper - lower)) | mu, sigma)
 *            + log(upper - lower) - log(x - lower) - log(upper - x).
 * The vector form treats the entries as independent, with per-entry arguments.
 *
 * @param x      variate in (lower, upper)
 * @param low    lower end of the support
 * @param high   upper end of the support
 * @param mu     location of the underlying normal
 * @param sigma  scale of the underlying normal
 * @return       log density (with all normalising constants)
 */
real scaled_sigmoid_normal_lpdf(real x, real low, real high, real mu, real sigma) {
  return normal_lpdf(logit((x - low) / (high - low)) | mu, sigma)
         + log(high - low) - log(x - low) - log(high - x);
}

real scaled_sigmoid_normal_lpdf(vector x, vector low, vector high, vector mu, vector sigma) {
  return normal_lpdf(logit((x - low) ./ (high - low)) | mu, sigma)
         + sum(log(high - low) - log(x - low) - log(high - x));
}

/**
 * Leave-one-out predictive log densities of y ~ multi_normal(0, C), C = L L' (Sundararajan & Keerthi
 * 2001): with P = C^-1, y_i | y_-i ~ normal(y_i - (P y)_i / P_ii, 1 / sqrt(P_ii)), so
 * log p(y_i | y_-i) = (log P_ii - (P y)_i^2 / P_ii - log(2 pi)) / 2. Exact for GP regression with f
 * integrated out, which makes PSIS-LOO over the hyperparameter draws valid (Buerkner, Gabry & Vehtari
 * 2021).
 *
 * @param y  vector[N] of observations
 * @param L  matrix[N, N], the Cholesky factor of their covariance C
 * @return   vector[N], log p(y_i | y_-i) for each i
 */
vector normal_loo_log_densities(vector y, matrix L) {
  matrix[rows(L), rows(L)] precision = chol2inv(L);
  vector[rows(L)] p = diagonal(precision);
  return 0.5 * (log(p) - square(precision * y) ./ p - log(2 * pi()));
}

/**
 * A replicate of y from its posterior predictive under GP regression with f integrated out:
 * y ~ multi_normal(0, C), C = K + s2 I = L L' (jitter counted in K), so f | y has mean y - s2 C^-1 y and
 * covariance s2 (I - s2 C^-1), and the replicate f + e, e ~ normal(0, s2 I), has covariance
 * s2 (2 I - s2 C^-1), whose eigenvalues lie in [s2, 2 s2): well conditioned whatever K.
 *
 * @param y               vector[N] of observations
 * @param L               matrix[N, N], the Cholesky factor of C
 * @param noise_variance  s2
 * @return                vector[N], one replicate
 */
vector normal_gp_replicate_rng(vector y, matrix L, real noise_variance) {
  matrix[rows(L), rows(L)] precision = chol2inv(L);
  matrix[rows(L), rows(L)] covariance = noise_variance * add_diag(-noise_variance * precision, 2);
  return multi_normal_rng(y - noise_variance * (precision * y), 0.5 * (covariance + covariance'));
}

/**
 * A replicate of y at every one of N points from its posterior predictive under GP regression with f
 * integrated out, given the observed entries alone (the others missing): f at all N points given
 * y_obs has mean K[:, obs] C^-1 y_obs and covariance K - K[:, obs] C^-1 K[obs, :], with
 * C = K[obs, obs] + s2 I = L L'; the replicate is f + e, e ~ normal(0, s2 I). Its entries at the missing
 * points are draws of the missing outcomes (imputations).
 *
 * @param y_obs           vector[M] of the observed entries (residuals from the location)
 * @param K               matrix[N, N], the GP covariance at every point
 * @param observed        array[M] int, the indices of the observed points
 * @param L               matrix[M, M], the Cholesky factor of C
 * @param noise_variance  s2
 * @return                vector[N], one replicate
 */
vector normal_gp_impute_rng(vector y_obs, matrix K, array[] int observed, matrix L, real noise_variance) {
  matrix[rows(L), rows(K)] V = mdivide_left_tri_low(L, K[observed, :]);
  matrix[rows(K), rows(K)] covariance = K - crossprod(V);
  return multi_normal_rng(V' * mdivide_left_tri_low(L, y_obs),
                          add_diag(0.5 * (covariance + covariance'), noise_variance));
}

/**
 * Leave-one-out predictive log densities of y ~ MVT(nu, 0, C) with covariance C = L L' (nu > 2), the exact
 * marginal of Student-t process regression with the noise inside its kernel (Shah, Wilson & Ghahramani 2014).
 * With P = C^-1, g = P y and beta = y' g: y_i | y_-i is Student-t with nu + N - 1 degrees of freedom, location
 * y_i - g_i / P_ii and squared scale (nu - 2 + beta - g_i^2 / P_ii) / ((nu + N - 1) P_ii).
 *
 * @param y   vector[N] of observations
 * @param L   matrix[N, N], the Cholesky factor of their covariance C
 * @param nu  the degrees of freedom
 * @return    vector[N], log p(y_i | y_-i) for each i
 */
vector student_t_process_loo_log_densities(vector y, matrix L, real nu) {
  int n = rows(L);
  matrix[n, n] precision = chol2inv(L);
  vector[n] p = diagonal(precision);
  vector[n] g = precision * y;
  real beta = dot_product(y, g);
  vector[n] densities;
  for (i in 1:n) {
    real scale = sqrt((nu - 2 + beta - square(g[i]) / p[i]) / ((nu + n - 1) * p[i]));
    densities[i] = student_t_lpdf(g[i] / p[i] | nu + n - 1, 0, scale);
  }
  return densities;
}

/**
 * A replicate of y from its posterior predictive under Student-t process regression, y ~ MVT(nu, 0, C) with
 * covariance C = K + s2 I = L L' (jitter counted in K): a new y at the same inputs is jointly MVT with y, with
 * cross-covariance K, so given y it is MVT with nu + N degrees of freedom, mean y - s2 C^-1 y and covariance
 * (nu + beta - 2) / (nu + N - 2) s2 (2 I - s2 C^-1), beta = y' C^-1 y (Stan's scale matrix: times
 * (nu + N - 2) / (nu + N)).
 *
 * @param y               vector[N] of observations
 * @param L               matrix[N, N], the Cholesky factor of C
 * @param noise_variance  s2
 * @param nu              the degrees of freedom
 * @return                vector[N], one replicate
 */
vector student_t_process_replicate_rng(vector y, matrix L, real noise_variance, real nu) {
  int n = rows(L);
  matrix[n, n] precision = chol2inv(L);
  vector[n] g = precision * y;
  matrix[n, n] covariance = noise_variance * add_diag(-noise_variance * precision, 2);
  real factor = (nu + dot_product(y, g) - 2) / (nu + n);
  return multi_student_t_rng(nu + n, y - noise_variance * g, factor * 0.5 * (covariance + covariance'));
}
