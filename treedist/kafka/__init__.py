"""Kafka clients (confluent-kafka), built here and nowhere else: `clients` (the factory: role
defaults and the cluster's settings merged once), `producer` (the delivery-proving producer of
the distributor and the sink), `offsets` (the one reader of partitions, offsets and
watermarks), `ranges` (the one bounded range reader), admin, metadata with bounded retries,
topics."""

from treedist.kafka.admin import admin_client, answers, ensure_topics, metadata, partition_counts, wait_for_topics
from treedist.kafka.errors import ClusterUnreachable, KafkaLayerError, TopicMissing

__all__ = [
    "admin_client", "answers", "ensure_topics", "metadata", "partition_counts", "wait_for_topics",
    "ClusterUnreachable", "KafkaLayerError", "TopicMissing",
]
