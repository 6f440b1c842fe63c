"""The per-partition figures of the copies (pure): what a task gathers in the copy loop, what
its confirm step counts into fixed buckets, and how the accumulator merges tasks.

Named invariants:
- per (level, target, topic, partition): records and bytes are the copies' own; every copy
  with a timestamp lands in exactly one latency bucket and one age bucket, the one whose upper
  bound is the first >= its span (le), and the sums are the spans' sums (ms);
- latency is measured to the confirmation time, age to the time the run was handed over;
- a record without a timestamp counts in records and bytes only; a timestamp ahead of the
  clock counts as a span of 0;
- merging is a key-wise element sum, the same whatever the order of the tasks;
- the copier feeds it: its counts per level equal the figures' records, and `confirm()`
  puts them in the stats' vector, which the accumulator's parameter merges.
"""

from __future__ import annotations

import bisect

from confluent_kafka import Message
from hypothesis import given
from hypothesis import strategies as st

from treedist.records.copier import LevelCopy, RecordCopier
from treedist.records.counters import VectorParam
from treedist.records.positions import LevelRange, PartitionWindow
from treedist.records.timings import (AGE, AGE_SUM, BUCKETS_S, BYTES, LATENCY, LATENCY_SUM, NBUCKETS, RECORDS, WIDTH,
                                      TaskTimings, merge)
from treedist.topology.flags import MalformedFlagsPolicy

EDGES_MS = [round(b * 1000) for b in BUCKETS_S]


def bucket(span_ms: int) -> int:
    return bisect.bisect_left(EDGES_MS, max(span_ms, 0))


def test_spans_land_in_their_le_bucket_and_sums_add_up():
    t = TaskTimings(["c2", "c3"])
    # run handed over at 10_000 ms; confirmed at 10_400 ms
    t.add_run(0, "orders", 1, [9_995, 9_990, 9_900, 10_000], nbytes=40, at_ms=10_000)
    t.add_run(1, "orders", 1, [9_995], nbytes=10, at_ms=10_000)
    t.add_run(0, "orders", 1, [10_300], nbytes=7, at_ms=10_350)  # a later run of the same partition
    fig = t.figures(confirmed_ms=10_400)
    assert set(fig) == {(0, "c2", "orders", 1), (1, "c3", "orders", 1)}
    row = fig[0, "c2", "orders", 1]
    assert len(row) == WIDTH
    assert (row[RECORDS], row[BYTES]) == (5, 47)
    ages = [5, 10, 100, 0, 50]
    latencies = [405, 410, 500, 400, 100]
    assert row[AGE_SUM] == sum(ages) and row[LATENCY_SUM] == sum(latencies)
    assert row[AGE:AGE + NBUCKETS] == _counts(ages)
    assert row[LATENCY:LATENCY + NBUCKETS] == _counts(latencies)
    # le semantics: 5 ms is in the first bucket (le 0.005), 10 ms in the second, 500 ms in le 0.5
    assert _counts([5])[0] == 1 and _counts([10])[1] == 1 and _counts([500])[BUCKETS_S.index(0.5)] == 1
    other = fig[1, "c3", "orders", 1]
    assert (other[RECORDS], other[BYTES], other[LATENCY_SUM], other[AGE_SUM]) == (1, 10, 405, 5)


def test_unstamped_records_count_and_future_ones_are_zero_spans():
    t = TaskTimings(["c2"])
    t.add_run(0, "t", 0, [0, 0, 20_000, 5_000], nbytes=4, at_ms=10_000)  # 0: no timestamp; 20_000: ahead of the clock
    row = t.figures(confirmed_ms=10_100)[0, "c2", "t", 0]
    assert row[RECORDS] == 4 and row[BYTES] == 4
    assert sum(row[LATENCY:LATENCY + NBUCKETS]) == 2 and sum(row[AGE:AGE + NBUCKETS]) == 2
    assert row[LATENCY] == 1 and row[AGE] == 1  # the future one: span 0, first bucket
    assert row[LATENCY_SUM] == 5_100 and row[AGE_SUM] == 5_000
    assert row[LATENCY + NBUCKETS - 1] == 0  # nothing in +Inf: the unstamped ones are left out


def test_an_empty_task_has_no_figures():
    assert TaskTimings(["c2"]).figures(1) == {}


@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 2), st.lists(st.integers(1, 7_200_000), min_size=1,
                                                                           max_size=30), st.integers(0, 5_000_000)),
                max_size=12),
       st.integers(0, 10_000_000))
def test_figures_equal_a_record_by_record_count(runs, confirmed_offset):
    now = 1_700_000_000_000
    t = TaskTimings(["c2", "c3"])
    expected: dict = {}
    for level, partition, ages, at_offset in runs:
        at = now + at_offset
        stamps = [at - a for a in ages]
        t.add_run(level, "t", partition, stamps, nbytes=len(stamps) * 3, at_ms=at)
        row = expected.setdefault((level, ["c2", "c3"][level], "t", partition), [0] * WIDTH)
        row[RECORDS] += len(stamps)
        row[BYTES] += len(stamps) * 3
        for s in stamps:
            lat, age = max(now + confirmed_offset - s, 0), max(at - s, 0)
            row[LATENCY + bucket(lat)] += 1
            row[LATENCY_SUM] += lat
            row[AGE + bucket(age)] += 1
            row[AGE_SUM] += age
    assert t.figures(now + confirmed_offset) == expected


@given(st.lists(st.dictionaries(st.sampled_from([(0, "c2", "t", 0), (0, "c2", "t", 1), (1, "c3", "t", 0)]),
                                st.lists(st.integers(0, 100), min_size=WIDTH, max_size=WIDTH)), max_size=5))
def test_merge_is_a_keywise_sum_in_any_order(tasks):
    forward, backward = {}, {}
    for task in tasks:
        merge(forward, task)
    for task in reversed(tasks):
        merge(backward, task)
    assert forward == backward
    keys = {k for task in tasks for k in task}
    assert forward == {k: [sum(task[k][i] for task in tasks if k in task) for i in range(WIDTH)] for k in keys}


def test_the_copier_feeds_the_figures_and_the_accumulator_merges_them():
    produced = []
    levels = [LevelCopy(1, 1, 1, lambda *a: produced.append(a), None, target="c2"),
              LevelCopy(3, 7, 4, lambda *a: produced.append(a), None, target="c3")]
    copier = RecordCopier("c1", levels, "fh", "oh", MalformedFlagsPolicy.COPY, 1_000_000)
    records = [Message(topic="t", partition=2, offset=o, key=b"k", value=b"vv", headers=None, timestamp=(1, 1_000 + o))
               for o in range(5)]
    window = PartitionWindow("t", 2, 0, 5, (LevelRange(1, 0, 5), LevelRange(3, 0, 5)))
    copier.copy(window, "t", 2, records[:3])
    copier.copy(PartitionWindow("t", 2, 3, 5, (LevelRange(1, 3, 5), LevelRange(3, 3, 5))), "t", 2, records[3:])
    copier.confirm(at=2.0)
    vector = copier.stats.vector()
    figures = vector[-1]
    assert set(figures) == {(0, "c2", "t", 2), (1, "c3", "t", 2)}
    for i, s in enumerate(copier.stats.levels):
        row = figures[i, ["c2", "c3"][i], "t", 2]
        assert (row[RECORDS], row[BYTES]) == (s.copied, s.bytes) == (5, 15)
        assert row[LATENCY_SUM] == sum(2_000 - (1_000 + o) for o in range(5))
    param = VectorParam()
    total = param.zero(vector)
    assert total[-1] == {} and total[:-1] == [0] * (len(vector) - 1)
    param.addInPlace(total, vector)
    param.addInPlace(total, copier.stats.vector())
    assert total[:-1] == [2 * v for v in vector[:-1]]
    assert total[-1][0, "c2", "t", 2][RECORDS] == 10


def _counts(spans: list[int]) -> list[int]:
    out = [0] * NBUCKETS
    for s in spans:
        out[bucket(s)] += 1
    return out
