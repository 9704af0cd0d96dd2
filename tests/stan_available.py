"""The mark for tests that need PyStan to build models: they skip, with the reason, where it cannot."""

import pytest

from gpdsl.backends.stan.pystan_support import pystan_unavailable

PYSTAN_UNAVAILABLE = pystan_unavailable()
needs_pystan = pytest.mark.skipif(PYSTAN_UNAVAILABLE is not None, reason=PYSTAN_UNAVAILABLE or "")
