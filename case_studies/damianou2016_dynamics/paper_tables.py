"""The numbers Damianou, Titsias & Lawrence (2016) report for the experiments of this case study."""

TABLE4 = {
    "var. GP-LVM": {"mae": 0.529, "mse": 0.550},
    "GP uncert (Girard et al. 2003)": {"mae": 0.700, "mse": 0.914},
    "naive autoregressive GP": {"mae": 0.799, "mse": 1.157},
}
"""Table 4: errors when extrapolating the Mackey-Glass series (normalised scale, 1110 predicted points)."""

TABLE4_NLPD = {"var. GP-LVM": 22447, "GP uncert (Girard et al. 2003)": 30013, "naive autoregressive GP": 36583}
"""Sec. 6.1.1: the negative log density of the predicted sequence divided by its length, as printed (the
magnitudes look unit-inconsistent with a normalised series; only the ordering is a target)."""
