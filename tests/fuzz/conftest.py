"""tests/fuzz: every test here is marked `fuzz`, gets a hang guard (pytest-timeout), and the
session ends with how many inputs each target ran (printed, and in <basetemp>/fuzz-counts.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fuzz.budget import COUNTS

HERE = Path(__file__).parent
HANG_S = 300  # per test: far above its budget; a parser that loops forever fails here, not at the suite's 900 s


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.fuzz)
            # thread: a hang dumps every stack and ends the run; a signal would only fail the
            # current example, and hypothesis would then hang again shrinking it
            item.add_marker(pytest.mark.timeout(HANG_S, method="thread"))


@pytest.fixture(scope="session", autouse=True)
def fuzz_counts_file(tmp_path_factory):
    """Write the counts once the session's fuzz tests are done."""
    yield
    path = tmp_path_factory.getbasetemp() / "fuzz-counts.json"
    path.write_text(json.dumps({t: dict(c) for t, c in sorted(COUNTS.items())}, indent=2) + "\n")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not COUNTS:
        return
    terminalreporter.section("fuzz inputs per target")
    for target, outcomes in sorted(COUNTS.items()):
        detail = ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))
        terminalreporter.write_line(f"{target}: {sum(outcomes.values())} inputs ({detail})")
