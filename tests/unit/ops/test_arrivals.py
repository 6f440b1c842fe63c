"""Ages without reading the record (treedist.ops.arrivals).

Named invariants:
- NEVER_OLDER_THAN_TRUE: whatever the appends, refreshes and history kept, the time since
  which a record is known to be present is at or after its true append time (the age is a
  lower bound, never an invention), and at or before the first refresh that saw it;
- UNSEEN_IS_UNKNOWN: a position no refresh saw held gives no time;
- A_SHRUNK_PARTITION_FORGETS: a latest offset lower than before (a topic created again)
  drops the partition's past: nothing older than that refresh is claimed.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from treedist.kafka.watermarks import TopicPartitionKey
from treedist.ops.arrivals import Arrivals

TP = TopicPartitionKey("t", 0)


@st.composite
def histories(draw):
    """Append counts per tick, and which ticks the status refreshed at."""
    appended = draw(st.lists(st.integers(0, 20), min_size=1, max_size=60))
    refreshed = draw(st.lists(st.booleans(), min_size=len(appended), max_size=len(appended)))
    return appended, refreshed, draw(st.integers(1, 10))


@settings(max_examples=300, deadline=None)
@given(histories())
def test_a_record_is_never_claimed_older_than_it_is(history):
    appended, refreshed, keep = history
    arrivals = Arrivals(keep=keep)
    append_time: list[float] = []  # offset -> when it was appended
    first_seen: dict[int, float] = {}
    for tick, (n, refresh) in enumerate(zip(appended, refreshed)):
        append_time.extend([float(tick)] * n)
        if refresh:
            arrivals.observe({TP: len(append_time)}, float(tick) + 0.5)
            for offset in range(len(append_time)):
                first_seen.setdefault(offset, float(tick) + 0.5)
    for offset in range(len(append_time) + 3):
        since = arrivals.present_since(TP, offset)
        if offset not in first_seen:
            assert since is None  # UNSEEN_IS_UNKNOWN
        else:  # the newest refresh is always kept, so a seen record has a time
            assert since is not None and append_time[offset] <= since  # NEVER_OLDER_THAN_TRUE
            assert since >= first_seen[offset]  # dropped history only makes it younger


def test_the_bound_is_within_one_refresh_for_records_that_arrived_while_watched():
    arrivals = Arrivals()
    arrivals.observe({TP: 10}, 100.0)
    arrivals.observe({TP: 10}, 105.0)  # nothing new: no sample
    arrivals.observe({TP: 25}, 110.0)
    assert [arrivals.present_since(TP, p) for p in (0, 9, 10, 24, 25)] == [100.0, 100.0, 110.0, 110.0, None]


def test_a_partition_that_shrank_forgets_its_past():
    arrivals = Arrivals()
    arrivals.observe({TP: 50}, 100.0)
    arrivals.observe({TP: 5}, 200.0)  # A_SHRUNK_PARTITION_FORGETS
    assert arrivals.present_since(TP, 0) == 200.0
    assert arrivals.present_since(TP, 5) is None
