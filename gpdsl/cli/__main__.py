"""``python -m gpdsl.cli``: the ``gpdsl`` command."""

import sys

from gpdsl.cli.main import main

sys.exit(main())
