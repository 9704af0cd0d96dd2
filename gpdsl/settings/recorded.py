"""A method's settings rebuilt from the ``settings`` attribute of its results file."""

from __future__ import annotations

import dataclasses

from gpdsl.errors import GpdslError


def recorded_settings(settings_class, results):
    """The settings a results file records, as ``settings_class``, checked as on creation.

    Parameters
    ----------
    settings_class : type
        The method's settings dataclass.
    results : arviz.InferenceData or xarray.DataTree
        Results of that method (read by :func:`gpdsl.results.io.read_netcdf`).

    Returns
    -------
    dataclass
        An instance of ``settings_class``.

    Raises
    ------
    GpdslError
        ``attribute settings is malformed (...)``: a key that is no setting of the class, or a value its checks
        refuse; the caller names the file.
    """
    from gpdsl.results.method_output import results_json

    record = results_json(results, "settings")
    names = {f.name for f in dataclasses.fields(settings_class)}
    unknown = sorted(set(record) - names)
    if unknown:
        raise GpdslError(f"attribute settings is malformed (unknown key {unknown[0]!r})")
    try:
        return settings_class(**record)
    except GpdslError as error:
        raise GpdslError(f"attribute settings is malformed ({error.message})") from None
    except (TypeError, ValueError) as error:
        raise GpdslError(f"attribute settings is malformed ({error})") from None
