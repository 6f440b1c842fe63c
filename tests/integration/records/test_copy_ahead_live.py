"""Copying ahead on a real broker: the planner (driver) and one task (executor code, run in
this process) of cluster c1's query, step by step. Records that arrive after a batch was
planned come in the task's fetch; they are copied in the same task, the next batch starts
after them, and every record lands on the target exactly once."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from confluent_kafka import Producer
from pyspark.sql.streaming.datasource import ReadAllAvailable

from treedist.config import parse_deployment
from treedist.kafka.watermarks import OffsetReader
from treedist.local.deployment import local_deployment
from treedist.records import ahead
from treedist.records.plan import plan_cluster
from treedist.records.positions import LevelPositions
from treedist.records.distributor_source import DistributorReader
from treedist.records.task import run_task
from treedist.kafka.read_positions import TopicPartitionKey
from treedist.verify import verify_topic

from tests.e2e.workload import create_topic_everywhere, wait_for_counts


def _produce(servers: str, topic: str, first: int, n: int) -> None:
    p = Producer({"bootstrap.servers": servers, "linger.ms": 0})
    for i in range(first, first + n):
        p.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=0)
    assert p.flush(30) == 0


def _position(end: dict, tp: TopicPartitionKey) -> int:
    return LevelPositions.from_dict(end).levels[1].get(tp)


def _deployment(bootstrap, topic, tmp_path, **distributor):
    """c1 -> c2 copying `topic`, its checkpoints in `tmp_path`/ck."""
    return parse_deployment(
        local_deployment(bootstrap, topics=[topic], checkpoint_location=str(tmp_path / "ck"), distributor=distributor),
        "<test>",
    )


def _setup(local_kafka, topic, tmp_path, **distributor):
    """c1 -> c2, one partition; c1's plan, its checkpoint directory and its planner."""
    bootstrap = {c: local_kafka.bootstrap[c] for c in ("c1", "c2")}
    create_topic_everywhere(bootstrap, topic, 1)
    deployment = _deployment(bootstrap, topic, tmp_path, **distributor)
    plan = plan_cluster(deployment, "c1")
    Path(plan.checkpoint).mkdir(parents=True)  # Spark creates it before the first batch
    return bootstrap, deployment, plan, DistributorReader(plan, counters=None), TopicPartitionKey(topic, 0)


def _first_batch(bootstrap, reader, topic, records):
    """`records` produced on c1, then the first batch planned: (start, end, its one task)."""
    _produce(bootstrap["c1"], topic, 0, records)
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    [task] = reader.partitions(start, end)
    return start, end, task


def test_records_past_a_window_are_copied_in_its_task_and_the_next_batch_starts_after_them(local_kafka, unique_topic, tmp_path):
    bootstrap, deployment, plan, reader, tp = _setup(local_kafka, unique_topic, tmp_path)
    _, end, task = _first_batch(bootstrap, reader, unique_topic, 100)
    assert [(w.from_offset, w.until_offset) for w in task.windows] == [(0, 100)]
    _produce(bootstrap["c1"], unique_topic, 100, 50)  # after planning: past the window

    stats = run_task(plan, task)
    assert (stats.records_in, stats.copied) == (150, 150)
    assert wait_for_counts({"c2": bootstrap["c2"]}, unique_topic, 150, timeout=30) == {"c2": 150}

    # Nothing new past what the task copied: no batch yet (the planner returns its start, so
    # Spark runs none). Once the source stayed quiet for `record_ahead_after_s`, a batch
    # without tasks records where the task copied up to.
    reader.record_ahead_after_s = 0.3
    assert reader.latestOffset(end, ReadAllAvailable()) == end
    time.sleep(0.3)
    after = reader.latestOffset(end, ReadAllAvailable())
    assert after["copied_ahead"] == {unique_topic: {"0": 150}}
    assert _position(after, tp) == 150
    assert reader.partitions(end, after) == []

    # Asked again for the same batch (a replay plans from the same offsets): the same end.
    assert reader.latestOffset(end, ReadAllAvailable()) == after

    _produce(bootstrap["c1"], unique_topic, 150, 10)
    last = reader.latestOffset(after, ReadAllAvailable())
    assert "copied_ahead" not in last  # the batch before copied nothing: no tasks, no intents
    [task] = reader.partitions(after, last)
    assert [(w.from_offset, w.until_offset) for w in task.windows] == [(150, 160)]
    assert run_task(plan, task).copied == 10

    _assert_c2_holds_each_once(bootstrap, deployment, unique_topic, 160)


def test_the_batch_after_copying_ahead_waits_for_new_records_and_records_the_copied_positions_with_them(
        local_kafka, unique_topic, tmp_path):
    bootstrap, deployment, plan, reader, tp = _setup(local_kafka, unique_topic, tmp_path)
    _, end, task = _first_batch(bootstrap, reader, unique_topic, 100)
    _produce(bootstrap["c1"], unique_topic, 100, 50)  # after planning: past the window
    assert run_task(plan, task).copied == 150

    assert reader.latestOffset(end, ReadAllAvailable()) == end  # nothing new: no batch
    _produce(bootstrap["c1"], unique_topic, 150, 10)
    after = reader.latestOffset(end, ReadAllAvailable())
    # One batch: it records what the task copied ahead and reads only the new records.
    assert after["copied_ahead"] == {unique_topic: {"0": 150}}
    assert _position(after, tp) == 160
    [task] = reader.partitions(end, after)
    assert [(w.from_offset, w.until_offset) for w in task.windows] == [(150, 160)]
    assert run_task(plan, task).copied == 10

    _assert_c2_holds_each_once(bootstrap, deployment, unique_topic, 160)


def test_an_intent_of_another_batch_or_window_end_is_not_acted_upon(local_kafka, unique_topic, tmp_path):
    bootstrap, _, plan, reader, tp = _setup(local_kafka, unique_topic, tmp_path)
    _, end, task = _first_batch(bootstrap, reader, unique_topic, 30)

    intents = ahead.Intents.of(plan.checkpoint, plan.store)
    intents.write("another-batch", [(tp, 30, 30_000)])
    assert "copied_ahead" not in reader.latestOffset(end, ReadAllAvailable())
    intents.write(task.batch, [(tp, 29, 30_000)])  # not the partition's position
    # A planner reads a batch's intents once (they are final once it committed): a fresh
    # planner, as after a restart, reads the rewritten file.
    fresh = DistributorReader(plan, counters=None)
    assert "copied_ahead" not in fresh.latestOffset(end, ReadAllAvailable())


def test_copying_ahead_keeps_a_batch_within_max_records_per_trigger(local_kafka, unique_topic, tmp_path):
    # A backlog beyond the limit goes in several batches, as the operator asked: the task
    # copies ahead only what the limit leaves after its windows.
    bootstrap, deployment, plan, reader, tp = _setup(local_kafka, unique_topic, tmp_path, max_records_per_trigger=120)
    _produce(bootstrap["c1"], unique_topic, 0, 100)
    start = reader.initialOffset()
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    [task] = reader.partitions(start, end)
    assert ([(w.from_offset, w.until_offset) for w in task.windows], task.ahead_limit) == ([(0, 100)], 20)
    _produce(bootstrap["c1"], unique_topic, 100, 50)  # 50 past the window; room for 20

    assert run_task(plan, task).copied == 120
    after = reader.latestOffset(end, reader.getDefaultReadLimit())
    assert after["copied_ahead"] == {unique_topic: {"0": 120}}
    [task] = reader.partitions(end, after)
    assert [(w.from_offset, w.until_offset) for w in task.windows] == [(120, 150)]
    assert run_task(plan, task).copied == 30  # nothing more was produced: nothing ahead

    _assert_c2_holds_each_once(bootstrap, deployment, unique_topic, 150)


def test_records_that_keep_arriving_while_a_task_copies_ahead_are_copied_once_and_the_next_batch_follows(
        local_kafka, unique_topic, tmp_path):
    # A backlog that keeps arriving (another cluster's copies landing here) is copied by the
    # task while it lasts (step 3 of copy_ahead, within AHEAD_LINGER_S), each partition's
    # intent written before its records are copied; the next batch starts after them.
    bootstrap, deployment, plan, reader, tp = _setup(local_kafka, unique_topic, tmp_path)
    _, end, task = _first_batch(bootstrap, reader, unique_topic, 100)
    total = 100 + 40 * 2_500
    producer = threading.Thread(target=_produce_in_bursts, args=(bootstrap["c1"], unique_topic, 100, 40, 2_500))
    producer.start()
    try:
        _wait_for_records(bootstrap["c1"], unique_topic, 2_600)  # a backlog past the window
        stats = run_task(plan, task)
    finally:
        producer.join(60)
    assert stats.records_in == stats.copied > 100

    reader.record_ahead_after_s = 0.0  # a task-less batch records the positions at once (see the first test)
    after = reader.latestOffset(end, ReadAllAvailable())
    assert after["copied_ahead"] == {unique_topic: {"0": stats.copied}}
    tasks = reader.partitions(end, after)
    # what the task left (if the backlog outlasted it) is the next batch's, from where it stopped
    assert [[(w.from_offset, w.until_offset) for w in t.windows] for t in tasks] == (
        [[(stats.copied, total)]] if stats.copied < total else [])
    assert sum(run_task(plan, t).copied for t in tasks) == total - stats.copied

    _assert_c2_holds_each_once(bootstrap, deployment, unique_topic, total, timeout=60)


def test_switched_off_a_task_copies_only_its_windows_and_the_next_batch_reads_the_rest(local_kafka, unique_topic, tmp_path):
    # `distributor.copy_ahead: false`: the records that arrive after planning come in the
    # task's fetch as in the first test, but are left to the next batch; no intent is written.
    bootstrap, deployment, plan, reader, tp = _setup(local_kafka, unique_topic, tmp_path, copy_ahead=False)
    _, end, task = _first_batch(bootstrap, reader, unique_topic, 100)
    assert task.ahead_limit == 0
    _produce(bootstrap["c1"], unique_topic, 100, 50)  # after planning: past the window

    stats = run_task(plan, task)
    assert (stats.records_in, stats.copied) == (100, 100)
    assert not Path(ahead.ahead_dir(plan.checkpoint)).exists()

    after = reader.latestOffset(end, ReadAllAvailable())
    assert "copied_ahead" not in after and _position(after, tp) == 150
    [task] = reader.partitions(end, after)
    assert [(w.from_offset, w.until_offset) for w in task.windows] == [(100, 150)]
    assert run_task(plan, task).copied == 50

    _assert_c2_holds_each_once(bootstrap, deployment, unique_topic, 150)


def test_a_replay_that_does_not_copy_ahead_clears_the_intents_a_dead_attempt_left(local_kafka, unique_topic, tmp_path):
    # Attempt 1 of the first batch copied ahead to 150, wrote its intent and died before its
    # copies landed (none of 100-149 reached c2); the query restarted with copy_ahead off and
    # replays the batch: its task must not leave that intent for the planner (a gap of 50).
    bootstrap, _, plan, reader, tp = _setup(local_kafka, unique_topic, tmp_path)
    start, end, task = _first_batch(bootstrap, reader, unique_topic, 100)
    _produce(bootstrap["c1"], unique_topic, 100, 50)
    ahead.Intents.of(plan.checkpoint, plan.store).write(task.batch, [(tp, 100, 150)])

    off = _deployment(bootstrap, unique_topic, tmp_path, copy_ahead=False)  # the restart's deployment
    plan_off = plan_cluster(off, "c1")
    replanner = DistributorReader(plan_off, counters=None)
    [replay] = replanner.partitions(start, end)
    assert (replay.batch, replay.ahead_limit) == (task.batch, 0)
    assert run_task(plan_off, replay).copied == 100

    after = DistributorReader(plan_off, counters=None).latestOffset(end, ReadAllAvailable())
    assert "copied_ahead" not in after and _position(after, tp) == 150
    [task] = replanner.partitions(end, after)
    assert [(w.from_offset, w.until_offset) for w in task.windows] == [(100, 150)]
    assert run_task(plan_off, task).copied == 50
    _assert_c2_holds_each_once(bootstrap, off, unique_topic, 150)


def _assert_c2_holds_each_once(bootstrap, deployment, topic: str, count: int, timeout: float = 30) -> None:
    """c2 holds `count` records of `topic`, each once, in order, matching its original."""
    assert wait_for_counts({"c2": bootstrap["c2"]}, topic, count, timeout=timeout) == {"c2": count}
    report = {c.cluster: c for c in verify_topic(deployment, topic).clusters}["c2"]
    assert (report.missing, report.duplicated, report.order_violations, report.mismatched) == (0, 0, 0, 0)


def _produce_in_bursts(servers: str, topic: str, first: int, bursts: int, size: int) -> None:
    for b in range(bursts):
        _produce(servers, topic, first + b * size, size)


def _wait_for_records(servers: str, topic: str, count: int, timeout: float = 30.0) -> None:
    """Poll the topic's record count every 10 ms (`wait_for_counts` polls every second: the
    whole backlog would be there by then) until it holds `count` records."""
    reader = OffsetReader({"bootstrap.servers": servers}, cluster="c1", timeout_s=10.0)
    deadline = time.monotonic() + timeout
    while reader.record_count(topic) < count:
        assert time.monotonic() < deadline, f"{topic} did not reach {count} records"
        time.sleep(0.01)
