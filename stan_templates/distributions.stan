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
