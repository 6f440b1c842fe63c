"""Reading a task's windows on a real broker (executor code, run in this process): a partition
whose window is complete stops being fetched while the others are still read, unless copying
ahead may still take its records; every window is handed over exactly."""

from __future__ import annotations

from confluent_kafka import Consumer, Producer

from treedist.records.positions import LevelRange, PartitionWindow
from treedist.records.window_read import read_windows
from treedist.spark.options import consumer_settings

from tests.e2e.workload import create_topic_everywhere

SHORT, LONG = 10, 60_000  # the long window takes several 2 MiB fetches of 100-byte values


def _load(servers: str, topic: str) -> None:
    """Partition 0: 20 records (10 past the short window); partition 1: LONG records."""
    create_topic_everywhere({"c1": servers}, topic, 2)
    p = Producer({"bootstrap.servers": servers, "linger.ms": 20})
    for partition, n in ((0, 2 * SHORT), (1, LONG)):
        for i in range(n):
            while True:
                try:
                    p.produce(topic, value=b"v" * 100, key=f"k{i}".encode(), partition=partition)
                    break
                except BufferError:
                    p.poll(0.05)
    assert p.flush(60) == 0


def _windows(topic: str) -> list[PartitionWindow]:
    return [PartitionWindow(topic, 0, 0, SHORT, (LevelRange(1, 0, SHORT),)),
            PartitionWindow(topic, 1, 0, LONG, (LevelRange(1, 0, LONG),))]


def _read(servers: str, topic: str, beyond: dict | None):
    consumer = Consumer(consumer_settings({"bootstrap.servers": servers}))
    handed: dict[int, list[int]] = {0: [], 1: []}
    try:
        read_windows(consumer, _windows(topic), lambda w, t, p, records: handed[p].extend(m.offset() for m in records),
                     poll_timeout_s=60, beyond=beyond)
        assigned = sorted(tp.partition for tp in consumer.assignment())
    finally:
        consumer.close()
    return handed, assigned


def test_a_complete_window_is_unassigned_while_the_others_are_read(local_kafka, unique_topic):
    servers = local_kafka.bootstrap["c1"]
    _load(servers, unique_topic)
    handed, assigned = _read(servers, unique_topic, beyond=None)
    assert handed == {0: list(range(SHORT)), 1: list(range(LONG))}
    # Partition 0 was complete after the first fetch and no longer fetched; partition 1's
    # window ended the loop, so it is still assigned (the task unassigns it before the flush).
    assert assigned == [1]


def test_a_complete_window_stays_assigned_while_copying_ahead_may_take_its_records(local_kafka, unique_topic):
    servers = local_kafka.bootstrap["c1"]
    _load(servers, unique_topic)
    beyond: dict = {}
    handed, assigned = _read(servers, unique_topic, beyond=beyond)
    assert handed == {0: list(range(SHORT)), 1: list(range(LONG))}
    assert assigned == [0, 1]
    assert [m.offset() for m in beyond.get((unique_topic, 0), [])] == list(range(SHORT, 2 * SHORT))
