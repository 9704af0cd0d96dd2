// Likelihoods of gpdsl that Stan does not have built in: log pmfs (scalar and vector overloads) and samplers.

/**
 * Log pmf of the zero-inflated Poisson with a log link: a structural zero with probability zi, else
 * y ~ poisson_log(eta), so p(0) = zi + (1 - zi) exp(-exp(eta)) and p(y) = (1 - zi) Poisson(y | exp(eta))
 * for y > 0. The array form sums over independent entries with per-entry arguments.
 *
 * @param y    count (array of counts)
 * @param eta  log rate of the Poisson component
 * @param zi   probability of a structural zero, in [0, 1]
 * @return     log probability (with all normalising constants)
 */
real zero_inflated_poisson_log_lpmf(int y, real eta, real zi) {
  if (y == 0) {
    return log_sum_exp(log(zi), log1m(zi) + poisson_log_lpmf(0 | eta));
  }
  return log1m(zi) + poisson_log_lpmf(y | eta);
}

real zero_inflated_poisson_log_lpmf(array[] int y, vector eta, vector zi) {
  real total = 0;
  for (n in 1:size(y)) {
    total += zero_inflated_poisson_log_lpmf(y[n] | eta[n], zi[n]);
  }
  return total;
}

/**
 * One draw of the zero-inflated Poisson with a log link (see zero_inflated_poisson_log_lpmf).
 *
 * @param eta  log rate of the Poisson component
 * @param zi   probability of a structural zero
 * @return     a count
 */
int zero_inflated_poisson_log_rng(real eta, real zi) {
  return bernoulli_rng(zi) ? 0 : poisson_log_rng(eta);
}
