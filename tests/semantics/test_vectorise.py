"""Loops of likelihood statements: the checker rewrites ``for (n in 1:N) y[n] ~ d(... x[n] ... u[g[n]] ...)`` as the
vectorised statement when that keeps its meaning, and keeps the loop otherwise."""

import pytest

from gpdsl.api import check_text
from gpdsl.ir import nodes as ir

MODEL = """
data {
  int N; int G; int K; matrix[N, 2] X; vector[N] y; array[N] int<lower=0> c; vector[K] w;
  array[N] int<lower=1, upper=G> group; array[K] int<lower=1, upper=G> other;
}
parameters {
  real<lower=0> s ~ half_normal(1); real<lower=0> tau ~ half_normal(1); vector[G] u ~ normal(0, tau);
  matrix[G, G] E ~ normal(0, 1);
}
model {
  f ~ gp(X, rbf());
  LIKELIHOOD
}
"""


def _last(likelihood: str):
    model, _ = check_text(MODEL.replace("LIKELIHOOD", likelihood))
    return model.statements[-1]


@pytest.mark.parametrize("loop, vectorised", [
    ("for (n in 1:N) y[n] ~ normal(f[n] + u[group[n]], s);", "y ~ normal(f + u[group], s);"),
    ("for (i in 1:N) { y[i] ~ normal(f[i] + X[i, 2] * u[1], exp(-X[i, 1]) * s); }",
     "y ~ normal(f + X[:, 2] * u[1], exp(-X[:, 1]) * s);"),
    ("for (n in 1:N) y[n] ~ normal(f[n] + X[1, 2], s);", "y ~ normal(f + X[1, 2], s);"),
    ("for (n in 1:N) y[n] ~ normal(f[n] + E[group[n], c[n]], s);", "y ~ normal(f + E[group, c], s);"),
    ("for (n in 1:N) c[n] ~ poisson_log(f[n] - 2 * u[group[n]]);", "c ~ poisson_log(f - 2 * u[group]);"),
])
def test_a_loop_over_the_data_becomes_the_vectorised_statement(loop, vectorised):
    rewritten, written = _last(loop), _last(vectorised)
    assert isinstance(rewritten, ir.LikelihoodStatement)
    assert rewritten == written  # spans are not compared: the same targets, distributions and typed arguments


@pytest.mark.parametrize("loop", [
    "for (n in 1:N) y[n] ~ normal(f[n], s * n);",                       # the loop variable outside an index
    "for (n in 2:N) y[n] ~ normal(f[n], s);",                           # not over the whole of y
    "for (n in 1:K) y[n] ~ normal(f[n] + w[n], s);",                    # y is longer than the loop
    "for (n in 1:N) y[n] ~ normal(f[n] + u[other[n]], s);",             # other has another length
    "for (n in 1:N) y[n] ~ normal(f[n] + E[group[n], group[N + 1 - n]], s);",  # n in an index's arithmetic
])
def test_a_loop_that_cannot_be_rewritten_stays_a_loop(loop):
    assert isinstance(_last(loop), ir.ForLoop)
