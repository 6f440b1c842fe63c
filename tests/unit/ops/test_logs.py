"""Condensed logs: the BOUNDED invariant of treedist.ops.logs.Condenser, and the filter on a real logger."""

from __future__ import annotations

import logging
import math

from hypothesis import given
from hypothesis import strategies as st

from treedist.ops.logs import CondenseFilter, Condenser, RecentErrors


@given(st.lists(st.floats(0, 600), min_size=1, max_size=300), st.floats(1, 120))
def test_bounded(times, window):
    condenser = Condenser(window)
    passed = [t for t in sorted(times) if condenser.admit("kind", t)[0]]
    span = max(times) - min(times)
    assert len(passed) <= math.floor(span / window) + 1  # BOUNDED
    assert passed[0] == min(times)  # the first one always passes


def test_repeats_are_counted_and_reported_with_the_next_one():
    condenser = Condenser(60)
    assert condenser.admit("k", 0) == (True, 0)
    assert [condenser.admit("k", t) for t in (1, 2, 3)] == [(False, 0)] * 3
    assert condenser.admit("other", 4) == (True, 0)
    assert condenser.admit("k", 61) == (True, 3)


def test_filter_condenses_messages_that_differ_only_in_numbers():
    logger = logging.getLogger("treedist.test.condense")
    logger.propagate = False
    kept = RecentErrors()
    kept.addFilter(CondenseFilter(window_s=60))
    logger.addHandler(kept)
    try:
        for attempt in range(500):
            logger.error("connect to 127.0.0.1:%d failed after %d ms", 9000 + attempt % 3, attempt)
        logger.info("not condensed")
        logger.warning("another kind")
    finally:
        logger.removeHandler(kept)
    assert [item["message"] for item in kept()] == ["connect to 127.0.0.1:9000 failed after 0 ms", "another kind"]
