"""MalformedRecords (treedist.registry.malformed): what a flood of bad `_schemas` records
leaves in memory and in the log is bounded, whatever their number."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from treedist.registry.malformed import MalformedRecords


@given(keep=st.integers(1, 50), count=st.integers(0, 2_000))
def test_the_last_keep_are_kept_every_one_counted_and_the_log_is_bounded(keep, count):
    malformed = MalformedRecords(keep)
    logged = [i for i in range(count) if malformed.add(f"offset {i}")]

    assert malformed.total == count
    assert list(malformed.last) == [f"offset {i}" for i in range(max(0, count - keep), count)]
    assert malformed.recent(10) == list(malformed.last)[-10:]
    # each of the first `keep`, then one per `keep`
    assert logged == [i for i in range(count) if i < keep or (i + 1) % keep == 0]
    assert len(logged) <= keep + count // keep


def test_keep_must_be_positive():
    with pytest.raises(ValueError, match="keep must be at least 1, not 0"):
        MalformedRecords(0)
