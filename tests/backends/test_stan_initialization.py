"""Tests for reading an initialization failure out of Stan's console text (CmdStan's files, PyStan's error).

No Stan runs here: the consoles are CmdStan 2.35's and PyStan 3.10's output for the program of
``test_stan_runners`` with ``sigma = 0`` (every start rejected) and with ``init={"mu": 0, "tau": -1}``.
"""

import numpy as np

from gpdsl.backends.stan.initialization import (
    format_init,
    initialization_failure,
    rejection_reasons,
)

CONFIG = """method = sample (Default)
  sample
    num_samples = 50
    num_warmup = 50
output
  file = model-1.csv
  sig_figs = 18
num_threads = 1 (Default)

"""
REJECTED_SCALE = """Rejecting initial value:
  Error evaluating the log probability at the initial value.
Exception: normal_lpdf: Scale parameter is 0, but must be positive! (in 'model.stan', line 21, column 2 to column 39)
"""
GAVE_UP = """
Initialization between (-2, 2) failed after 100 attempts. 
 Try specifying initial values, reducing ranges of constrained values, or reparameterizing the model.
Initialization failed.
"""
CMDSTAN_CHAIN = CONFIG + REJECTED_SCALE * 100 + GAVE_UP
PYSTAN_ERROR = (
    "PyStan failed (sample): Initialization between (-2, 2) failed after 100 attempts. Try specifying initial "
    "values, reducing ranges of constrained values, or reparameterizing the model. Initialization failed. "
    "Rejecting initial value: Error evaluating the log probability at the initial value. Exception: "
    "normal_lpdf: Scale parameter is 0, but must be positive! (in '/tmp/httpstan_t91rb82i/model_tz7geubs.stan', "
    "line 21, column 2 to column 39) Rejecting initial value:"
)
EXPECTED = (
    "Initialization failed: Stan rejected every initial value it tried (100 drawn uniformly from (-2, 2) on the "
    "unconstrained scale):\n"
    "  normal_lpdf: Scale parameter is 0, but must be positive! (line 21, column 2 to column 39 of the Stan program)"
)
CMDSTAN_BAD_INIT = CONFIG + """Rejecting initial value:
  Error evaluating the log probability at the initial value.
Exception: lb_free: Lower bounded variable is -1, but must be greater than or equal to 0.000000 (in 'model.stan', line 8, column 2 to column 20)

Initialization between (-2, 2) failed after 1 attempts. 
 Try specifying initial values, reducing ranges of constrained values, or reparameterizing the model.
Initialization failed.
"""


def test_cmdstans_hundred_rejections_per_chain_become_one_reason_in_two_lines():
    error = initialization_failure(CMDSTAN_CHAIN + "\n" + CMDSTAN_CHAIN)
    assert error.message == EXPECTED
    assert "check the data" in error.hint
    assert len(error.render()) < 500


def test_pystan_and_cmdstan_report_the_same_failure_alike():
    assert initialization_failure(PYSTAN_ERROR).message == initialization_failure(CMDSTAN_CHAIN).message


def test_given_initial_values_are_shown_with_the_reason():
    error = initialization_failure(CMDSTAN_BAD_INIT, init={"mu": 0.0, "tau": -1.0})
    assert error.message.splitlines() == [
        "Initialization failed: Stan rejected the initial values given (mu=0, tau=-1):",
        ("  lb_free: Lower bounded variable is -1, but must be greater than or equal to 0.000000 "
         "(line 8, column 2 to column 20 of the Stan program)"),
    ]
    assert "declared bounds" in error.hint


def test_distinct_reasons_are_kept_most_frequent_first_and_capped():
    log_zero = ("Rejecting initial value:\n  Log probability evaluates to log(0), i.e. negative infinity.\n"
                "  Stan can't start sampling from this initial value.\n")
    gradient = ("Rejecting initial value:\n  Gradient evaluated at the initial value is not finite.\n"
                "  Stan can't start sampling from this initial value.\n")
    other = "Rejecting initial value:\n  Error evaluating the log probability at the initial value.\nException: {}\n"
    console = log_zero * 3 + gradient * 5 + REJECTED_SCALE + other.format("a") + other.format("b") + GAVE_UP
    assert rejection_reasons(console)[:2] == [
        "Gradient evaluated at the initial value is not finite.",
        "Log probability evaluates to log(0), i.e. negative infinity.",
    ]
    lines = initialization_failure(console).message.splitlines()
    assert len(lines) == 5 and lines[-1] == "  and 2 other reasons"


def test_a_failure_without_rejections_still_says_initialization_failed():
    error = initialization_failure("PyStan failed (sample): Initialization failed.")
    assert error.message == "Initialization failed: Stan rejected every initial value it tried; Stan gave no reason"


def test_an_unrecoverable_error_at_the_initial_value_gives_its_reason():
    console = CONFIG + ("Unrecoverable error evaluating the log probability at the initial value.\n"
                        "Exception: matrix[multi] assign: accessing element out of range. (in 'model.stan', line 3, "
                        "column 2 to column 12)\n")
    assert initialization_failure(console).message.endswith(
        "  matrix[multi] assign: accessing element out of range. (line 3, column 2 to column 12 of the Stan program)")


def test_other_failures_are_not_taken_for_initialization_failures():
    assert initialization_failure(CONFIG + "Exception: variable does not exist; processing stage=data") is None
    started = CONFIG + REJECTED_SCALE * 2 + "Gradient evaluation took 1.2e-05 seconds\nIteration: 1 / 100"
    assert initialization_failure(started) is None


def test_initial_values_are_formatted_on_one_short_line():
    assert format_init({"mu": 0.5, "n": 3, "v": np.arange(10.0)}) == "mu=0.5, n=3, v=[0., 1., ..., 8., 9.]"
    assert format_init([{"mu": 1.0}, {"mu": 1.0}]) == "mu=1"
    assert format_init([{"mu": 1.0}, {"mu": 2.0}]) == "chain 1: mu=1; chain 2: mu=2"
    assert len(format_init({f"x{i}": float(i) for i in range(100)})) <= 240
