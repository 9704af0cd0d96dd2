"""The numbers printed in the paper this case study reproduces (only shown beside ours, labelled).

de Souza (2020), Ch. 3, Sec. 3.4.2.1, Table 3: free simulation of AirPassengers (NLPD in nats per value,
RMSE in thousands of passengers, both on the 84 test months 1954-01 to 1960-12 in original units; the
Monte Carlo rows are mean ± sd over 10 runs).

Keys are ``(method, samples, kernel)``; values ``(nlpd, nlpd_sd, rmse, rmse_sd)`` with ``None`` for no sd.
"""

RBF_LINEAR = "RBF+Linear"
PERIODIC = "Per.+RBF+Lin."

TABLE3 = {
    ("GP-NARX", None, RBF_LINEAR): (11.37, None, 69.40, None),
    ("GP-NARX", None, PERIODIC): (7.46, None, 44.98, None),
    ("Analytic", None, RBF_LINEAR): (7.08, None, 68.93, None),
    ("GH", 4096, RBF_LINEAR): (7.07, None, 68.88, None),
    ("GH", 4096, PERIODIC): (5.20, None, 45.00, None),
    ("UT", 24, RBF_LINEAR): (7.10, None, 69.11, None),
    ("UT", 24, PERIODIC): (5.26, None, 45.27, None),
    ("MC", 24, RBF_LINEAR): (7.52, 0.41, 71.16, 3.15),
    ("MC", 24, PERIODIC): (5.41, 0.17, 46.99, 3.04),
    ("MC", 200, RBF_LINEAR): (7.09, 0.20, 68.82, 2.09),
    ("MC", 200, PERIODIC): (5.19, 0.06, 45.19, 1.32),
    ("MC", 4096, RBF_LINEAR): (7.07, 0.03, 68.81, 0.37),
    ("MC", 4096, PERIODIC): (5.19, 0.01, 45.29, 0.28),
}
