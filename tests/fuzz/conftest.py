"""tests/fuzz: every test here is marked `fuzz` and gets a hang guard (pytest-timeout); the
session ends with how many inputs each target ran (tests/fuzz/report.py: printed, and in
<basetemp>/fuzz-counts.json)."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent
HANG_S = 300  # per test: far above its budget; a parser that loops forever fails here, not at the suite's 900 s


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.fuzz)
            # thread: a hang dumps every stack and ends the run; a signal would only fail the
            # current example, and hypothesis would then hang again shrinking it
            item.add_marker(pytest.mark.timeout(HANG_S, method="thread"))
