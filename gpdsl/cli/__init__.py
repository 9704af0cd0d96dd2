"""The ``gpdsl`` command line (a thin layer over :mod:`gpdsl.api` and the registry).

:mod:`~gpdsl.cli.main`
    The commands, :func:`main` and the exit statuses.
:mod:`~gpdsl.cli.options`
    The ``sample`` and ``fit`` flags, generated from the method registry.
:mod:`~gpdsl.cli.run_file`
    Run files (``gpdsl run RUN.toml``).
:mod:`~gpdsl.cli.tools`
    Commands of one method (``gpdsl pm-variance``).
"""

from gpdsl.cli.main import (EXIT_INTERNAL_ERROR, EXIT_NOT_CONVERGED, EXIT_OK, EXIT_STATUS, EXIT_USER_ERROR,
                            build_parser, main)

__all__ = ["EXIT_INTERNAL_ERROR", "EXIT_NOT_CONVERGED", "EXIT_OK", "EXIT_STATUS", "EXIT_USER_ERROR", "build_parser",
           "main"]
