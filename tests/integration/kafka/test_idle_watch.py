"""The idle watch (`treedist.kafka.idle_watch`) against a real Kafka broker: quiet while
nothing arrives, woken by the first record past the armed offsets and by its full-check
interval (which is what finds a topic deleted under it: librdkafka reports no error for an
assigned partition whose topic went away)."""

from __future__ import annotations

import time

from confluent_kafka.admin import NewTopic

from treedist.kafka import clients
from treedist.kafka.idle_watch import IdleWatch
from treedist.kafka.watermarks import OffsetReader, TopicPartitionKey

# Bounds for things that happen within a broker round trip; never a measure of speed.
WAIT_S = 20.0


def _topic(bootstrap: str, topic: str, records: int) -> dict[TopicPartitionKey, int]:
    """`topic` of 3 partitions with `records` records in partition 0; its latest offsets."""
    admin = clients.admin({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(30)
    producer = clients.producer({"bootstrap.servers": bootstrap})
    for i in range(records):
        producer.produce(topic, f"v{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    reader = OffsetReader({"bootstrap.servers": bootstrap})
    return reader.offsets([TopicPartitionKey(topic, p) for p in range(3)], "latest")


def _woke_within(watch: IdleWatch, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if watch.woke(wait_s=0.2):  # waits in the consumer: returns at a record
            return True
    return False


def test_quiet_until_a_record_lands_past_the_armed_offsets(local_kafka, unique_topic):
    bootstrap = local_kafka.bootstrap["c3"]
    latest = _topic(bootstrap, unique_topic, 5)
    assert latest[TopicPartitionKey(unique_topic, 0)] == 5
    watch = IdleWatch({"bootstrap.servers": bootstrap}, cluster="c3", full_check_s=3600)
    try:
        assert watch.arm(latest) and watch.armed
        # The 5 records below the armed offsets are not news: a few long polls pass quietly.
        assert not _woke_within(watch, 2.0)
        producer = clients.producer({"bootstrap.servers": bootstrap})
        producer.produce(unique_topic, b"new", partition=2)
        assert producer.flush(30) == 0
        assert _woke_within(watch, WAIT_S)
        watch.disarm()
        assert not watch.armed and watch.woke()  # disarmed: the planner looks every trigger
        # Armed again past everything: quiet again.
        latest[TopicPartitionKey(unique_topic, 2)] = 1
        assert watch.arm(latest)
        assert not _woke_within(watch, 2.0)
    finally:
        watch.close()


def test_the_full_check_interval_wakes_it_and_nothing_to_watch_does_not_arm(local_kafka, unique_topic):
    bootstrap = local_kafka.bootstrap["c3"]
    latest = _topic(bootstrap, unique_topic, 0)
    now = [100.0]
    watch = IdleWatch({"bootstrap.servers": bootstrap}, cluster="c3", full_check_s=10, clock=lambda: now[0])
    try:
        assert not watch.arm({}) and not watch.armed
        assert watch.arm(latest)
        now[0] += 9.9
        assert not watch.woke()
        now[0] += 0.1
        assert watch.woke()
    finally:
        watch.close()
