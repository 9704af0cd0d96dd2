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

/**
 * Log pmf of the zero-inflated negative binomial with a log link: a structural zero with probability zi,
 * else y ~ neg_binomial_2_log(eta, phi) (mean exp(eta), variance exp(eta) + exp(eta)^2 / phi). The array
 * form sums over independent entries with per-entry arguments.
 *
 * @param y    count (array of counts)
 * @param eta  log mean of the negative binomial component
 * @param phi  its inverse overdispersion, positive
 * @param zi   probability of a structural zero, in [0, 1]
 * @return     log probability (with all normalising constants)
 */
real zero_inflated_neg_binomial_2_log_lpmf(int y, real eta, real phi, real zi) {
  if (y == 0) {
    return log_sum_exp(log(zi), log1m(zi) + neg_binomial_2_log_lpmf(0 | eta, phi));
  }
  return log1m(zi) + neg_binomial_2_log_lpmf(y | eta, phi);
}

real zero_inflated_neg_binomial_2_log_lpmf(array[] int y, vector eta, vector phi, vector zi) {
  real total = 0;
  for (n in 1:size(y)) {
    total += zero_inflated_neg_binomial_2_log_lpmf(y[n] | eta[n], phi[n], zi[n]);
  }
  return total;
}

/**
 * One draw of the zero-inflated negative binomial with a log link (see
 * zero_inflated_neg_binomial_2_log_lpmf).
 *
 * @param eta  log mean of the negative binomial component
 * @param phi  its inverse overdispersion
 * @param zi   probability of a structural zero
 * @return     a count
 */
int zero_inflated_neg_binomial_2_log_rng(real eta, real phi, real zi) {
  return bernoulli_rng(zi) ? 0 : neg_binomial_2_log_rng(eta, phi);
}

/**
 * Log pmf of the hurdle Poisson with a log link: a zero with probability hu, else a zero-truncated
 * Poisson with rate exp(eta), so p(0) = hu and p(y) = (1 - hu) Poisson(y | exp(eta)) / (1 - exp(-exp(eta)))
 * for y > 0. The array form sums over independent entries with per-entry arguments.
 *
 * @param y    count (array of counts)
 * @param eta  log rate of the Poisson before truncation
 * @param hu   probability of a zero, in [0, 1]
 * @return     log probability (with all normalising constants)
 */
real hurdle_poisson_log_lpmf(int y, real eta, real hu) {
  if (y == 0) {
    return log(hu);
  }
  return log1m(hu) + poisson_log_lpmf(y | eta) - log1m_exp(-exp(eta));
}

real hurdle_poisson_log_lpmf(array[] int y, vector eta, vector hu) {
  real total = 0;
  for (n in 1:size(y)) {
    total += hurdle_poisson_log_lpmf(y[n] | eta[n], hu[n]);
  }
  return total;
}

/**
 * One draw of the hurdle Poisson with a log link (see hurdle_poisson_log_lpmf): a zero with probability
 * hu; else one plus the events of a unit-rate Poisson process on (0, exp(eta)) after its first, whose time
 * is exponential truncated to that interval (exact, no rejection).
 *
 * @param eta  log rate of the Poisson before truncation
 * @param hu   probability of a zero
 * @return     a count
 */
int hurdle_poisson_log_rng(real eta, real hu) {
  if (bernoulli_rng(hu)) {
    return 0;
  }
  real rate = exp(eta);
  real rest = rate + log1m(uniform_rng(0, 1) * -expm1(-rate));
  return rest > 0 ? 1 + poisson_rng(rest) : 1;
}

/**
 * Log pmf of labels under a softmax of the rows of a matrix of logits: label y[n] in 1..K has probability
 * softmax(logits[n]')[y[n]], so the sum is of Stan's categorical_logit_lpmf over the rows.
 *
 * @param y       labels in 1..K, one per row of logits
 * @param logits  matrix with one row of K logits per label
 * @return        log probability of all the labels
 */
real categorical_logit_rows_lpmf(array[] int y, matrix logits) {
  real total = 0;
  for (n in 1:size(y)) {
    total += categorical_logit_lpmf(y[n] | logits[n]');
  }
  return total;
}

/**
 * Log density of a censored normal outcome, with brms' censoring codes: cens = 0 observes y
 * (normal_lpdf), 1 says the value is above y (normal_lccdf), -1 below y (normal_lcdf) and 2 between y and
 * y_upper (the log of the CDF's difference, taken in the upper tail where y is above mu). y_upper is read
 * only where cens = 2. The vector form sums over independent entries with per-entry arguments.
 *
 * @param y      observed value, or the lower end of the censoring interval (vector of them)
 * @param mu     location
 * @param sigma  scale, positive
 * @param cens   censoring code: 0 observed, 1 right, -1 left, 2 interval
 * @param y_upper  upper end of the interval where cens = 2
 * @return       log probability of the observation or censoring event
 */
real normal_censored_lpdf(real y, real mu, real sigma, int cens, real y_upper) {
  if (cens == 0) {
    return normal_lpdf(y | mu, sigma);
  }
  if (cens == 1) {
    return normal_lccdf(y | mu, sigma);
  }
  if (cens == -1) {
    return normal_lcdf(y | mu, sigma);
  }
  if (y > mu) {
    return log_diff_exp(normal_lccdf(y | mu, sigma), normal_lccdf(y_upper | mu, sigma));
  }
  return log_diff_exp(normal_lcdf(y_upper | mu, sigma), normal_lcdf(y | mu, sigma));
}

real normal_censored_lpdf(vector y, vector mu, vector sigma, array[] int cens, vector y_upper) {
  real total = 0;
  for (n in 1:rows(y)) {
    total += normal_censored_lpdf(y[n] | mu[n], sigma[n], cens[n], y_upper[n]);
  }
  return total;
}

/**
 * Log density of a censored lognormal outcome (log y normal with mean mu and standard deviation sigma),
 * with brms' censoring codes as in normal_censored_lpdf: a survival time observed (cens = 0), right- (1),
 * left- (-1) or interval-censored (2, between y and y_upper). The vector form sums over independent entries.
 *
 * @param y      positive time, or the lower end of the censoring interval (vector of them)
 * @param mu     mean of log y
 * @param sigma  standard deviation of log y, positive
 * @param cens   censoring code: 0 observed, 1 right, -1 left, 2 interval
 * @param y_upper  upper end of the interval where cens = 2
 * @return       log probability of the observation or censoring event
 */
real lognormal_censored_lpdf(real y, real mu, real sigma, int cens, real y_upper) {
  if (cens == 0) {
    return lognormal_lpdf(y | mu, sigma);
  }
  if (cens == 1) {
    return lognormal_lccdf(y | mu, sigma);
  }
  if (cens == -1) {
    return lognormal_lcdf(y | mu, sigma);
  }
  if (log(y) > mu) {
    return log_diff_exp(lognormal_lccdf(y | mu, sigma), lognormal_lccdf(y_upper | mu, sigma));
  }
  return log_diff_exp(lognormal_lcdf(y_upper | mu, sigma), lognormal_lcdf(y | mu, sigma));
}

real lognormal_censored_lpdf(vector y, vector mu, vector sigma, array[] int cens, vector y_upper) {
  real total = 0;
  for (n in 1:rows(y)) {
    total += lognormal_censored_lpdf(y[n] | mu[n], sigma[n], cens[n], y_upper[n]);
  }
  return total;
}

/**
 * Log density of a censored Weibull survival time with a log-scale link: weibull(shape, exp(eta)), whose
 * survival function is exp(-(y / exp(eta))^shape), with brms' censoring codes as in normal_censored_lpdf:
 * observed (cens = 0), right- (1), left- (-1) or interval-censored (2, between y and y_upper). The vector form
 * sums over independent entries.
 *
 * @param y      positive time, or the lower end of the censoring interval (vector of them)
 * @param eta    log scale
 * @param shape  Weibull shape, positive
 * @param cens   censoring code: 0 observed, 1 right, -1 left, 2 interval
 * @param y_upper  upper end of the interval where cens = 2
 * @return       log probability of the observation or censoring event
 */
real weibull_censored_lpdf(real y, real eta, real shape, int cens, real y_upper) {
  real scale = exp(eta);
  if (cens == 0) {
    return weibull_lpdf(y | shape, scale);
  }
  if (cens == 1) {
    return weibull_lccdf(y | shape, scale);
  }
  if (cens == -1) {
    return weibull_lcdf(y | shape, scale);
  }
  return log_diff_exp(weibull_lccdf(y | shape, scale), weibull_lccdf(y_upper | shape, scale));
}

real weibull_censored_lpdf(vector y, vector eta, vector shape, array[] int cens, vector y_upper) {
  real total = 0;
  for (n in 1:rows(y)) {
    total += weibull_censored_lpdf(y[n] | eta[n], shape[n], cens[n], y_upper[n]);
  }
  return total;
}
