"""Watermark reads on the driver: how many records a topic holds on a cluster."""

from __future__ import annotations

from typing import Mapping

from confluent_kafka import Consumer, KafkaException, TopicPartition

from treedist.kafka.errors import ClusterUnreachable


def watermark_consumer(client_config: Mapping[str, object]) -> Consumer:
    return Consumer({**client_config, "group.id": "treedist-watermarks", "enable.auto.commit": False})


def watermarks(cluster: str, consumer: Consumer, topic: str, timeout: float = 5.0) -> dict[int, tuple[int, int]]:
    """partition -> (low, high) watermarks of a topic; ClusterUnreachable names the cluster."""
    try:
        md = consumer.list_topics(topic, timeout=timeout)
        parts = md.topics[topic].partitions if topic in md.topics and md.topics[topic].error is None else {}
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout) for p in parts}
    except KafkaException as err:
        raise ClusterUnreachable(f"cluster {cluster!r}: cannot read watermarks of {topic!r}: {err}") from None


def record_count(cluster: str, consumer: Consumer, topic: str) -> int:
    return sum(high - low for low, high in watermarks(cluster, consumer, topic).values())
