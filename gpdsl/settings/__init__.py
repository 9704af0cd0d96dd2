"""Method settings, from one public place: ``from gpdsl.settings import VEMSettings``.

Every method's settings class is a frozen dataclass whose fields are made with :func:`option`: the
command line's flags, ``--help``, run files and the keyword arguments of :func:`gpdsl.sample` and
:func:`gpdsl.fit` are generated from them, and every value is validated on creation, before anything
compiles or runs.

:mod:`~gpdsl.settings.fields`
    :func:`option` and the ``require_*`` checks.
:mod:`~gpdsl.settings.schedules`
    What several methods share: chains, Adam's two phases, L-BFGS's stopping rules.
:mod:`~gpdsl.settings.sampling`, :mod:`~gpdsl.settings.fitting`
    One class per method of ``gpdsl sample`` and ``gpdsl fit``.
"""

from gpdsl.settings.fields import (LARGEST_INT, SettingError, cli_fields, flag_of, initial_values_from_cli, option, require_choice,
                                   require_covariance, require_number, require_positive_int, require_type)
from gpdsl.settings.fitting import (DMGPSettings, DSDGPSettings, EPMLSettings, MLSettings, SGPRSettings,
                                    SVGPSettings, SVIGPLVMSettings, VEMSettings)
from gpdsl.settings.sampling import (GibbsSettings, MCMCEPSettings, NUTSSettings, PMGPLVMSettings,
                                     PseudoMarginalSettings, SequentialSettings)
from gpdsl.settings.schedules import AdamScheduleSettings, ChainSettings, LBFGSSettings, SegmentedChainSettings

__all__ = [
    "AdamScheduleSettings", "ChainSettings", "DMGPSettings", "DSDGPSettings", "EPMLSettings", "GibbsSettings",
    "LBFGSSettings", "MCMCEPSettings", "MLSettings", "NUTSSettings", "PMGPLVMSettings", "PseudoMarginalSettings",
    "SGPRSettings", "SVGPSettings", "SVIGPLVMSettings", "SegmentedChainSettings", "SequentialSettings", "SettingError", "VEMSettings",
    "LARGEST_INT", "cli_fields", "flag_of", "initial_values_from_cli", "option", "require_choice", "require_covariance",
    "require_number", "require_positive_int", "require_type",
]
