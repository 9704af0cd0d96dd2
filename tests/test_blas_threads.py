"""gpdsl runs its BLAS on one thread even when NumPy's or SciPy's BLAS was loaded before it (``import arviz`` or
``import scipy.stats`` first), unless the user chose a number of threads."""

import json
import os
import subprocess
import sys

import pytest

VARIABLES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS")
PROBE = ("import scipy.stats, gpdsl, json; from threadpoolctl import threadpool_info; "
         "print(json.dumps([pool['num_threads'] for pool in threadpool_info() if pool['user_api'] == 'blas']))")


def blas_threads(**variables):
    environment = {k: v for k, v in os.environ.items() if k not in VARIABLES} | variables
    out = subprocess.run([sys.executable, "-c", PROBE], env=environment, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: every BLAS pool has one thread anyway")
def test_a_blas_loaded_before_gpdsl_is_limited_to_one_thread_and_a_users_choice_is_kept():
    assert blas_threads() and set(blas_threads()) == {1}
    assert set(blas_threads(OPENBLAS_NUM_THREADS="2")) == {2}
