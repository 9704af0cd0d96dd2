"""The numbers printed in the papers this case study reproduces (only shown beside ours, labelled).

* de Souza (2020), PhD thesis, Ch. 3 (Unscented GPLVM), Tables 1 and 2: 5-fold cross-validated 1-NN
  accuracy (%) on the two most relevant latent dimensions, mean +- sd.
* Damianou, Titsias & Lawrence (2016), JMLR, Sec. 5.2: number of 1-NN errors of the oil-flow
  embedding (Fig. 6).

Keys are ``(method, samples, kernel)`` with ``samples`` ``None`` where the paper has none.
"""

TABLE1 = {  # oil flow
    ("PCA", None, None): "79.0 ± 6.5",
    ("Analytic", None, "RBF"): "98.0 ± 2.7",
    ("Gauss-Hermite", 32, "Matern 3/2"): "95.0 ± 6.1",
    ("Gauss-Hermite", 32, "RBF"): "98.0 ± 2.7",
    ("Unscented", 10, "Matern 3/2"): "100.0 ± 0.0",
    ("Unscented", 10, "RBF"): "98.0 ± 2.7",
    ("Monte Carlo", 10, "Matern 3/2"): "85.6 ± 8.7",
    ("Monte Carlo", 10, "RBF"): "98.2 ± 2.4",
    ("Monte Carlo", 32, "Matern 3/2"): "87.9 ± 5.4",
    ("Monte Carlo", 32, "RBF"): "98.0 ± 2.5",
    ("Monte Carlo", 200, "Matern 3/2"): "95.4 ± 3.0",
    ("Monte Carlo", 200, "RBF"): "97.0 ± 4.0",
}

TABLE2 = {  # USPS, 500 digits per class
    ("PCA", None, None): "35.5 ± 1.4",
    ("Analytic", None, "RBF"): "36.0 ± 1.0",
    ("Gauss-Hermite", 4, "MLP"): "68.8 ± 0.9",
    ("Gauss-Hermite", 32, "RBF"): "36.7 ± 0.6",
    ("Unscented", 4, "MLP"): "69.0 ± 1.9",
    ("Unscented", 10, "RBF"): "39.0 ± 1.2",
    ("Monte Carlo", 4, "MLP"): "47.9 ± 1.8",
    ("Monte Carlo", 10, "RBF"): "26.6 ± 1.4",
    ("Monte Carlo", 32, "RBF"): "27.0 ± 1.4",
    ("Monte Carlo", 200, "MLP"): "54.3 ± 1.7",
    ("Monte Carlo", 200, "RBF"): "29.5 ± 1.5",
}

DAMIANOU_NN_ERRORS = {  # oil flow, 1000 points, 2-D projection (Sec. 5.2)
    "variational GP-LVM (q = 10, ARD)": 1,
    "standard sparse GP-LVM (q = 2)": 26,
    "full GP-LVM, ARD kernel (q = 2)": 8,
    "full GP-LVM, EQ kernel (q = 2)": 2,
}
