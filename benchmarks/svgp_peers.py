"""Sparse variational GP classification on 100,000 points with ten inputs: gpdsl's ``svgp`` against GPflow's ``SVGP``
and GPyTorch's ``ApproximateGP``, on the CPU, in float64: time to a stable ELBO, the final ELBO on the whole data,
the held-out log predictive density, and the time gpdsl takes to reach each peer's final ELBO over the time the peer
takes to reach it.

The same model and schedule in all three: a zero-mean GP with a squared-exponential ARD kernel (variance and ten
length-scales, all starting at 1, no priors), a Bernoulli likelihood with the logistic link (expectations by
Gauss-Hermite quadrature: gpdsl 64 nodes, GPflow and GPyTorch 20), ``M`` inducing inputs started at k-means centres
and moved, ``q(u)`` whitened and started at the prior, minibatches of ``B`` points drawn with replacement, Adam at
learning rate 0.01 on every parameter for ``--steps`` steps. gpdsl also runs with ``--natural-gradient`` (its steps
for ``q(u)``, Adam for the rest). The data are simulated (seeded): inputs standard normal, a logit made of four of
the ten inputs, and a held-out set of 10,000 points.

Every library runs in its own subprocess of this script (``--worker``), with its own interpreter: GPflow and GPyTorch
are peers, not dependencies: install them in the benchmark's own places, e.g. ``python3.11 -m venv /tmp/bench-gpflow
&& /tmp/bench-gpflow/bin/pip install tensorflow tensorflow-probability tf-keras gpflow`` and ``python3.11 -m venv
/tmp/bench-torch && /tmp/bench-torch/bin/pip install torch gpytorch`` (the defaults of ``--gpflow-python`` and
``--gpytorch-python``); a missing one is skipped with a line saying so.

Each worker records the mean minibatch ELBO of every chunk of ``--chunk`` steps and the wall time at its end, from
the call that builds the model (k-means, compilation and tracing included). The ELBO is *stable* at the first chunk
after which every chunk's mean stays within ``--tolerance`` nats a point of the final one (the mean of the last five
chunks); gpdsl *reaches* a peer's final ELBO (on the whole data, at the end) at its first chunk whose mean is at
least that minus the tolerance. The held-out log predictive density is ``log E_q(f*)[p(y* | f*)]`` per point, by
the same 64-node Gauss-Hermite rule for all.

Threads: gpdsl runs XLA's CPU client with single-threaded Eigen and one BLAS thread (``gpdsl/__init__.py``), so the
peers get ``--threads 1`` too by default (``torch.set_num_threads``, TensorFlow's intra- and inter-op pools, the
BLAS variables); on a busy two-core machine more threads also make OpenMP's spinning workers collide (PyTorch's
Cholesky of a 50 x 50 matrix took 2.4 ms with two threads and 9 us with one here).

gpdsl's persistent compilation cache is off in its workers (``GPDSL_JAX_CACHE=0``): it compiles cold, as
TensorFlow traces its function afresh, and waits on no other process's lock of a shared cache.

Run: ``PYTHONPATH=. python benchmarks/svgp_peers.py [--steps 6000] [--num-inducing 100] [--batch-size 500]``.
A worker that runs past ``--budget`` seconds is stopped and its row says so. Wall times on a shared machine are
noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
DIM = 10
WORKERS = ("gpdsl", "gpdsl-natgrad", "gpflow", "gpytorch")
MODEL = """data {
  int N;
  int D;
  matrix[N, D] X;
  array[N] int<lower=0, upper=1> y;
}
parameters {
  real<lower=0> sigma;
  vector<lower=0>[D] ell;
}
model {
  f ~ gp(X, square(sigma) * rbf(lengthscale = ell));
  y ~ bernoulli_logit(f);
}
"""


def simulate(n_train: int, n_test: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_train + n_test, DIM))
    logit = 2.0 * np.sin(1.5 * X[:, 0]) + X[:, 1] ** 2 - 1.0 + X[:, 2] * X[:, 3]
    y = rng.binomial(1, 1.0 / (1.0 + np.exp(-logit)))
    return X[:n_train], y[:n_train], X[n_train:], y[n_train:]


def heldout_lpd(mean, variance, y):
    """Mean over points of ``log int p(y | f) N(f | mean, variance) df`` under the logistic link, 64 nodes."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(64)
    f = np.asarray(mean)[:, None] + np.sqrt(np.asarray(variance))[:, None] * nodes[None, :]
    p_one = (weights / weights.sum() / (1.0 + np.exp(-f))).sum(axis=1)
    return float(np.mean(np.log(np.where(np.asarray(y) == 1, p_one, 1.0 - p_one))))


def kmeans_centres(X, M, seed):
    from scipy.cluster.vq import kmeans2

    centres, _ = kmeans2(X, M, minit="++", seed=seed)
    return centres


class ChunkClock:
    """Stands in for standard error during a gpdsl fit: the time of each ``step K: objective V`` line."""

    def __init__(self, started):
        self.started, self.trace = started, []

    def write(self, text):
        for line in text.splitlines():
            words = line.split()
            if len(words) >= 4 and words[0] == "step" and words[2] == "objective":
                self.trace.append((time.perf_counter() - self.started, int(words[1].rstrip(":")), float(words[3])))
        return len(text)

    def flush(self):
        pass


def run_gpdsl(args, natural_gradient):
    sys.path.insert(0, ROOT)
    from gpdsl.api import check, run
    from gpdsl.settings import SVGPSettings

    X, y, X_test, y_test = simulate(args.n, args.n_test, args.seed)
    model = check(MODEL)[0]
    settings = SVGPSettings(num_inducing=args.num_inducing, batch_size=args.batch_size, steps=args.steps,
                            learning_rate=0.01, chunk=args.chunk, natural_gradient=natural_gradient)
    started = time.perf_counter()
    clock, stderr = ChunkClock(started), sys.stderr
    sys.stderr = clock
    try:
        results = run(model, {"N": args.n, "D": DIM, "X": X, "y": y}, "svgp", settings, seed=args.seed,
                      new_inputs=X_test, progress=True)
    finally:
        sys.stderr = stderr
    seconds = time.perf_counter() - started
    predictions = results.predictions
    return {"trace": clock.trace, "elbo": float(results.sample_stats["bound"].values.ravel()[0]),
            "lpd": heldout_lpd(predictions["f_mean"].values.ravel(), predictions["f_variance"].values.ravel(), y_test),
            "seconds": seconds}


def run_gpflow(args):
    import gpflow
    import tensorflow as tf

    X, y, X_test, y_test = simulate(args.n, args.n_test, args.seed)
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    tf.random.set_seed(args.seed)
    started = time.perf_counter()
    Z = kmeans_centres(X, args.num_inducing, args.seed)
    kernel = gpflow.kernels.SquaredExponential(variance=1.0, lengthscales=np.ones(DIM))
    model = gpflow.models.SVGP(kernel, gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid), Z, num_data=args.n,
                               whiten=True)
    X_all, Y_all = tf.constant(X), tf.constant(y[:, None].astype(float))
    try:
        import tf_keras as keras  # GPflow's variables need the Keras 2 optimisers under TensorFlow >= 2.16
    except ImportError:
        keras = tf.keras
    optimizer = keras.optimizers.Adam(learning_rate=0.01)

    @tf.function
    def step():
        rows = tf.random.uniform([args.batch_size], 0, args.n, dtype=tf.int64)
        with tf.GradientTape() as tape:
            elbo = model.elbo((tf.gather(X_all, rows), tf.gather(Y_all, rows)))
            loss = -elbo
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        return elbo

    trace, total = [], 0.0
    for done in range(1, args.steps + 1):
        total += float(step())
        if done % args.chunk == 0:
            trace.append((time.perf_counter() - started, done, total / args.chunk))
            total = 0.0
    seconds = time.perf_counter() - started
    elbo = float(model.elbo((X_all, Y_all)))
    mean, variance = model.predict_f(tf.constant(X_test))
    return {"trace": trace, "elbo": elbo, "lpd": heldout_lpd(mean.numpy().ravel(), variance.numpy().ravel(), y_test),
            "seconds": seconds}


def run_gpytorch(args):
    import gpytorch
    import torch

    torch.set_default_dtype(torch.float64)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    X, y, X_test, y_test = simulate(args.n, args.n_test, args.seed)

    class LogitBernoulli(gpytorch.likelihoods._OneDimensionalLikelihood):
        def forward(self, function_samples, *arguments, **keywords):
            return torch.distributions.Bernoulli(logits=function_samples)

    class Classifier(gpytorch.models.ApproximateGP):
        def __init__(self, Z):
            distribution = gpytorch.variational.CholeskyVariationalDistribution(Z.shape[0])
            strategy = gpytorch.variational.VariationalStrategy(self, Z, distribution, learn_inducing_locations=True)
            super().__init__(strategy)
            self.mean_module = gpytorch.means.ZeroMean()
            self.covar_module = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel(ard_num_dims=DIM))
            self.covar_module.outputscale = 1.0
            self.covar_module.base_kernel.lengthscale = torch.ones(DIM)

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))

    started = time.perf_counter()
    Z = torch.as_tensor(kmeans_centres(X, args.num_inducing, args.seed))
    model, likelihood = Classifier(Z), LogitBernoulli()
    X_all, y_all = torch.as_tensor(X), torch.as_tensor(y, dtype=torch.float64)
    elbo_of = gpytorch.mlls.VariationalELBO(likelihood, model, num_data=args.n)
    optimizer = torch.optim.Adam(list(model.parameters()) + list(likelihood.parameters()), lr=0.01)
    model.train()
    likelihood.train()
    trace, total = [], 0.0
    for step in range(1, args.steps + 1):
        rows = torch.randint(0, args.n, (args.batch_size,))
        optimizer.zero_grad()
        loss = -elbo_of(model(X_all[rows]), y_all[rows])
        loss.backward()
        optimizer.step()
        total += -loss.item() * args.n
        if step % args.chunk == 0:
            trace.append((time.perf_counter() - started, step, total / args.chunk))
            total = 0.0
    seconds = time.perf_counter() - started
    model.eval()
    with torch.no_grad():
        elbo = full_elbo_gpytorch(model, likelihood, X_all, y_all)
        latent = model(torch.as_tensor(X_test))
        mean, variance = latent.mean.numpy(), latent.variance.numpy()
    return {"trace": trace, "elbo": elbo, "lpd": heldout_lpd(mean, variance, y_test), "seconds": seconds}


def full_elbo_gpytorch(model, likelihood, X, y, block=10_000):
    """The whole data's ELBO: each block's expected log-likelihood, minus the KL once."""
    expected = 0.0
    for i in range(0, X.shape[0], block):
        latent = model(X[i:i + block])
        expected += float(likelihood.expected_log_prob(y[i:i + block], latent).sum())
    return expected - float(model.variational_strategy.kl_divergence())


def worker(args):
    if args.worker == "gpflow":
        result = run_gpflow(args)
    elif args.worker == "gpytorch":
        result = run_gpytorch(args)
    else:
        result = run_gpdsl(args, natural_gradient=args.worker == "gpdsl-natgrad")
    print("RESULT " + json.dumps(result), flush=True)


def launch(python, arguments, timeout, threads):
    """Run this script as a worker; its RESULT, or a short reason it gave none."""
    command = ["nice", "-n", "5", python, os.path.abspath(__file__), *arguments]
    environment = dict(os.environ, PYTHONPATH=ROOT)
    for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        environment[variable] = str(threads)
    environment["GPDSL_JAX_CACHE"] = "0"  # compile cold, as the peers trace; no wait on a shared cache's lock
    # its own session, so that a stopped worker takes its children (PyMC's chain processes) with it
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment,
                               start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return None, f"stopped after {timeout:.0f} s"
    for line in stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):]), None
    tail = (stderr.strip().splitlines() or ["no output"])[-1]
    return None, f"failed (exit {process.returncode}): {tail[:200]}"


def stable_time(trace, tolerance):
    """The wall time of the first chunk after which every chunk's mean stays within ``tolerance`` of the final."""
    values = np.array([value for _, _, value in trace])
    final = values[-5:].mean()
    outside = np.flatnonzero(np.abs(values - final) > tolerance)
    first = 0 if outside.size == 0 else outside[-1] + 1
    return trace[min(first, len(trace) - 1)][0], trace[min(first, len(trace) - 1)][1]


def reach_time(trace, target):
    """The wall time and step of the first chunk whose mean is at least ``target``, or None."""
    for seconds, step, value in trace:
        if value >= target:
            return seconds, step
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--n-test", type=int, default=10_000)
    parser.add_argument("--num-inducing", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument("--steps", type=int, default=6000)
    parser.add_argument("--chunk", type=int, default=100, help="steps per recorded ELBO mean")
    parser.add_argument("--tolerance", type=float, default=0.005, help="nats a point of a stable ELBO")
    parser.add_argument("--workers", nargs="+", default=list(WORKERS), choices=WORKERS)
    parser.add_argument("--budget", type=float, default=900.0, help="seconds a worker may run")
    parser.add_argument("--gpflow-python", default="/tmp/bench-gpflow/bin/python")
    parser.add_argument("--gpytorch-python", default="/tmp/bench-torch/bin/python")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="threads of each library's linear algebra (gpdsl's "
                        "XLA runs single-threaded Eigen whatever this says)")
    parser.add_argument("--worker", choices=WORKERS, help=argparse.SUPPRESS)
    parser.add_argument("--trace-out", help="write every worker's ELBO trace here (JSON)")
    args = parser.parse_args()
    if args.worker:
        return worker(args)

    pythons = {"gpdsl": sys.executable, "gpdsl-natgrad": sys.executable, "gpflow": args.gpflow_python,
               "gpytorch": args.gpytorch_python}
    tolerance = args.tolerance * args.n
    print(f"N = {args.n}, D = {DIM}, held-out {args.n_test}; M = {args.num_inducing}, B = {args.batch_size}, "
          f"{args.steps} Adam steps at 0.01, ELBO mean every {args.chunk} steps; stable within "
          f"{args.tolerance:g} nats/point; {args.threads} thread(s) each", flush=True)
    results = {}
    for name in args.workers:
        if not os.path.exists(pythons[name]):
            print(f"{name}: no interpreter at {pythons[name]!r}; skipped", flush=True)
            continue
        arguments = ["--worker", name, "--n", str(args.n), "--n-test", str(args.n_test), "--num-inducing",
                     str(args.num_inducing), "--batch-size", str(args.batch_size), "--steps", str(args.steps),
                     "--chunk", str(args.chunk), "--seed", str(args.seed), "--threads", str(args.threads)]
        result, why = launch(pythons[name], arguments, args.budget, args.threads)
        if result is None:
            print(f"{name}: {why}", flush=True)
            continue
        results[name] = result
        print(f"{name}: done in {result['seconds']:.0f} s", flush=True)
    if args.trace_out:
        with open(args.trace_out, "w") as handle:
            json.dump(results, handle)

    print(f"\n{'library':<15}{'fit s':>8}{'s/step':>9}{'stable at s (step)':>20}{'final ELBO':>13}{'/point':>9}"
          f"{'held-out lpd':>14}")
    for name, result in results.items():
        seconds, step = stable_time(result["trace"], tolerance)
        print(f"{name:<15}{result['seconds']:>8.1f}{result['seconds'] / args.steps * 1e3:>7.2f}ms"
              f"{f'{seconds:.1f} ({step})':>20}{result['elbo']:>13.1f}{result['elbo'] / args.n:>9.4f}"
              f"{result['lpd']:>14.4f}")
    print("\ngpdsl's time to reach the peer's final ELBO (less the tolerance) over the peer's time to its stable ELBO "
          "(target: at most 0.5)")
    for ours in ("gpdsl", "gpdsl-natgrad"):
        for peer in ("gpflow", "gpytorch"):
            if ours not in results or peer not in results:
                continue
            theirs, _ = stable_time(results[peer]["trace"], tolerance)
            reached = reach_time(results[ours]["trace"], results[peer]["elbo"] - tolerance)
            cell = "never reached" if reached is None else \
                f"{reached[0]:.1f} s (step {reached[1]}) / {theirs:.1f} s = {reached[0] / theirs:.2f}"
            print(f"{ours:<15}vs {peer:<10}{cell}")


if __name__ == "__main__":
    main()
