"""The query's planner (DistributorReader.latestOffset, driver) on a real broker when its
source goes quiet: after `distributor.idle_watch_after` of plannings that found nothing new it
arms the idle watch and stops asking the broker at each trigger (no ListOffsets: the reader's
offsets are not asked for), and the first record produced after that gives the next batch.
Offsets travel through JSON between calls, as Spark hands them over."""

from __future__ import annotations

import json
import threading
import time

from confluent_kafka import Producer
from pyspark.sql.streaming.datasource import ReadAllAvailable

from treedist.config import parse_deployment
from treedist.local.deployment import local_deployment
from treedist.records.plan import plan_cluster
from treedist.records.positions import LevelPositions, batch_windows
from treedist.records import ahead, holds
from treedist.records.distributor_source import IDLE_PARK_S, IDLE_WAIT_S, DistributorReader

from tests.e2e.workload import create_topic_everywhere

WAIT_S = 30.0  # a bound for a broker round trip under load, never a measure of speed


def _plan(local_kafka, topic: str, after: str):
    bootstrap = {c: local_kafka.bootstrap[c] for c in ("c1", "c2")}
    create_topic_everywhere(bootstrap, topic, 2)
    spec = local_deployment(bootstrap, topics=[topic], distributor={"idle_watch_after": after})
    return bootstrap, plan_cluster(parse_deployment(spec, "<test>"), "c1")


def _produce(servers: str, topic: str, n: int, partition: int = 0) -> None:
    p = Producer({"bootstrap.servers": servers, "linger.ms": 0})
    for i in range(n):
        p.produce(topic, value=f"v{i}".encode(), partition=partition)
    assert p.flush(30) == 0


class CountingReader:
    """The reader's OffsetReader, counting the offset requests the planner makes."""

    def __init__(self, inner) -> None:
        self.inner, self.calls = inner, 0

    def offsets(self, *args, **kwargs):
        self.calls += 1
        return self.inner.offsets(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def _plan_once(reader: DistributorReader, start: dict) -> dict:
    return json.loads(json.dumps(reader.latestOffset(json.loads(json.dumps(start)), ReadAllAvailable())))


def _plan_until_armed(reader: DistributorReader, end: dict, pause_s: float = 0.0) -> None:
    """Plan the quiet source (each planning finds nothing past `end`) until the idle watch is
    armed, or WAIT_S passed (the caller's next step then fails on the unarmed watch)."""
    deadline = time.monotonic() + WAIT_S
    while not (reader._watch is not None and reader._watch.armed) and time.monotonic() < deadline:
        assert _plan_once(reader, end) == end
        time.sleep(pause_s)


def _armed_counting(reader: DistributorReader, pause_s: float = 0.0) -> tuple[dict, CountingReader]:
    """Plan `reader` once from its start, count its offset requests from then on, and plan
    (quiet: the same end comes back) until the idle watch is armed: (the positions it
    planned, the counting reader)."""
    end = _plan_once(reader, reader.initialOffset())
    counting = CountingReader(reader._reader())
    reader._offsets = counting
    _plan_until_armed(reader, end, pause_s)
    return end, counting


def test_a_quiet_source_is_watched_not_polled_and_its_next_record_is_planned(local_kafka, unique_topic):
    bootstrap, plan = _plan(local_kafka, unique_topic, "300 milliseconds")
    reader = DistributorReader(plan, counters=None)
    reader.idle_park_s = 1.0  # each quiet trigger below is parked this long
    try:
        _produce(bootstrap["c1"], unique_topic, 4)
        # Quiet: the same end comes back, and after idle_watch_after the watch is armed.
        end, counting = _armed_counting(reader, pause_s=0.1)
        assert reader._watch is not None and reader._watch.armed
        asked = counting.calls
        for _ in range(5):  # armed: the triggers ask the broker nothing
            assert _plan_once(reader, end) == end
        assert counting.calls == asked

        _produce(bootstrap["c1"], unique_topic, 3, partition=1)
        deadline = time.monotonic() + WAIT_S
        after = end
        while after == end and time.monotonic() < deadline:
            after = _plan_once(reader, end)
            time.sleep(0.1)
        windows = batch_windows(LevelPositions.from_dict(end), LevelPositions.from_dict(after))
        assert [(w.partition, w.from_offset, w.until_offset) for w in windows] == [(1, 0, 3)]
        assert not reader._watch.armed  # woken: planning as usual while records flow
    finally:
        reader.stop()


def test_a_parked_planner_hands_the_trigger_back_when_the_driver_writes_for_its_query(local_kafka, unique_topic, tmp_path):
    # A quiet trigger is parked up to IDLE_PARK_S, in waits of IDLE_WAIT_S; a stop or a change
    # of the query's live files must not wait for the park's end (a stop waits for the trigger).
    bootstrap = {c: local_kafka.bootstrap[c] for c in ("c1", "c2")}
    create_topic_everywhere(bootstrap, unique_topic, 2)
    live = str(tmp_path / "c1-targets.json")
    spec = local_deployment(bootstrap, topics=[unique_topic], distributor={"idle_watch_after": "300 milliseconds"})
    reader = DistributorReader(plan_cluster(parse_deployment(spec, "<test>"), "c1", live_targets=live), counters=None)
    try:
        end = _plan_once(reader, reader.initialOffset())
        _plan_until_armed(reader, end)
        waits = []
        woke = reader._watch.woke
        reader._watch.woke = lambda wait_s=0.0: waits.append(wait_s) or woke(wait_s)

        assert _plan_once(reader, end) == end  # parked for the whole park: nothing came
        assert len(waits) > 2 and set(waits) == {IDLE_WAIT_S}  # ~IDLE_PARK_S / IDLE_WAIT_S on an idle machine

        waits.clear()
        ahead.mark_stopping(live)
        assert _plan_once(reader, end) == end
        assert len(waits) == 1  # stopping: the trigger goes back after one wait

        ahead.clear_stopping(live)
        waits.clear()
        threading.Timer(2 * IDLE_WAIT_S, lambda: open(holds.held_file(live), "w").write("{}")).start()
        assert _plan_once(reader, end) == end
        assert len(waits) < IDLE_PARK_S / IDLE_WAIT_S - 2  # the held file written: back at the next look
    finally:
        reader.stop()


def test_idle_watch_after_zero_keeps_asking_at_every_trigger(local_kafka, unique_topic):
    bootstrap, plan = _plan(local_kafka, unique_topic, "0s")
    reader = DistributorReader(plan, counters=None)
    try:
        end = _plan_once(reader, reader.initialOffset())
        counting = CountingReader(reader._reader())
        reader._offsets = counting
        for _ in range(3):
            assert _plan_once(reader, end) == end
            time.sleep(0.2)
        assert counting.calls >= 3 and reader._watch is None
    finally:
        reader.stop()


def test_the_full_check_of_a_quiet_source_lists_it_and_keeps_watching_until_a_topic_comes(local_kafka, unique_topic):
    # At the watch's full check (every topic_refresh_seconds) a source that lists the same
    # partitions stays watched: one metadata request, no offsets asked, no new assignment. A
    # selected topic created meanwhile ends the sleep, and the planning registers it.
    bootstrap = {c: local_kafka.bootstrap[c] for c in ("c1", "c2")}
    create_topic_everywhere(bootstrap, unique_topic, 2)
    later = f"{unique_topic}-later"
    spec = local_deployment(bootstrap, topics=[unique_topic, later],
                            distributor={"idle_watch_after": "300 milliseconds", "topic_refresh_seconds": "1s"})
    reader = DistributorReader(plan_cluster(parse_deployment(spec, "<test>"), "c1"), counters=None)
    reader.idle_park_s = 0.5
    try:
        end, counting = _armed_counting(reader)
        assert reader._watch.armed
        renewed = []
        renew = reader._watch.renew
        reader._watch.renew = lambda: renewed.append(1) or renew()
        asked = counting.calls
        until = time.monotonic() + 3.5  # three full checks or more
        while time.monotonic() < until:
            assert _plan_once(reader, end) == end
            assert reader._watch.armed
        assert len(renewed) >= 2 and counting.calls == asked

        create_topic_everywhere(bootstrap, later, 1)
        deadline = time.monotonic() + WAIT_S
        after = end
        while after == end and time.monotonic() < deadline:
            after = _plan_once(reader, end)
        assert not reader._watch.armed and counting.calls > asked  # woken by the listing: planned as usual
        registered = LevelPositions.from_dict(after).partitions() - LevelPositions.from_dict(end).partitions()
        assert {(tp.topic, tp.partition) for tp in registered} == {(later, 0)}
    finally:
        reader.stop()


def test_the_full_check_plans_again_once_the_driver_wrote_for_the_query(local_kafka, unique_topic, tmp_path):
    # A target switched or released while the source is quiet leaves a level with positions to
    # catch up and no record to wake the watch: the next full check must plan, not watch on.
    bootstrap = {c: local_kafka.bootstrap[c] for c in ("c1", "c2")}
    create_topic_everywhere(bootstrap, unique_topic, 2)
    live = str(tmp_path / "c1-targets.json")
    spec = local_deployment(bootstrap, topics=[unique_topic],
                            distributor={"idle_watch_after": "300 milliseconds", "topic_refresh_seconds": "1s"})
    reader = DistributorReader(plan_cluster(parse_deployment(spec, "<test>"), "c1", live_targets=live), counters=None)
    reader.idle_park_s = 0.5
    try:
        end, counting = _armed_counting(reader)
        asked = counting.calls
        with open(holds.held_file(live), "w") as f:
            f.write("{}")  # the driver writes the query's held file: nothing held, but written
        deadline = time.monotonic() + WAIT_S
        while counting.calls == asked and time.monotonic() < deadline:
            assert _plan_once(reader, end) == end
        assert counting.calls > asked  # planned at the check (offsets asked), not watched on
    finally:
        reader.stop()
