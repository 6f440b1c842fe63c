"""The suite's lanes (tests/conftest.py): every test module that makes network namespaces (a
multi-host bed or a WAN link) is in the one lane they share, and the others each take a lane
of their own module."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import NETNS_MODULES, lane_scope

ROOT = Path(__file__).resolve().parents[2]
MAKES_NAMESPACES = re.compile(r"\bNetBed\(|\bWanLink\(|def test_\w+\([^)]*\bnetbed\b")


def test_every_module_that_makes_namespaces_shares_the_netns_lane():
    makers = {str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py")
              if MAKES_NAMESPACES.search(p.read_text())}
    assert "tests/e2e/test_multihost.py" in makers  # the pattern still finds the bed's users
    assert makers == set(NETNS_MODULES)


def test_other_tests_take_their_module_whole():
    assert lane_scope("tests/e2e/test_faults.py::test_a[x-1]") == "tests/e2e/test_faults.py"
    assert lane_scope("tests/e2e/test_multihost.py::test_b") == lane_scope("tests/integration/local/test_wanlink.py::t") == "netns"
