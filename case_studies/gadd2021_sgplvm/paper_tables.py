"""The numbers Gadd, Wade & Shah (2021) report for the experiments of this case study.

Transcribed from the spec sheet (``../shared/specs/sgplvm.md``, sec. 3.1), which reads them from the paper's
Table 2 (data-generating frequencies) and Table 3 (mean absolute error of eq. 12, per output y1..y6).
"""

FREQUENCIES = {
    1: (1.0, 1.0, 1.0, 1.0, 1.0, 1.0),
    2: (1.03, 0.92, 1.11, 0.99, 0.87, 1.02),
    3: (1.04, 0.88, 1.15, 0.99, 0.80, 1.03),
}
"""Table 2: the periodicity factors F_1..F_6 of each sinusoid case (case 1 well specified; cases 2 and 3 drawn
from Unif(0.8, 1.2) and Unif(0.7, 1.3))."""

TABLE3 = {
    1: {"PM": (0.057, 0.052, 0.056, 0.056, 0.055, 0.056),
        "VEM": (0.070, 0.069, 0.082, 0.067, 0.087, 0.069),
        "VEM_kz6": (0.115, 0.093, 0.110, 0.106, 0.126, 0.105),
        "VEM_N60": (0.071, 0.068, 0.081, 0.069, 0.079, 0.074)},
    2: {"PM": (0.067, 0.057, 0.054, 0.057, 0.053, 0.056),
        "VEM": (0.111, 0.131, 0.168, 0.112, 0.165, 0.128),
        "VEM_kz6": (0.107, 0.097, 0.108, 0.087, 0.110, 0.098),
        "VEM_N60": (0.077, 0.080, 0.092, 0.074, 0.088, 0.075)},
    3: {"PM": (0.066, 0.057, 0.054, 0.058, 0.053, 0.056),
        "VEM": (0.181, 0.204, 0.173, 0.138, 0.164, 0.178),
        "VEM_kz6": (0.101, 0.088, 0.107, 0.082, 0.095, 0.089),
        "VEM_N60": (0.119, 0.119, 0.124, 0.101, 0.117, 0.107)},
}
"""Table 3: MAE between a noisy test sample of the truth and one predictive sample, 1000 inputs on [0, 4 pi]."""

NOISE_SD = 0.05
MAE_FLOOR = 0.05642
"""E|y* - y~*| for a perfect predictive: y* - y~* ~ N(0, 2 * 0.05^2), so 0.05 sqrt(2) sqrt(2 / pi)."""
MAE_FLOOR_SE = 0.00135
"""Monte Carlo standard error of the floor over 1000 test points: 0.05 sqrt(2) sqrt(1 - 2 / pi) / sqrt(1000)."""

RUN_SETTINGS = {"chains": 4, "iterations": 5000, "g0": 200, "burn_in": 1000, "num_importance": 1000,
                "e_step_iterations": 1000, "thin": 10}
"""Sec. 5: the pseudo-marginal sampler's settings, for both experiments."""

AIRQUALITY = {"rows": 116, "k_z": 1, "k_x": 2, "outputs": ("log(Ozone)", "Temp"), "inputs": ("day", "Month")}
"""Sec. 5.2: New York air quality (results are figures only: no numbers to compare against)."""
