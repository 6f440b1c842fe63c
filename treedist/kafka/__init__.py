"""Kafka client helpers (confluent-kafka): admin, metadata with bounded retries, topics."""

from treedist.kafka.admin import admin_client, ensure_topics, metadata, partition_counts, wait_for_topics
from treedist.kafka.errors import ClusterUnreachable, KafkaLayerError, TopicMissing

__all__ = [
    "admin_client", "ensure_topics", "metadata", "partition_counts", "wait_for_topics",
    "ClusterUnreachable", "KafkaLayerError", "TopicMissing",
]
