"""Copying ahead (treedist.records.ahead), its pure planning part and its intent files.

Named invariants:
- ADVANCE_NEVER_BACK: moving positions to what was copied ahead never moves one back, and
  leaves partitions without an entry where they were;
- NO_AHEAD_NO_CHANGE: an end without `copied_ahead` reads from its start, and its JSON is
  what it was before copying ahead existed;
- READ_AFTER_AHEAD: a batch whose end records `copied_ahead` reads every level of those
  partitions from there on, and nothing when it reached the end (no record copied twice,
  none skipped);
- TOKEN_SURVIVES_THE_CHECKPOINT: a batch's token is the same for the dict Spark hands back
  after a JSON round trip;
- INTENTS_OF_ONE_BATCH: the planner takes intents of the batch it asks for only; a
  missing, foreign or unreadable intent file is no intent;
- WITHIN_THE_LIMIT: a batch's windows and what its tasks may copy ahead stay within
  `max_records_per_trigger`.
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from treedist.records import ahead
from treedist.spark.checkpoint_fs import Store
from treedist.records.positions import (
    LevelPositions,
    ahead_share,
    batch_token,
    batch_windows,
    copied_ahead,
    read_start,
    with_copied_ahead,
)
from treedist.kafka.read_positions import KafkaOffsets, TopicPartitionKey

TPS = [TopicPartitionKey(t, p) for t in ("a", "b.c") for p in range(3)]
LEVELS = [1, 2]


@st.composite
def uniform_batches(draw):
    """Uniform start positions, offsets copied ahead past some of them, and an end at or past those."""
    start = {tp: draw(st.integers(0, 100)) for tp in TPS}
    ahead_of = {tp: start[tp] + draw(st.integers(1, 50)) for tp in draw(st.lists(st.sampled_from(TPS), unique=True))}
    end = {tp: max(start[tp], ahead_of.get(tp, 0)) + draw(st.integers(0, 50)) for tp in TPS}
    as_levels = lambda offsets: LevelPositions({level: KafkaOffsets(dict(offsets)) for level in LEVELS})  # noqa: E731
    return as_levels(start), ahead_of, as_levels(end)


@settings(max_examples=200, deadline=None)
@given(uniform_batches())
def test_advance_never_moves_a_position_back(batch):
    start, ahead_of, _ = batch
    moved = start.advanced(ahead_of)
    for level, offsets in start.levels.items():
        for tp in offsets:
            assert moved.levels[level].get(tp) == max(offsets.get(tp), ahead_of.get(tp, offsets.get(tp)))


@settings(max_examples=200, deadline=None)
@given(uniform_batches())
def test_an_end_without_copied_ahead_reads_from_its_start_and_keeps_its_json(batch):
    start, _, end = batch
    assert with_copied_ahead(end, {}) == end.to_dict()
    assert read_start(start.to_dict(), end.to_dict()) == start


@settings(max_examples=200, deadline=None)
@given(uniform_batches())
def test_a_batch_reads_every_level_from_where_the_previous_one_copied_ahead_to(batch):
    start, ahead_of, end = batch
    end_dict = json.loads(json.dumps(with_copied_ahead(end, ahead_of)))  # as Spark hands it back
    assert copied_ahead(end_dict) == ahead_of
    windows = {(w.topic, w.partition): w for w in batch_windows(read_start(start.to_dict(), end_dict), end)}
    for tp in TPS:
        begin = ahead_of.get(tp, start.levels[1].get(tp))
        until = end.levels[1].get(tp)
        window = windows.get((tp.topic, tp.partition))
        if begin == until:
            assert window is None
        else:
            assert (window.from_offset, window.until_offset) == (begin, until)
            assert window.uniform


@settings(max_examples=100, deadline=None)
@given(uniform_batches())
def test_a_batch_token_survives_the_json_round_trip(batch):
    _, ahead_of, end = batch
    offset = with_copied_ahead(end, ahead_of)
    assert batch_token(json.loads(json.dumps(offset))) == batch_token(offset)
    assert batch_token(end.to_dict()) != batch_token({"levels": {}})


def test_intents_are_read_for_their_own_batch_only(tmp_path):
    tp, other, broken = TopicPartitionKey("orders.eu", 0), TopicPartitionKey("orders.eu", 1), TopicPartitionKey("x", 2)
    intents = ahead.Intents(Store(), str(tmp_path))
    intents.write("batch-1", [(tp, 10, 25), (other, 7, 7)])
    intents.write("batch-0", [(broken, 1, 2)])
    (tmp_path / "x~2").write_text("{not json")
    assert intents.read("batch-1", [tp, other, broken, TopicPartitionKey("never", 0)]) == {
        tp: (10, 25), other: (7, 7),
    }
    assert intents.read("batch-2", [tp, other]) == {}
    intents.write("batch-1", [(tp, 10, 12)])  # a retried task overwrites
    assert intents.read("batch-1", [tp]) == {tp: (10, 12)}
    assert not list(tmp_path.glob(".*.tmp"))


def test_an_intent_rewritten_in_place_shorter_or_longer_reads_as_the_last_write(tmp_path):
    # Intents are rewritten in place (Store.overwrite): a shorter write must not leave the
    # tail of a longer one behind, and a longer one must extend the file.
    tp = TopicPartitionKey("orders.eu", 3)
    intents = ahead.Intents(Store(), str(tmp_path))
    (tmp_path / "orders.eu~3").write_text(json.dumps({"batch": "batch-0", "until": 1, "to": 2}) + " " * 300)
    for until, to in ((10, 10_000_000), (10, 12), (123_456_789, 987_654_321), (0, 0)):
        intents.write("batch-1", [(tp, until, to)])
        assert intents.read("batch-1", [tp]) == {tp: (until, to)}
        assert json.loads((tmp_path / "orders.eu~3").read_text()) == {"batch": "batch-1", "until": until, "to": to}
    assert [p.name for p in tmp_path.iterdir()] == ["orders.eu~3"]


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 3_000_000), st.one_of(st.none(), st.integers(1, 3_000_000)), st.integers(1, 64))
def test_a_batch_with_what_its_tasks_copy_ahead_stays_within_the_limit(read, max_records, tasks):
    # WITHIN_THE_LIMIT: the records a batch reads plus every task's share of copying ahead
    # are at most max_records_per_trigger (when the windows themselves are within it), and
    # only the rounding of the share is left unused.
    share = ahead_share(read, max_records, tasks)
    if max_records is None:
        assert share is None
    else:
        assert share >= 0
        if read <= max_records:
            assert read + tasks * share <= max_records
            assert max_records - (read + tasks * share) < tasks
