// GP inputs as point sets: kernel functions take `array[] vector`, one vector per point.
// Two-level inputs (e.g. gp((t, X), k) with vector[T] t and array[T] matrix[N, D] X) are flattened
// to T * N points, point (i, n) at position (i - 1) * N + n.

/**
 * The rows of a matrix as points: row i of x becomes point i.
 *
 * @param x  matrix[N, D], one row per point
 * @return   array[N] vector[D]
 */
array[] vector rows_as_points(matrix x) {
  array[rows(x)] vector[cols(x)] points;
  for (i in 1:rows(x)) {
    points[i] = x[i]';
  }
  return points;
}

/**
 * The labels of an int array (e.g. sequence numbers) as one-dimensional points.
 *
 * @param g  array[N] int, one label per point
 * @return   array[N] vector[1]
 */
array[] vector labels_as_points(array[] int g) {
  array[size(g)] vector[1] points;
  for (i in 1:size(g)) {
    points[i] = rep_vector(g[i], 1);
  }
  return points;
}

/**
 * The entries of a vector as one-dimensional points.
 *
 * @param t  vector[N], one value per point
 * @return   array[N] vector[1]
 */
array[] vector values_as_points(vector t) {
  array[rows(t)] vector[1] points;
  for (i in 1:rows(t)) {
    points[i] = rep_vector(t[i], 1);
  }
  return points;
}

/**
 * The rows of every matrix in an array, stacked: row n of x[i] becomes point (i - 1) * N + n.
 *
 * @param x  array[T] matrix[N, D]
 * @return   array[T * N] vector[D]
 */
array[] vector stacked_rows_as_points(array[] matrix x) {
  int n = size(x) > 0 ? rows(x[1]) : 0;
  int d = size(x) > 0 ? cols(x[1]) : 0;
  array[size(x) * n] vector[d] points;
  for (i in 1:size(x)) {
    for (j in 1:n) {
      points[(i - 1) * n + j] = x[i][j]';
    }
  }
  return points;
}

/**
 * The entries of every vector in an array, stacked as one-dimensional points.
 *
 * @param t  array[T] vector[N]
 * @return   array[T * N] vector[1]
 */
array[] vector stacked_values_as_points(array[] vector t) {
  int n = size(t) > 0 ? rows(t[1]) : 0;
  array[size(t) * n] vector[1] points;
  for (i in 1:size(t)) {
    for (j in 1:n) {
      points[(i - 1) * n + j] = rep_vector(t[i][j], 1);
    }
  }
  return points;
}

/**
 * The entries of a vector as one-dimensional points, each repeated n times (a component broadcast
 * over the trailing index of two-level inputs).
 *
 * @param t  vector[T]
 * @param n  number of repetitions
 * @return   array[T * n] vector[1]
 */
array[] vector repeated_values_as_points(vector t, int n) {
  array[rows(t) * n] vector[1] points;
  for (i in 1:rows(t)) {
    for (j in 1:n) {
      points[(i - 1) * n + j] = rep_vector(t[i], 1);
    }
  }
  return points;
}

/**
 * The rows of a matrix as points, each repeated n times.
 *
 * @param x  matrix[T, D]
 * @param n  number of repetitions
 * @return   array[T * n] vector[D]
 */
array[] vector repeated_rows_as_points(matrix x, int n) {
  array[rows(x) * n] vector[cols(x)] points;
  for (i in 1:rows(x)) {
    for (j in 1:n) {
      points[(i - 1) * n + j] = x[i]';
    }
  }
  return points;
}

/**
 * Two point sets of equal size joined per point: the columns of a concatenated to those of b.
 *
 * @param a  array[M] vector[D1]
 * @param b  array[M] vector[D2]
 * @return   array[M] vector[D1 + D2]
 */
array[] vector concatenated_points(array[] vector a, array[] vector b) {
  int d = size(a) > 0 ? rows(a[1]) + rows(b[1]) : 0;
  array[size(a)] vector[d] points;
  for (i in 1:size(a)) {
    points[i] = append_row(a[i], b[i]);
  }
  return points;
}

/**
 * The deep Mahalanobis GP's input map project(W, X): z[i, q] = sum_d W[q][i, d] * X[i, d].
 *
 * @param w  array[Q] matrix[N, D], input-dependent projection weights
 * @param x  matrix[N, D], inputs
 * @return   matrix[N, Q]
 */
matrix project(array[] matrix w, matrix x) {
  matrix[rows(x), size(w)] z;
  for (q in 1:size(w)) {
    z[:, q] = rows_dot_product(w[q], x);
  }
  return z;
}

/**
 * The columns of a matrix as an array of vectors (independent outputs sharing one covariance).
 *
 * @param y  matrix[N, D]
 * @return   array[D] vector[N]
 */
array[] vector matrix_columns(matrix y) {
  array[cols(y)] vector[rows(y)] columns;
  for (d in 1:cols(y)) {
    columns[d] = col(y, d);
  }
  return columns;
}

/**
 * gpdsl's G[a, b] with two int arrays: the entries at the pairs (a[n], b[n]), one per n (Stan's G[a, b]
 * would be the size(a) x size(b) sub-matrix).
 *
 * @param G  matrix[R, C]
 * @param a  array[N] int of rows in 1..R
 * @param b  array[N] int of columns in 1..C
 * @return   vector[N] with entry n G[a[n], b[n]]
 */
vector matrix_pairs(matrix G, array[] int a, array[] int b) {
  vector[size(a)] out;
  for (n in 1:size(a)) {
    out[n] = G[a[n], b[n]];
  }
  return out;
}
