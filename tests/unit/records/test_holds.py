"""Held levels and abandoned batches (treedist.records.holds), pure.

Named invariants (the module's):
- HELD_STAYS: a held level's positions never advance (only a reset moves them);
- NEVER_SKIPS: a floor only raises a level's end; every level's range starts at its position;
- TRUST_FOLLOWS: a level's first batch after an abandonment trusts every abandoned token since
  its last batch; no later batch does;
- RESET_DROPS_FLOOR: a partition reset (topic recreated) loses its floor.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from treedist.kafka.read_positions import KafkaOffsets, TopicPartitionKey
from treedist.records import holds
from treedist.records.errors import PipelineError
from treedist.records.positions import LevelPositions, LevelRange, PartitionWindow, batch_windows, next_positions

TPS = [TopicPartitionKey("t", p) for p in range(3)]
LEVELS = [1, 3]


@st.composite
def uniform_starts(draw):
    """Every level at the same positions (the steady state) and the broker's latest offsets."""
    start = {tp: draw(st.integers(0, 300)) for tp in TPS}
    latest = {tp: start[tp] + draw(st.integers(0, 300)) for tp in TPS}
    return LevelPositions({level: KafkaOffsets(dict(start)) for level in LEVELS}), latest


@settings(max_examples=200, deadline=None)
@given(uniform_starts(), st.sampled_from([None, 50, 1000]), st.sets(st.sampled_from(LEVELS), max_size=1))
def test_held_stays_and_the_others_advance(state, cap, held):
    start, latest = state
    end = next_positions(start, LEVELS, latest, {}, cap, None, held)
    for level in LEVELS:
        for tp in TPS:
            if level in held:
                assert end.levels[level].get(tp) == start.levels[level].get(tp)  # HELD_STAYS
            elif cap is None:
                assert end.levels[level].get(tp) == latest[tp]
    windows = batch_windows(start, end)
    assert all(r.level not in held for w in windows for r in w.levels)
    assert holds.idle_levels(LEVELS, windows) == (tuple(sorted(held)) if windows else tuple(LEVELS))


@settings(max_examples=200, deadline=None)
@given(uniform_starts(), st.integers(0, 200))
def test_a_released_level_catches_up_from_where_it_stopped(state, moved):
    """Held at the start while the other level moved on; released: the window starts at the
    held level's position, the held level copies everything after it, the other only its new
    records (NEVER_SKIPS)."""
    start, latest = state
    ahead = {tp: start.levels[1].get(tp) + moved for tp in TPS}
    latest = {tp: max(latest[tp], ahead[tp]) for tp in TPS}
    apart = LevelPositions({1: KafkaOffsets(ahead), 3: start.levels[3]})
    end = next_positions(apart, LEVELS, latest, {}, None)
    ranges = {(w.partition, r.level): (r.from_offset, r.until_offset) for w in batch_windows(apart, end) for r in w.levels}
    for tp in TPS:
        if latest[tp] > start.levels[3].get(tp):
            assert ranges[(tp.partition, 3)] == (start.levels[3].get(tp), latest[tp])
        if latest[tp] > ahead[tp]:
            assert ranges[(tp.partition, 1)] == (ahead[tp], latest[tp])
        else:
            assert (tp.partition, 1) not in ranges


def _positions(value: int) -> dict[TopicPartitionKey, int]:
    return {tp: value for tp in TPS}


def test_trust_follows_an_abandonment_through_a_hold():
    """Batch N (start S, end E) abandoned while level 3 is held: the next batch trusts N's
    token for level 1 and floors it at E; level 3's entry waits until it is released, and
    its first batch then trusts and floors; no batch after that does (TRUST_FOLLOWS)."""
    end = {1: KafkaOffsets(_positions(200)), 3: KafkaOffsets(_positions(200))}
    record = holds.abandonment("S", "N", end, {})
    assert holds.from_record(record, "other start") == {}
    found = holds.from_record(record, "S")

    first = holds.plan_entries(holds.merge(holds.carried({}), found), held={3}, reset=())
    assert holds.trusted_tokens(first) == ((1, "N"),)
    floored = holds.floor({1: KafkaOffsets(_positions(150)), 3: KafkaOffsets(_positions(100))}, first)
    assert floored[1].positions == _positions(200)  # level 1 reads at least to N's end
    assert floored[3].positions == _positions(100)  # held: untouched

    offset = holds.with_entries({"levels": {}}, first)
    second = holds.plan_entries(holds.carried(holds.entries(offset)), held={3}, reset=())
    assert holds.trusted_tokens(second) == ()  # level 1's first batch was the one before
    assert set(second) == {3} and second[3]["waiting"]

    offset = holds.with_entries({"levels": {}}, second)
    released = holds.plan_entries(holds.carried(holds.entries(offset)), held=set(), reset=())
    assert holds.trusted_tokens(released) == ((3, "N"),)
    assert holds.floor({3: KafkaOffsets(_positions(100))}, released)[3].positions == _positions(200)

    offset = holds.with_entries({"levels": {}}, released)
    assert holds.plan_entries(holds.carried(holds.entries(offset)), held=set(), reset=()) == {}


def test_a_second_abandonment_keeps_the_first_token():
    """The batch that replaced an abandoned one is abandoned too: a target may hold either
    batch's positions, so both tokens are trusted and the higher end is the floor."""
    first = holds.from_record(holds.abandonment("S", "N", {1: KafkaOffsets(_positions(200))}, {}), "S")
    replacing = holds.with_entries({"levels": {}}, holds.plan_entries(first, held=(), reset=()))
    second = holds.from_record(holds.abandonment("S", "N2", {1: KafkaOffsets(_positions(180))},
                                                 holds.entries(replacing)), "S")
    assert holds.trusted_tokens(second) == ((1, "N"), (1, "N2"))
    assert second[1]["end"] == _positions(200)


def test_reset_drops_floor():
    found = holds.from_record(holds.abandonment("S", "N", {3: KafkaOffsets(_positions(200))}, {}), "S")
    planned = holds.plan_entries(found, held=(), reset=[TPS[0]])
    floored = holds.floor({3: KafkaOffsets(_positions(0))}, planned)[3]
    assert floored.get(TPS[0]) == 0  # the recreated topic is read from its start, not skipped to 200
    assert floored.get(TPS[1]) == 200


def test_a_window_gets_an_empty_range_for_each_level_it_lacks():
    """Without it the window would count as uniform and the copier would copy it for the
    level that lacks a range (a held one: copies it must not make)."""
    w = PartitionWindow("t", 0, 10, 20, (LevelRange(1, 10, 20),))
    assert w.uniform
    (out,) = holds.complete_ranges([w], (1, 3))
    assert out.levels == (LevelRange(1, 10, 20), LevelRange(3, 10, 10)) and not out.uniform
    full = PartitionWindow("t", 1, 10, 20, (LevelRange(1, 10, 20), LevelRange(3, 10, 20)))
    assert holds.complete_ranges([full], (1, 3)) == [full]


def test_held_files_round_trip_and_name_the_bad_one():
    assert holds.parse_held(holds.format_held({3: "c3", 1: "c2"})) == {1: "c2", 3: "c3"}
    assert holds.parse_held("") == {}
    with pytest.raises(PipelineError, match="malformed held file"):
        holds.parse_held('["c3"]')
    with pytest.raises(PipelineError, match="abandoned"):
        holds.entries({"abandoned": {"x": {}}})


def test_an_abandoned_first_batch_matches_only_the_initial_start():
    record = holds.abandonment(holds.INITIAL, "N", {1: KafkaOffsets(_positions(5))}, {})
    assert holds.from_record(record, "any start") == {}
    assert holds.trusted_tokens(holds.from_record(record, "initial offset's token", initial=True)) == ((1, "N"),)
