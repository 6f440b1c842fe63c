import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from treedist.kafka.errors import ReadPositionError
from treedist.kafka.read_positions import KafkaOffsets, TopicPartitionKey as TP
from treedist.kafka.batching import fair_limit, split_ranges

TPS = [TP("a", 0), TP("a", 1), TP("b", 0), TP("b", 1), TP("c", 0)]


@st.composite
def backlog(draw):
    n = draw(st.integers(1, len(TPS)))
    start = {tp: draw(st.integers(0, 1000)) for tp in TPS[:n]}
    available = {tp: s + draw(st.integers(0, 500)) for tp, s in start.items()}
    return start, available


@given(backlog(), st.integers(1, 3000))
@settings(max_examples=300, deadline=None)
def test_fair_limit_invariants(data, limit):
    start, available = data
    end = fair_limit(start, available, limit)
    taken = {tp: end[tp] - start[tp] for tp in start}
    total_backlog = sum(available[tp] - start[tp] for tp in start)
    # never past what is available, never backwards
    assert all(start[tp] <= end[tp] <= available[tp] for tp in start)
    # bounded, and as much as allowed
    assert sum(taken.values()) == min(limit, total_backlog)
    # max-min fair: a partition left with backlog got no less than any other partition minus one
    for tp in start:
        if end[tp] < available[tp]:
            assert all(taken[tp] >= taken[other] - 1 for other in start)


def test_fair_limit_shares_equally_and_redistributes_small_backlogs():
    start = dict.fromkeys(TPS[:3], 0)
    end = fair_limit(start, {TPS[0]: 100, TPS[1]: 100, TPS[2]: 2}, 50)
    assert end == {TPS[0]: 24, TPS[1]: 24, TPS[2]: 2}


def test_fair_limit_smaller_than_partition_count_serves_the_largest_backlogs():
    start = dict.fromkeys(TPS, 0)
    available = {TPS[0]: 5, TPS[1]: 50, TPS[2]: 5, TPS[3]: 40, TPS[4]: 5}
    end = fair_limit(start, available, 2)
    assert {tp for tp in TPS if end[tp] > 0} == {TPS[1], TPS[3]}


def test_fair_limit_rejects_zero():
    with pytest.raises(ReadPositionError):
        fair_limit({TPS[0]: 0}, {TPS[0]: 1}, 0)


@given(backlog(), st.integers(1, 8), st.one_of(st.none(), st.integers(1, 400)), st.integers(1, 200))
@settings(max_examples=300, deadline=None)
def test_split_ranges_cover_each_partition_exactly(data, min_parts, max_per, min_split):
    start, end = data
    ranges = split_ranges(KafkaOffsets(start), KafkaOffsets(end), min_parts, max_per, min_split)
    for tp in start:
        mine = [r for r in ranges if r.tp == tp]
        covered = [o for r in mine for o in range(r.from_offset, r.until_offset)]
        assert covered == list(range(start[tp], end[tp]))
        if max_per:
            assert all(r.count <= max_per for r in mine)


def test_split_ranges_cuts_a_single_big_range_for_both_cores():
    ranges = split_ranges(KafkaOffsets({TPS[0]: 0}), KafkaOffsets({TPS[0]: 100_000}), min_partitions=2)
    assert [(r.from_offset, r.until_offset) for r in ranges] == [(0, 50_000), (50_000, 100_000)]


def test_split_ranges_does_not_cut_small_ranges():
    ranges = split_ranges(KafkaOffsets({TPS[0]: 0}), KafkaOffsets({TPS[0]: 500}), min_partitions=4)
    assert len(ranges) == 1


def test_partitions_new_in_end_are_only_registered():
    start = KafkaOffsets({TPS[0]: 5})
    end = KafkaOffsets({TPS[0]: 9, TPS[1]: 3})
    assert [(r.tp, r.from_offset, r.until_offset) for r in split_ranges(start, end)] == [(TPS[0], 5, 9)]


def test_end_before_start_is_an_error():
    with pytest.raises(ReadPositionError, match=r"a\[0\]"):
        split_ranges(KafkaOffsets({TPS[0]: 5}), KafkaOffsets({TPS[0]: 4}))


def test_seeded_random_batches_chain_without_gaps_or_overlaps():
    rng = random.Random(7)
    start = dict.fromkeys(TPS, 0)
    latest = dict(start)
    seen = {tp: [] for tp in TPS}
    for _ in range(200):
        for tp in TPS:
            latest[tp] += rng.randint(0, 30)
        end = fair_limit(start, latest, rng.randint(1, 60))
        for r in split_ranges(KafkaOffsets(start), KafkaOffsets(end), 3, 17, 5):
            seen[r.tp].extend(range(r.from_offset, r.until_offset))
        start = end
    for tp in TPS:
        assert seen[tp] == list(range(start[tp]))
