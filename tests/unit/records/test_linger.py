"""Lingering tasks (treedist.records.ahead, "Lingering"): the pure decision of a task that
copies ahead, and the driver's stop signal it watches.

Named invariants:
- NO_LINGER_IS_TODAY: with linger 0 a task goes on only while a backlog keeps arriving, for
  at most the backlog time (the behaviour before lingering);
- LINGER_BOUNDED: nothing goes on past max(backlog time, linger);
- LINGER_WITHOUT_BACKLOG: with a linger, a task without a backlog goes on until the linger;
- ENDED_STOPS: an ended linger (stop, target switch) stops the task whatever comes;
- WAIT_WITHIN_LINGER: a consume never waits past the linger's end, and waits the backlog
  round trip on a backlog;
- IDLE_WINDOWS_ONLY_IDLE: the empty windows a lingering task tails stand at the position of
  partitions without a window whose every level is at the same, unchanged position.
"""

from __future__ import annotations

import os

from hypothesis import given
from hypothesis import strategies as st

from treedist.records import ahead
from treedist.records.positions import LevelPositions, batch_windows, idle_windows
from treedist.kafka.read_positions import KafkaOffsets, TopicPartitionKey

MIN, BACKLOG_S = 1_000, 1.0
took_st = st.integers(min_value=0, max_value=100_000)
elapsed_st = st.floats(min_value=0.0, max_value=10.0, allow_nan=False)
linger_st = st.floats(min_value=0.0, max_value=5.0, allow_nan=False)


def _keep(took, elapsed, linger, ended=False):
    return ahead.keep_copying(took, elapsed, linger, ended, min_records=MIN, backlog_s=BACKLOG_S)


@given(took_st, elapsed_st)
def test_no_linger_is_todays_behaviour(took, elapsed):  # NO_LINGER_IS_TODAY
    assert _keep(took, elapsed, 0.0) == (took >= MIN and elapsed < BACKLOG_S)


@given(took_st, elapsed_st, linger_st, st.booleans())
def test_nothing_goes_on_past_the_longer_of_backlog_and_linger(took, elapsed, linger, ended):  # LINGER_BOUNDED
    if elapsed >= max(BACKLOG_S, linger):
        assert not _keep(took, elapsed, linger, ended)


@given(st.integers(min_value=0, max_value=MIN - 1), elapsed_st, linger_st)
def test_without_a_backlog_a_task_lingers_until_its_linger(took, elapsed, linger):  # LINGER_WITHOUT_BACKLOG
    assert _keep(took, elapsed, linger) == (elapsed < linger)


@given(took_st, elapsed_st, linger_st)
def test_an_ended_linger_stops_the_task(took, elapsed, linger):  # ENDED_STOPS
    assert not _keep(took, elapsed, linger, ended=True)


@given(took_st, st.floats(min_value=-1.0, max_value=5.0, allow_nan=False))
def test_a_consume_waits_within_the_linger(took, left):  # WAIT_WITHIN_LINGER
    wait = ahead.consume_wait(took, MIN, 0.02, left)
    assert 0.0 <= wait <= max(0.0, left)
    if left >= ahead.LINGER_WAIT_S:
        assert wait == (0.02 if took >= MIN else ahead.LINGER_WAIT_S)


def test_the_watch_ends_on_the_stopping_marker_and_on_new_live_targets(tmp_path):
    live = tmp_path / "c1-targets.json"
    live.write_text('{"1": "c2"}')
    watch = ahead.LingerWatch(str(live))
    assert not watch.ended() and not ahead.is_stopping(str(live))
    ahead.mark_stopping(str(live))
    assert watch.ended() and ahead.is_stopping(str(live))
    ahead.clear_stopping(str(live))
    assert not watch.ended() and not ahead.is_stopping(str(live))
    stat = live.stat()
    live.write_text('{"1": "c3"}')  # a switch: the driver rewrites the file
    os.utime(live, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert watch.ended()
    assert not ahead.LingerWatch(str(live)).ended()  # a task that began after the switch


def test_without_a_live_targets_file_nothing_ends_a_linger(tmp_path):
    ahead.mark_stopping(None)
    ahead.clear_stopping(None)
    assert not ahead.LingerWatch(None).ended() and not ahead.is_stopping(None)


TPS = [TopicPartitionKey(t, p) for t in ("a", "b") for p in range(3)]


@given(st.dictionaries(st.sampled_from(TPS), st.tuples(st.integers(0, 9), st.integers(0, 9), st.integers(0, 3))))
def test_idle_windows_stand_at_unchanged_uniform_partitions_without_a_window(spec):  # IDLE_WINDOWS_ONLY_IDLE
    # per partition: level 1's start, its end (reset if lower), and level 2's lag behind level 1 at both
    start = LevelPositions({1: KafkaOffsets({tp: a for tp, (a, _, _) in spec.items()}),
                            2: KafkaOffsets({tp: a - min(a, d) for tp, (a, _, d) in spec.items()})})
    end = LevelPositions({1: KafkaOffsets({tp: b for tp, (_, b, _) in spec.items()}),
                          2: KafkaOffsets({tp: b - min(b, d) for tp, (_, b, d) in spec.items()})})
    windows = batch_windows(start, end)
    idle = idle_windows(start, end, windows)
    read = {(w.topic, w.partition) for w in windows}
    for w in idle:
        tp = TopicPartitionKey(w.topic, w.partition)
        assert (w.topic, w.partition) not in read and w.count == 0 and w.uniform
        assert w.from_offset == end.uniform_at(tp) == start.uniform_at(tp)
    expected = {tp for tp in spec if (tp.topic, tp.partition) not in read
                and end.uniform_at(tp) is not None and start.uniform_at(tp) == end.uniform_at(tp)}
    assert {TopicPartitionKey(w.topic, w.partition) for w in idle} == expected
