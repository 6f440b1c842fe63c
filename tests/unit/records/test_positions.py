"""Per-level positions and batch planning of a cluster's query, pure.

Named invariants:
- no level's position ever moves back, and no level passes the broker's latest offset
  except where it already was; the one exception is a recreated topic's partition, which
  every level starts over at its new earliest offset, reading nothing of it in that batch;
- a batch reads at most the read limit, counted from the lowest position of each partition;
- every (level, offset) of the batch is in exactly one task; a partition is never split
  between tasks (copies keep their order); at most `max_tasks` tasks;
- the checkpoint form round-trips, and equal positions give equal JSON.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from treedist.records.errors import PipelineError
from treedist.records.positions import (
    BACKLOG_RECORDS_PER_TASK,
    LevelPositions,
    batch_windows,
    next_positions,
    pack_tasks,
    task_limit,
)
from treedist.kafka.read_positions import KafkaOffsets, TopicPartitionKey

TPS = [TopicPartitionKey(t, p) for t in ("a", "b") for p in range(3)]
LEVELS = [1, 3, 7]


@st.composite
def states(draw):
    """Start positions per level (some partitions unknown to some levels) and latest offsets."""
    latest = {tp: draw(st.integers(0, 500)) for tp in TPS}
    levels = {}
    for level in draw(st.lists(st.sampled_from(LEVELS), min_size=1, max_size=3, unique=True)):
        known = draw(st.lists(st.sampled_from(TPS), unique=True))
        levels[level] = KafkaOffsets({tp: draw(st.integers(0, latest[tp])) for tp in known})
    return LevelPositions(levels), latest


@settings(max_examples=300, deadline=None)
@given(state=states(), limit=st.one_of(st.none(), st.integers(1, 800)), max_tasks=st.integers(1, 4), min_records=st.integers(1, 300))
def test_a_batch_moves_no_level_back_reads_within_the_limit_and_covers_each_offset_once(state, limit, max_tasks, min_records):
    start, latest = state
    known = start.partitions()
    registered = {tp: 0 for tp in TPS if any(tp not in o for o in start.levels.values())}
    end = next_positions(start, LEVELS, {tp: latest[tp] for tp in known}, registered, limit)

    for level, offsets in end.levels.items():
        before = start.levels.get(level, KafkaOffsets())
        for tp in offsets:
            if tp in before:
                assert offsets.get(tp) >= before.get(tp), "a level moved back"
                assert offsets.get(tp) <= max(before.get(tp), latest[tp]), "a level passed the latest offset"
            else:
                assert offsets.get(tp) == registered[tp], "a new partition starts where it was registered"
    windows = batch_windows(start, end)
    assert sum(w.count for w in windows) <= (limit if limit else float("inf"))
    if limit is None:  # nothing held back: every level that knew a partition reached its latest
        for level, offsets in start.levels.items():
            for tp in offsets:
                assert end.levels[level].get(tp) == max(offsets.get(tp), latest[tp])

    tasks = pack_tasks(windows, max_tasks, min_records)
    assert len(tasks) <= max_tasks
    seen = [(w.topic, w.partition) for group in tasks for w in group]
    assert len(seen) == len(set(seen)), "a partition split between tasks"
    covered = {(r.level, w.topic, w.partition, o) for group in tasks for w in group for r in w.levels for o in range(r.from_offset, r.until_offset)}
    wanted = {
        (level, tp.topic, tp.partition, o)
        for level, offsets in end.levels.items() if level in start.levels
        for tp in offsets if tp in start.levels[level]
        for o in range(start.levels[level].get(tp), offsets.get(tp))
    }
    assert covered == wanted


def test_levels_that_start_apart_read_one_window_and_end_together():
    tp = TopicPartitionKey("a", 0)
    start = LevelPositions({1: KafkaOffsets({tp: 50}), 3: KafkaOffsets({tp: 80})})
    end = next_positions(start, [1, 3], {tp: 100}, {}, None)
    assert end.levels[1].get(tp) == end.levels[3].get(tp) == 100
    [window] = batch_windows(start, end)
    assert (window.from_offset, window.until_offset, window.uniform) == (50, 100, False)
    assert {r.level: (r.from_offset, r.until_offset) for r in window.levels} == {1: (50, 100), 3: (80, 100)}


def test_a_small_batch_is_one_task_and_a_large_one_uses_the_cores():
    start = LevelPositions({1: KafkaOffsets({tp: 0 for tp in TPS})})
    small = batch_windows(start, next_positions(start, [1], {tp: 100 for tp in TPS}, {}, None))
    large = batch_windows(start, next_positions(start, [1], {tp: 50_000 for tp in TPS}, {}, None))
    assert len(pack_tasks(small, 2, 20_000)) == 1
    assert [sum(w.count for w in g) for g in pack_tasks(large, 2, 20_000)] == [150_000, 150_000]


def test_a_recreated_partition_starts_over_in_every_level_and_is_read_from_the_next_batch():
    gone, other = TPS[0], TPS[1]
    start = LevelPositions({1: KafkaOffsets({gone: 345, other: 10}), 3: KafkaOffsets({gone: 300, other: 10})})
    end = next_positions(start, [1, 3], {gone: 6, other: 20}, {}, None, reset={gone: 0})
    assert {level: end.levels[level].get(gone) for level in (1, 3)} == {1: 0, 3: 0}
    assert [(w.topic, w.partition) for w in batch_windows(start, end)] == [(other.topic, other.partition)]
    after = next_positions(end, [1, 3], {gone: 6, other: 20}, {}, None)
    [window] = batch_windows(end, after)  # the next batch reads the new topic from its start
    assert (window.topic, window.partition, window.from_offset, window.until_offset) == (gone.topic, gone.partition, 0, 6)


def test_the_checkpoint_form_round_trips_and_is_canonical():
    a = LevelPositions({3: KafkaOffsets({TPS[1]: 5, TPS[0]: 4}), 1: KafkaOffsets({TPS[0]: 4})})
    b = LevelPositions({1: KafkaOffsets({TPS[0]: 4}), 3: KafkaOffsets({TPS[0]: 4, TPS[1]: 5})})
    assert json.dumps(a.to_dict()) == json.dumps(b.to_dict())
    assert LevelPositions.from_dict(json.loads(json.dumps(a.to_dict()))) == b


@pytest.mark.parametrize("bad", [{}, {"levels": 3}, {"a": {"0": 1}}, {"levels": {"x": {"a": {"0": 1}}}}, {"levels": {"1": {"a": {"0": -1}}}}])
def test_a_malformed_offset_is_an_error_naming_it(bad):
    with pytest.raises(PipelineError, match="offset"):
        LevelPositions.from_dict(bad)


@given(records=st.integers(0, 10_000_000), share=st.integers(1, 8), slots=st.integers(0, 8))
def test_a_batch_gets_its_share_of_the_slots_and_every_slot_only_for_a_backlog(records, share, slots):
    limit = task_limit(records, share, slots)
    assert limit >= share  # never less than the query's share
    assert limit <= max(share, slots)  # never more than the application's slots
    if limit > share:  # more than its share only when every task gets a backlog's records
        assert records >= limit * BACKLOG_RECORDS_PER_TASK


def test_a_single_links_backlog_batch_uses_both_slots_and_a_trees_batch_its_share():
    assert task_limit(1_000_000, 1, 2) == 2  # two queries on local[2,4]: a 1M-record backlog batch
    assert task_limit(300_000, 1, 2) == 1
    assert task_limit(1_000_000, 1, 0) == 1  # slots unknown (0): the share
