"""Which libraries importing a module loads, checked in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys


def loaded_by(modules, libraries=("jax", "jaxlib")) -> list[str]:
    """The ``libraries`` that importing ``modules`` loads, in a new Python process.

    Parameters
    ----------
    modules : iterable of str
        Dotted module names to import.
    libraries : iterable of str
        Top-level packages to look for in ``sys.modules`` afterwards.

    Returns
    -------
    list of str
        The libraries found, sorted (empty when none was loaded).
    """
    script = (f"import sys, {', '.join(modules)}; "
              f"print(','.join(sorted({{n.split('.')[0] for n in sys.modules}} & {set(libraries)!r})))")
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return [name for name in completed.stdout.strip().split(",") if name]
