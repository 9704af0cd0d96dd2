// The state-space GP over one scalar input (Hartikainen & Särkkä 2010; Särkkä & Solin 2019, ch. 12): f(t) = h s(t)
// with ds = F s dt + L dW, whose stationary covariance P solves F P + P F' + L Qc L' = 0. Between sorted times dt
// apart the state moves by A = matrix_exp(F dt) with noise covariance P - A P A'; a repeated time is a step of zero.
// A kernel's form is three functions, <kernel>_ss_feedback (F), <kernel>_ss_stationary (P), each taking
// (int order, <its hyperparameters as its kernel function takes them>), and <kernel>_ss_measurement(int order) (h as a
// 1 x d matrix); `order` is the number of harmonics of a periodic kernel's truncated cosine series (Solin & Särkkä
// 2014). A sum stacks the states (ss_block_diagonal), a product takes Kronecker products (ss_kronecker_sum for F,
// ss_kronecker for P and h), a scale multiplies P. The Kalman filter and the Rauch-Tung-Striebel smoother below run
// along times sorted in transformed data, with a site of noise variance `noise` at each point whose mask is 1; each
// transition is computed once per distinct time step (two for a regular series, N for irregular times). Independent
// series (k(t) * same(g)) are sorted by group, then time, and each group's first time follows the one before by an
// infinite step, whose transition is 0: the state restarts from N(0, P).

/**
 * matern12 as a state-space model: the Ornstein-Uhlenbeck feedback -1 / lengthscale.
 *
 * @param order        unused (the periodic kernel's series length)
 * @param variance     marginal variance
 * @param lengthscale  vector[1]
 * @return             matrix[1, 1] F
 */
matrix matern12_ss_feedback(int order, real variance, vector lengthscale) {
  return rep_matrix(-1 / lengthscale[1], 1, 1);
}

/**
 * matern12's stationary state covariance: the variance.
 *
 * @param order        unused
 * @param variance     marginal variance
 * @param lengthscale  vector[1]
 * @return             matrix[1, 1] P
 */
matrix matern12_ss_stationary(int order, real variance, vector lengthscale) {
  return rep_matrix(variance, 1, 1);
}

/**
 * matern12's measurement: f is the state.
 *
 * @param order  unused
 * @return       matrix[1, 1] h
 */
matrix matern12_ss_measurement(int order) {
  return rep_matrix(1, 1, 1);
}

/**
 * matern32 as a state-space model of (f, f'): F = [0, 1; -r^2, -2 r], r = sqrt(3) / lengthscale.
 *
 * @param order        unused
 * @param variance     marginal variance
 * @param lengthscale  vector[1]
 * @return             matrix[2, 2] F
 */
matrix matern32_ss_feedback(int order, real variance, vector lengthscale) {
  real r = sqrt(3) / lengthscale[1];
  return [[0, 1], [-square(r), -2 * r]];
}

/**
 * matern32's stationary state covariance diag(variance, r^2 variance).
 *
 * @param order        unused
 * @param variance     marginal variance
 * @param lengthscale  vector[1]
 * @return             matrix[2, 2] P
 */
matrix matern32_ss_stationary(int order, real variance, vector lengthscale) {
  real r = sqrt(3) / lengthscale[1];
  return [[variance, 0], [0, square(r) * variance]];
}

/**
 * matern32's measurement: the first component.
 *
 * @param order  unused
 * @return       matrix[1, 2] h
 */
matrix matern32_ss_measurement(int order) {
  return [[1, 0]];
}

/**
 * matern52 as a state-space model of (f, f', f''): the companion matrix of (x + r)^3, r = sqrt(5) / lengthscale.
 *
 * @param order        unused
 * @param variance     marginal variance
 * @param lengthscale  vector[1]
 * @return             matrix[3, 3] F
 */
matrix matern52_ss_feedback(int order, real variance, vector lengthscale) {
  real r = sqrt(5) / lengthscale[1];
  return [[0, 1, 0], [0, 0, 1], [-r ^ 3, -3 * square(r), -3 * r]];
}

/**
 * matern52's stationary state covariance, kappa = variance r^2 / 3.
 *
 * @param order        unused
 * @param variance     marginal variance
 * @param lengthscale  vector[1]
 * @return             matrix[3, 3] P
 */
matrix matern52_ss_stationary(int order, real variance, vector lengthscale) {
  real r = sqrt(5) / lengthscale[1];
  real kappa = variance * square(r) / 3;
  return [[variance, 0, -kappa], [0, kappa, 0], [-kappa, 0, r ^ 4 * variance]];
}

/**
 * matern52's measurement: the first component.
 *
 * @param order  unused
 * @return       matrix[1, 3] h
 */
matrix matern52_ss_measurement(int order) {
  return [[1, 0, 0]];
}

/**
 * periodic (GPy's StdPeriodic) by its cosine series truncated after `order` harmonics: a constant state, then one
 * undamped resonator [0, -j w; j w, 0] per harmonic j, w = 2 pi / period.
 *
 * @param order        harmonics J (the state has 2 J + 1 components)
 * @param variance     marginal variance
 * @param lengthscale  vector[1]
 * @param period       vector[1]
 * @return             matrix[2 J + 1, 2 J + 1] F
 */
matrix periodic_ss_feedback(int order, real variance, vector lengthscale, vector period) {
  matrix[2 * order + 1, 2 * order + 1] F = rep_matrix(0, 2 * order + 1, 2 * order + 1);
  real w = 2 * pi() / period[1];
  for (j in 1:order) {
    F[2 * j + 1, 2 * j] = j * w;
    F[2 * j, 2 * j + 1] = -j * w;
  }
  return F;
}

/**
 * periodic's stationary state covariance: diag(c_0, c_1, c_1, ..., c_J, c_J) with c_0 = variance exp(-z) I_0(z),
 * c_j = 2 variance exp(-z) I_j(z), z = 1 / (4 lengthscale^2), I_j the modified Bessel functions of the first kind.
 *
 * @param order        harmonics J
 * @param variance     marginal variance
 * @param lengthscale  vector[1]
 * @param period       vector[1]
 * @return             matrix[2 J + 1, 2 J + 1] P
 */
matrix periodic_ss_stationary(int order, real variance, vector lengthscale, vector period) {
  vector[2 * order + 1] c;
  real z = 0.25 / square(lengthscale[1]);
  c[1] = variance * exp(log_modified_bessel_first_kind(0, z) - z);
  for (j in 1:order) {
    c[2 * j] = 2 * variance * exp(log_modified_bessel_first_kind(j, z) - z);
    c[2 * j + 1] = c[2 * j];
  }
  return diag_matrix(c);
}

/**
 * periodic's measurement: the constant and the first component of each resonator.
 *
 * @param order  harmonics J
 * @return       matrix[1, 2 J + 1] h
 */
matrix periodic_ss_measurement(int order) {
  matrix[1, 2 * order + 1] h = rep_matrix(0, 1, 2 * order + 1);
  h[1, 1] = 1;
  for (j in 1:order) {
    h[1, 2 * j] = 1;
  }
  return h;
}

/**
 * constant as a state-space model: a state that never moves.
 *
 * @param order     unused
 * @param variance  the constant's variance
 * @return          matrix[1, 1] F = 0
 */
matrix constant_ss_feedback(int order, real variance) {
  return rep_matrix(0, 1, 1);
}

/**
 * constant's stationary state covariance: the variance.
 *
 * @param order     unused
 * @param variance  the constant's variance
 * @return          matrix[1, 1] P
 */
matrix constant_ss_stationary(int order, real variance) {
  return rep_matrix(variance, 1, 1);
}

/**
 * constant's measurement: f is the state.
 *
 * @param order  unused
 * @return       matrix[1, 1] h
 */
matrix constant_ss_measurement(int order) {
  return rep_matrix(1, 1, 1);
}

/**
 * The block-diagonal matrix of two matrices (the state of a sum of kernels).
 *
 * @param a  matrix[m, n]
 * @param b  matrix[p, q]
 * @return   matrix[m + p, n + q]
 */
matrix ss_block_diagonal(matrix a, matrix b) {
  matrix[rows(a) + rows(b), cols(a) + cols(b)] c = rep_matrix(0, rows(a) + rows(b), cols(a) + cols(b));
  c[1:rows(a), 1:cols(a)] = a;
  c[(rows(a) + 1):(rows(a) + rows(b)), (cols(a) + 1):(cols(a) + cols(b))] = b;
  return c;
}

/**
 * The Kronecker product of two matrices (the stationary covariance and measurement of a product of kernels).
 *
 * @param a  matrix[m, n]
 * @param b  matrix[p, q]
 * @return   matrix[m p, n q]
 */
matrix ss_kronecker(matrix a, matrix b) {
  matrix[rows(a) * rows(b), cols(a) * cols(b)] c;
  for (i in 1:rows(a)) {
    for (j in 1:cols(a)) {
      c[((i - 1) * rows(b) + 1):(i * rows(b)), ((j - 1) * cols(b) + 1):(j * cols(b))] = a[i, j] * b;
    }
  }
  return c;
}

/**
 * The Kronecker sum a (x) I + I (x) b of two square matrices (the feedback of a product of kernels).
 *
 * @param a  matrix[m, m]
 * @param b  matrix[p, p]
 * @return   matrix[m p, m p]
 */
matrix ss_kronecker_sum(matrix a, matrix b) {
  return ss_kronecker(a, identity_matrix(rows(b))) + ss_kronecker(identity_matrix(rows(a)), b);
}

/**
 * The first column of a point set, as the times of a state-space GP.
 *
 * @param x  array[N] vector[1]
 * @return   vector[N]
 */
vector state_space_times(array[] vector x) {
  vector[size(x)] t;
  for (n in 1:size(x)) {
    t[n] = x[n][1];
  }
  return t;
}

/**
 * The steps between sorted times, 0 before the first.
 *
 * @param t  vector[N], sorted
 * @return   vector[N]
 */
vector state_space_steps(vector t) {
  vector[rows(t)] steps;
  steps[1] = 0;
  for (n in 2:rows(t)) {
    steps[n] = t[n] - t[n - 1];
  }
  return steps;
}

/**
 * The ranks 1, 2, ... of values, equal values sharing one.
 *
 * @param v  vector[N]
 * @return   array[N] int
 */
array[] int ss_dense_ranks(vector v) {
  array[rows(v)] int order = sort_indices_asc(v);
  array[rows(v)] int ranks;
  int rank = 1;
  ranks[order[1]] = 1;
  for (n in 2:rows(v)) {
    rank += v[order[n]] != v[order[n - 1]];
    ranks[order[n]] = rank;
  }
  return ranks;
}

/**
 * The sort of points by group label, then time (independent series, k(t) * same(g)): by the exact integer key
 * rank(group) (N + 1) + rank(time).
 *
 * @param t  vector[N] times
 * @param g  vector[N] group labels
 * @return   array[N] int, the points' indices in that order
 */
array[] int state_space_group_order(vector t, vector g) {
  int n = rows(t);
  array[n] int time_ranks = ss_dense_ranks(t);
  array[n] int group_ranks = ss_dense_ranks(g);
  vector[n] key;
  for (k in 1:n) {
    key[k] = group_ranks[k] * (n + 1.0) + time_ranks[k];
  }
  return sort_indices_asc(key);
}

/**
 * The steps between times sorted by group, then time: an infinite step into each group's first time, which restarts
 * the state (state_space_transitions), so the groups are independent series.
 *
 * @param t  vector[N] times, sorted within groups
 * @param g  vector[N] their group labels, grouped
 * @return   vector[N]
 */
vector state_space_group_steps(vector t, vector g) {
  vector[rows(t)] steps = state_space_steps(t);
  for (n in 2:rows(t)) {
    if (g[n] != g[n - 1]) {
      steps[n] = positive_infinity();
    }
  }
  return steps;
}

/**
 * The number of distinct values among time steps (a regular series has two: 0 and its spacing).
 *
 * @param steps  vector[N]
 * @return       the count
 */
int state_space_distinct_count(vector steps) {
  vector[rows(steps)] sorted = sort_asc(steps);
  int count = 1;
  for (n in 2:rows(sorted)) {
    count += sorted[n] != sorted[n - 1];
  }
  return count;
}

/**
 * The distinct values among time steps, ascending.
 *
 * @param steps  vector[N]
 * @param count  their number (state_space_distinct_count)
 * @return       vector[count]
 */
vector state_space_distinct(vector steps, int count) {
  vector[rows(steps)] sorted = sort_asc(steps);
  vector[count] distinct;
  int k = 1;
  distinct[1] = sorted[1];
  for (n in 2:rows(sorted)) {
    if (sorted[n] != sorted[n - 1]) {
      k += 1;
      distinct[k] = sorted[n];
    }
  }
  return distinct;
}

/**
 * Where each time step sits among the distinct steps, so that each transition is computed once per distinct step.
 *
 * @param steps     vector[N]
 * @param distinct  vector[U], ascending (state_space_distinct)
 * @return          array[N] int, entries in 1..U
 */
array[] int state_space_step_index(vector steps, vector distinct) {
  array[rows(steps)] int index;
  for (n in 1:rows(steps)) {
    int low = 1;
    int high = rows(distinct);
    while (low < high) {
      int middle = (low + high) %/% 2;
      if (distinct[middle] < steps[n]) {
        low = middle + 1;
      } else {
        high = middle;
      }
    }
    index[n] = low;
  }
  return index;
}

/**
 * The transitions matrix_exp(F dt) over the distinct steps dt (the identity for a step of 0; 0 for an infinite step,
 * into a new group's first time, where the state starts afresh from N(0, P)).
 *
 * @param distinct  vector[U] distinct steps
 * @param F         matrix[d, d] feedback
 * @return          array[U] matrix[d, d]
 */
array[] matrix state_space_transitions(vector distinct, matrix F) {
  array[rows(distinct)] matrix[rows(F), cols(F)] A;
  for (u in 1:rows(distinct)) {
    if (is_inf(distinct[u])) {
      A[u] = rep_matrix(0, rows(F), cols(F));
    } else {
      A[u] = distinct[u] > 0 ? matrix_exp(F * distinct[u]) : identity_matrix(rows(F));
    }
  }
  return A;
}

/**
 * log N(r | 0, K + noise I) over the points whose mask is 1, by the Kalman filter along sorted times.
 *
 * @param r      vector[N] residuals, sorted by time
 * @param mask   vector[N], 1 at an observed point, 0 elsewhere
 * @param distinct  vector[U] the distinct time steps (state_space_distinct)
 * @param index  array[N] int, each point's step among them (state_space_step_index)
 * @param F      matrix[d, d] feedback
 * @param P      matrix[d, d] stationary covariance
 * @param h      row_vector[d] measurement
 * @param noise  the sites' noise variance
 * @return       the log density
 */
real state_space_normal_lpdf(vector r, vector mask, vector distinct, array[] int index, matrix F, matrix P,
                             row_vector h, real noise) {
  int d = rows(P);
  array[rows(distinct)] matrix[d, d] transitions = state_space_transitions(distinct, F);
  vector[d] m = rep_vector(0, d);
  matrix[d, d] C = P;
  real lp = 0;
  for (k in 1:rows(r)) {
    if (distinct[index[k]] > 0) {
      matrix[d, d] A = transitions[index[k]];
      C = quad_form_sym(C - P, A') + P;
      m = A * m;
    }
    if (mask[k] > 0) {
      vector[d] column = C * h';
      real mu = h * m;
      real s = h * column + noise;
      lp += normal_lpdf(r[k] | mu, sqrt(s));
      m += column * ((r[k] - mu) / s);
      C = C - column * column' / s;
      C = 0.5 * (C + C');
    }
  }
  return lp;
}

/**
 * Posterior means and variances of f at sorted times given Gaussian sites: the Kalman filter and the
 * Rauch-Tung-Striebel smoother.
 *
 * @param r      vector[N] site values (residuals), sorted by time
 * @param mask   vector[N], 1 where a site is, 0 elsewhere
 * @param distinct  vector[U] the distinct time steps
 * @param index  array[N] int, each point's step among them
 * @param F      matrix[d, d] feedback
 * @param P      matrix[d, d] stationary covariance
 * @param h      row_vector[d] measurement
 * @param noise  the sites' noise variance
 * @return       matrix[N, 2]: means, then variances
 */
matrix state_space_smoothed(vector r, vector mask, vector distinct, array[] int index, matrix F, matrix P,
                            row_vector h, real noise) {
  int n = rows(r);
  int d = rows(P);
  array[rows(distinct)] matrix[d, d] transitions = state_space_transitions(distinct, F);
  array[n] vector[d] means;
  array[n] matrix[d, d] covariances;
  matrix[n, 2] moments;
  vector[d] m = rep_vector(0, d);
  matrix[d, d] C = P;
  for (k in 1:n) {
    C = quad_form_sym(C - P, transitions[index[k]]') + P;
    m = transitions[index[k]] * m;
    if (mask[k] > 0) {
      vector[d] column = C * h';
      real s = h * column + noise;
      m += column * ((r[k] - h * m) / s);
      C = C - column * column' / s;
      C = 0.5 * (C + C');
    }
    means[k] = m;
    covariances[k] = C;
  }
  moments[n, 1] = h * m;
  moments[n, 2] = quad_form(C, h');
  for (step in 1:(n - 1)) {
    int k = n - step;
    matrix[d, d] A = transitions[index[k + 1]];
    matrix[d, d] predicted = quad_form_sym(covariances[k] - P, A') + P;
    matrix[d, d] gain = mdivide_right_spd(covariances[k] * A', predicted);
    m = means[k] + gain * (m - A * means[k]);
    C = covariances[k] + gain * (C - predicted) * gain';
    C = 0.5 * (C + C');
    moments[k, 1] = h * m;
    moments[k, 2] = quad_form(C, h');
  }
  return moments;
}

/**
 * Leave-one-out log densities log p(r_k | r_-k) of the observed points, from each point's smoothed marginal with its
 * own site removed; 0 where the mask is 0.
 *
 * @param r      vector[N] residuals, sorted by time
 * @param mask   vector[N], 1 at an observed point
 * @param distinct  vector[U] the distinct time steps
 * @param index  array[N] int, each point's step among them
 * @param F      matrix[d, d] feedback
 * @param P      matrix[d, d] stationary covariance
 * @param h      row_vector[d] measurement
 * @param noise  the sites' noise variance
 * @return       vector[N], sorted by time
 */
vector state_space_loo_log_densities(vector r, vector mask, vector distinct, array[] int index, matrix F, matrix P,
                                     row_vector h, real noise) {
  matrix[rows(r), 2] moments = state_space_smoothed(r, mask, distinct, index, F, P, h, noise);
  vector[rows(r)] lp = rep_vector(0, rows(r));
  for (k in 1:rows(r)) {
    if (mask[k] > 0) {
      real cavity_variance = 1 / (1 / moments[k, 2] - 1 / noise);
      real cavity_mean = cavity_variance * (moments[k, 1] / moments[k, 2] - r[k] / noise);
      lp[k] = normal_lpdf(r[k] | cavity_mean, sqrt(cavity_variance + noise));
    }
  }
  return lp;
}

/**
 * A symmetric square root R R' = S of a positive semi-definite matrix (negative rounding counted as zero).
 *
 * @param S  matrix[d, d]
 * @return   matrix[d, d]
 */
matrix ss_psd_sqrt(matrix S) {
  matrix[rows(S), rows(S)] symmetric = 0.5 * (S + S');
  return diag_post_multiply(eigenvectors_sym(symmetric), sqrt(fmax(eigenvalues_sym(symmetric), 0)));
}

/**
 * A draw of f ~ N(0, K) at sorted times by the state recursion.
 *
 * @param distinct  vector[U] the distinct time steps
 * @param index  array[N] int, each point's step among them
 * @param F      matrix[d, d] feedback
 * @param P      matrix[d, d] stationary covariance
 * @param h      row_vector[d] measurement
 * @return       vector[N], sorted by time
 */
vector state_space_prior_rng(vector distinct, array[] int index, matrix F, matrix P, row_vector h) {
  int d = rows(P);
  array[rows(distinct)] matrix[d, d] transitions = state_space_transitions(distinct, F);
  array[rows(distinct)] matrix[d, d] roots;
  vector[size(index)] f;
  vector[d] s = ss_psd_sqrt(P) * to_vector(normal_rng(rep_vector(0, d), 1));
  for (u in 1:rows(distinct)) {
    roots[u] = ss_psd_sqrt(P - quad_form_sym(P, transitions[u]'));
  }
  for (k in 1:size(index)) {
    if (distinct[index[k]] > 0) {
      s = transitions[index[k]] * s + roots[index[k]] * to_vector(normal_rng(rep_vector(0, d), 1));
    }
    f[k] = h * s;
  }
  return f;
}

/**
 * A replicate r_rep ~ p(r_rep | r) at every sorted point: f drawn jointly from p(f | r) by pathwise conditioning
 * (a prior draw plus the smoother's mean of the residual of its noisy version at the observed points), plus noise.
 *
 * @param r      vector[N] residuals, sorted by time (any value where the mask is 0)
 * @param mask   vector[N], 1 at an observed point
 * @param distinct  vector[U] the distinct time steps
 * @param index  array[N] int, each point's step among them
 * @param F      matrix[d, d] feedback
 * @param P      matrix[d, d] stationary covariance
 * @param h      row_vector[d] measurement
 * @param noise  the sites' noise variance
 * @return       vector[N], sorted by time
 */
vector state_space_replicate_rng(vector r, vector mask, vector distinct, array[] int index, matrix F, matrix P,
                                 row_vector h, real noise) {
  int n = rows(r);
  vector[n] prior = state_space_prior_rng(distinct, index, F, P, h);
  vector[n] pseudo = prior + sqrt(noise) * to_vector(normal_rng(rep_vector(0, n), 1));
  matrix[n, 2] moments = state_space_smoothed(mask .* (r - pseudo), mask, distinct, index, F, P, h, noise);
  return prior + moments[:, 1] + sqrt(noise) * to_vector(normal_rng(rep_vector(0, n), 1));
}

/**
 * A mask with 1 at the observed entries and 0 elsewhere.
 *
 * @param n         the number of entries
 * @param observed  array[] int, the observed entries' indices
 * @return          vector[n]
 */
vector state_space_mask(int n, array[] int observed) {
  vector[n] mask = rep_vector(0, n);
  mask[observed] = rep_vector(1, size(observed));
  return mask;
}

/**
 * A vector's observed entries, with 0 elsewhere (the value a site without an observation carries).
 *
 * @param y         vector[n]
 * @param observed  array[] int, the observed entries' indices
 * @return          vector[n]
 */
vector state_space_filled(vector y, array[] int observed) {
  vector[rows(y)] filled = rep_vector(0, rows(y));
  filled[observed] = y[observed];
  return filled;
}

/**
 * The principal square root R = V diag(sqrt(lambda)) V' of a positive semi-definite matrix (R R = S), eigenvalues
 * below `floor` (rounding) counted as zero: unique, so that every program maps the same innovations to the same state.
 *
 * @param S      matrix[d, d]
 * @param floor  eigenvalues below it count as zero
 * @return       matrix[d, d], symmetric
 */
matrix ss_principal_sqrt(matrix S, real floor) {
  matrix[rows(S), rows(S)] symmetric = 0.5 * (S + S');
  matrix[rows(S), rows(S)] vectors = eigenvectors_sym(symmetric);
  vector[rows(S)] values = eigenvalues_sym(symmetric);
  for (i in 1:rows(S)) {
    values[i] = values[i] > floor ? sqrt(values[i]) : 0;
  }
  return diag_post_multiply(vectors, values) * vectors';
}

/**
 * f at sorted times from standard normal innovations z (a sampled state-space GP, non-centred): the state starts as
 * s_1 = L z_1 (L the Cholesky factor of P) and moves as s_k = A_k s_{k-1} + Q_k^(1/2) z_k, Q_k = P - A_k P A_k',
 * Q_k^(1/2) its principal square root with eigenvalues below 1e-12 trace(P) (rounding) counted as zero (once per
 * distinct step; a step of 0, a repeated time, leaves the state as it is); f_k = h s_k. z_k is the k-th block of d
 * values of z.
 *
 * @param z      vector[N * d] innovations
 * @param distinct  vector[U] the distinct time steps
 * @param index  array[N] int, each point's step among them
 * @param F      matrix[d, d] feedback
 * @param P      matrix[d, d] stationary covariance
 * @param h      row_vector[d] measurement
 * @return       vector[N], sorted by time
 */
vector state_space_latent(vector z, vector distinct, array[] int index, matrix F, matrix P, row_vector h) {
  int n = size(index);
  int d = rows(P);
  array[rows(distinct)] matrix[d, d] transitions = state_space_transitions(distinct, F);
  array[rows(distinct)] matrix[d, d] roots;
  vector[n] f;
  vector[d] s = cholesky_decompose(0.5 * (P + P')) * segment(z, 1, d);
  for (u in 1:rows(distinct)) {
    roots[u] = distinct[u] > 0 ? ss_principal_sqrt(P - quad_form_sym(P, transitions[u]'), 1e-12 * trace(P))
                                : rep_matrix(0, d, d);
  }
  f[1] = h * s;
  for (k in 2:n) {
    if (distinct[index[k]] > 0) {
      s = transitions[index[k]] * s + roots[index[k]] * segment(z, (k - 1) * d + 1, d);
    }
    f[k] = h * s;
  }
  return f;
}
