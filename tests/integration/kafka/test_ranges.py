"""The bounded range reader (`treedist.kafka.ranges`) and the delivery-proving producer
(`treedist.kafka.producer`) against a real broker."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import NewTopic

from treedist.kafka import clients, ranges
from treedist.kafka.producer import DeliveryFailed, DeliveryProducer


def _topic_with(bootstrap: str, topic: str, partitions: int, records: int) -> None:
    """`topic` with `records` records in partition 0."""
    admin = clients.admin({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    producer = clients.producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(records):
        producer.produce(topic, f"v{i}".encode(), partition=0)
    assert producer.flush(30) == 0


def _offsets(bootstrap: str, topic: str, start: int, stop: int, **kwargs) -> list[int]:
    consumer = clients.consumer({"bootstrap.servers": bootstrap, "group.id": "t-ranges", "enable.partition.eof": True,
                                 "auto.offset.reset": "error", "enable.auto.commit": False})
    try:
        return [m.offset() for run in ranges.read_range(consumer, topic, 0, start, stop, **kwargs) for m in run]
    finally:
        consumer.close()


def test_a_range_is_read_exactly_in_runs_of_at_most_the_batch(local_kafka, unique_topic):
    bootstrap = local_kafka.bootstrap["c2"]
    _topic_with(bootstrap, unique_topic, 1, 40)
    assert _offsets(bootstrap, unique_topic, 3, 29, stall_s=10, batch=7) == list(range(3, 29))
    assert _offsets(bootstrap, unique_topic, 5, 5, stall_s=10) == []


def test_past_the_end_it_stalls_naming_the_range_unless_the_end_completes_it(local_kafka, unique_topic):
    bootstrap = local_kafka.bootstrap["c2"]
    _topic_with(bootstrap, unique_topic, 1, 5)
    assert _offsets(bootstrap, unique_topic, 2, 50, stall_s=10, end_is_complete=True) == [2, 3, 4]
    with pytest.raises(ranges.RangeStalled, match=rf"{unique_topic}\[0\] offsets \[2, 9\): no progress .* at offset 5"):
        _offsets(bootstrap, unique_topic, 2, 9, stall_s=1.0)


def test_the_producer_names_a_missing_target_and_proves_its_deliveries(local_kafka, unique_topic):
    bootstrap = local_kafka.bootstrap["c2"]
    _topic_with(bootstrap, unique_topic, 2, 0)
    producer = DeliveryProducer(clients.no_loss_producer_settings({"bootstrap.servers": bootstrap}))
    with pytest.raises(DeliveryFailed, match=rf"target topic {unique_topic!r} has 2 partitions; partition 2"):
        producer.check_targets({unique_topic: 2})
    with pytest.raises(DeliveryFailed, match="'no-such-topic' does not exist"):
        producer.check_targets({"no-such-topic": -1})
    producer.check_targets({unique_topic: 1})
    for i in range(10):
        producer.raw.produce(unique_topic, f"v{i}".encode(), None, i % 2)
    producer.count(10, 0)
    producer.finish()
    assert _offsets(bootstrap, unique_topic, 0, 5, stall_s=10) == [0, 1, 2, 3, 4]
