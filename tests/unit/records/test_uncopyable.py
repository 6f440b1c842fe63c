"""The pure parts of `distributor.on_uncopyable`: the size limit, the dead-letter headers, the
copier's three policies per level (real confluent-kafka Message objects in, the produce calls
recorded), the counters' layout and the status line a `fail` leaves.

Named invariants:
- the limit is max_record_bytes when set, else min(topic max.message.bytes, producer
  message.max.bytes) - HEADROOM, never below 1;
- a record over a level's limit is never produced to that level's topic: it raises (fail),
  is counted (skip) or goes to the dead-letter topic with its own headers then the origin
  headers (dead_letter); the other levels and records are copied as before.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Message
from hypothesis import given
from hypothesis import strategies as st

from treedist.records.copier import LevelCopy, RecordCopier, TaskStats, LevelStats
from treedist.records.errors import OversizedRecord
from treedist.records.positions import LevelRange, PartitionWindow
from treedist.driver.link_state import error_summary
from treedist.records.uncopyable import (
    HEADER_PREFIX, HEADROOM, KAFKA_DEFAULT_MAX_MESSAGE_BYTES, LIBRDKAFKA_DEFAULT_MESSAGE_MAX_BYTES,
    dead_letter_headers, oversize_reason, record_limit,
)
from treedist.topology.flags import MalformedFlagsPolicy

FH, OH = "treedist-copy-flags", "treedist-origin"


class Recorder:
    """Collects produce calls (confluent-kafka's positional layout)."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def produce(self, topic, value, key, partition, on_delivery, callback, timestamp, headers):
        self.calls.append((topic, value, key, partition, timestamp, headers))

    def on_full(self, *row):
        raise AssertionError("queue never full here")


def _copier(policy: str, limits: tuple[int, int], recorders: tuple[Recorder, Recorder]) -> RecordCopier:
    """Two levels (masks 1 and 2) to targets c2 and c3 with their own limits for topic t."""
    levels = [
        LevelCopy(1, 1, 1, recorders[0].produce, recorders[0].on_full, limits={"t": limits[0]}, target="c2"),
        LevelCopy(2, 2, 2, recorders[1].produce, recorders[1].on_full, limits={"t": limits[1]}, target="c3"),
    ]
    return RecordCopier("c1", levels, FH, OH, MalformedFlagsPolicy.COPY, 1_000_000, policy, "dl", explicit_limit=False)


def _window(lo: int, hi: int) -> PartitionWindow:
    return PartitionWindow("t", 0, lo, hi, (LevelRange(1, lo, hi), LevelRange(2, lo, hi)))


def _records(sizes: list[int]) -> list[Message]:
    return [Message(topic="t", partition=0, offset=i, key=None, value=b"x" * n, headers=[("app", b"a")],
                    timestamp=(1, 1_700_000_000_000)) for i, n in enumerate(sizes)]


def test_the_limit_is_the_explicit_setting_else_the_smaller_of_topic_and_producer_less_headroom():
    assert record_limit(5_000, 1, {}) == 5_000
    assert record_limit(None, None, {}) == min(KAFKA_DEFAULT_MAX_MESSAGE_BYTES, LIBRDKAFKA_DEFAULT_MESSAGE_MAX_BYTES) - HEADROOM
    assert record_limit(None, 20_000, {}) == 20_000 - HEADROOM
    assert record_limit(None, 8_000_000, {"message.max.bytes": "4000000"}) == 4_000_000 - HEADROOM
    assert record_limit(None, 10, {}) == 1


@given(st.one_of(st.none(), st.integers(1, 10**9)), st.one_of(st.none(), st.integers(0, 10**9)),
       st.integers(1, 10**9))
def test_the_limit_is_positive_and_never_above_what_the_target_takes(explicit, topic_max, producer_max):
    limit = record_limit(explicit, topic_max, {"message.max.bytes": str(producer_max)})
    assert limit >= 1
    if explicit is None:
        assert limit <= max(1, min(producer_max, topic_max if topic_max is not None else KAFKA_DEFAULT_MAX_MESSAGE_BYTES))


def test_dead_letter_headers_name_origin_distributor_and_reason():
    reason = oversize_reason(30, 20, explicit=True)
    assert reason == "30 bytes of key and value, over distributor.max_record_bytes (20 bytes)"
    assert dead_letter_headers("c1", "orders", 3, 41, 2, "c4", reason) == [
        (HEADER_PREFIX + "cluster", b"c1"), (HEADER_PREFIX + "topic", b"orders"), (HEADER_PREFIX + "partition", b"3"),
        (HEADER_PREFIX + "offset", b"41"), (HEADER_PREFIX + "level", b"2"), (HEADER_PREFIX + "target", b"c4"),
        (HEADER_PREFIX + "reason", reason.encode()),
    ]


def test_fail_names_the_record_level_and_target():
    copier = _copier("fail", (100, 10), (Recorder(), Recorder()))
    with pytest.raises(OversizedRecord, match=r"cluster 'c1' topic 't' partition 0 offset 1 is 50 bytes, not copyable "
                                              r"to level 2 target 'c3': 50 bytes of key and value, over the target "
                                              r"topic's size limit \(10 bytes\)"):
        copier.copy(_window(0, 3), "t", 0, _records([5, 50, 5]))


def test_skip_leaves_out_only_the_level_whose_limit_the_record_exceeds_and_counts_it():
    low, high = Recorder(), Recorder()
    copier = _copier("skip", (100, 10), (low, high))
    copier.copy(_window(0, 3), "t", 0, _records([5, 50, 5]))
    assert [c[1] for c in low.calls] == [b"x" * 5, b"x" * 50, b"x" * 5]  # level 1's target takes it
    assert [c[1] for c in high.calls] == [b"x" * 5, b"x" * 5]
    assert [(s.copied, s.uncopyable_skipped, s.dead_lettered) for s in copier.stats.levels] == [(3, 0, 0), (2, 1, 0)]


def test_dead_letter_produces_the_record_as_read_to_the_level_target_with_origin_headers():
    low, high = Recorder(), Recorder()
    copier = _copier("dead_letter", (100, 10), (low, high))
    copier.copy(_window(0, 3), "t", 0, _records([5, 50, 5]))
    assert [c[0] for c in high.calls] == ["t", "dl", "t"]
    topic, value, key, partition, ts, headers = high.calls[1]
    assert (value, key, partition, ts) == (b"x" * 50, None, -1, 1_700_000_000_000)
    assert headers[0] == ("app", b"a") and FH not in dict(headers) and OH not in dict(headers)
    assert headers[1:] == dead_letter_headers("c1", "t", 0, 1, 2, "c3", oversize_reason(50, 10, explicit=False))
    assert [(s.copied, s.uncopyable_skipped, s.dead_lettered) for s in copier.stats.levels] == [(3, 0, 0), (2, 0, 1)]


def test_the_counter_vector_ends_with_skipped_then_dead_lettered_per_level_then_the_partition_figures():
    stats = TaskStats(records_in=9, levels=[LevelStats(1, 2, 3, 4, 5), LevelStats(6, 7, 8, 9, 10)])
    assert stats.vector() == [9, 1, 6, 2, 7, 3, 8, 4, 9, 5, 10, {}]


def test_a_failed_query_status_line_is_the_record_that_stopped_it():
    line = ("treedist.records.errors.OversizedRecord: record at cluster 'c1' topic 't' partition 0 offset 1 is 50 "
            "bytes, not copyable to level 2 target 'c3': 50 bytes of key and value, over the target topic's size "
            "limit (10 bytes) (distributor.on_uncopyable 'fail')")
    wrapped = ("org.apache.spark.SparkException: An exception was thrown from the Python worker: Traceback (most "
               "recent call last):\n  File \"task.py\", line 1, in run\n" + line + "\n\tat org.apache.spark.x(y)")
    assert error_summary(wrapped) == line
