"""The ``pm-gplvm`` method: exact Bayesian inference for the hyperparameters of a GPLVM (Gadd, Wade & Shah 2021).

Pseudo-marginal adaptive Metropolis-within-Gibbs (Alg. 1) on the hyperparameters ``xi`` of the supervised
GPLVM (``Z ~ gp(X, k_z); F ~ gp(Z, k_f); Y ~ normal(F, s)``), or of any GPLVM gpdsl's variational EM fits:

1. variational EM gives the approximate MAP point ``xi_ML`` and the variational parameters there;
2. each chain starts at ``xi_ML`` plus ``N(0, start_noise^2)`` on the unconstrained scale;
3. every block proposal finds an importance distribution of the latent inputs at the proposed ``xi`` alone, from a
   fixed start (never from the chain's state, which would make the estimate depend on it): by default the Laplace
   approximation of the exact ``p(Z | Y, X, xi)`` (:mod:`gpdsl.inference.mcmc.gplvm_laplace`), or, as the paper
   does, the E-step's ``q(Z)`` from the ``xi_ML`` optimum; and estimates ``p(Y | X, xi)`` without bias by
   importance sampling from it (:mod:`gpdsl.inference.mcmc.gplvm_estimate`);
4. the chain keeps its estimate until a proposal is accepted
   (:mod:`gpdsl.inference.mcmc.blocked_metropolis`).
"""

from __future__ import annotations


from gpdsl.ir.families import BAYESIAN_GPLVM, GP_PRIOR_GPLVM
from gpdsl.settings.sampling import PMGPLVMSettings

PM_GPLVM_FAMILIES = (GP_PRIOR_GPLVM, BAYESIAN_GPLVM)
"""The families pm-gplvm fits, in order of preference."""


def run_pm_gplvm(model, data, settings: PMGPLVMSettings, context):
    """Run ``pm-gplvm`` (see the module docstring); returns a :class:`~gpdsl.results.method_output.MethodOutput`."""
    from gpdsl.inference.families.gplvm import gplvm_view
    from gpdsl.inference.methods.gplvm_chains import run_pm_gplvm_chains

    return run_pm_gplvm_chains(gplvm_view(model, data, context.facts), settings, context)
