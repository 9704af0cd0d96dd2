"""``slow_by_duration.txt`` names tests that exist: a renamed or removed test is taken off the list, not left behind."""

import re
from pathlib import Path

from tests.conftest import slow_by_duration

ROOT = Path(__file__).resolve().parents[1]


def test_every_listed_test_is_defined_in_its_file():
    stale = []
    for node in sorted(slow_by_duration()):
        path, *names = node.split("::")
        function = re.sub(r"\[.*\]$", "", names[-1]) if names else ""
        source = ROOT / path
        if not source.is_file() or not re.search(rf"^\s*def {re.escape(function)}\(", source.read_text(), re.M):
            stale.append(node)
    assert not stale, f"slow_by_duration.txt names tests that are not there: {stale}"
