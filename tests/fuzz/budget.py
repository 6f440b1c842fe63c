"""The fuzz targets' budget and their input counts.

`budget(n)` is the `fuzz` hypothesis profile (tests/conftest.py) with `n` examples (times
TREEDIST_FUZZ_SCALE); `ran(target, outcome)` counts one input of a target and how it ended
(e.g. "parsed" or "rejected"). tests/fuzz/report.py prints the counts at the end of the
session and writes them to `<basetemp>/fuzz-counts.json`.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict

from hypothesis import settings

SCALE = float(os.environ.get("TREEDIST_FUZZ_SCALE", "1"))

COUNTS: dict[str, Counter] = defaultdict(Counter)


def budget(examples: int, **overrides) -> settings:
    """The fuzz profile with `examples` inputs (at least 1 after scaling)."""
    return settings(settings.get_profile("fuzz"), max_examples=max(1, int(examples * SCALE)), **overrides)


def ran(target: str, outcome: str) -> None:
    """Count one input of `target` (every call hypothesis makes, shrinking included)."""
    COUNTS[target][outcome] += 1
