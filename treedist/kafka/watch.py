"""Reads for watching a running deployment (driver side, or any process): whether a
cluster answers, and the timestamps of the records at given positions.

Calls are bounded by `timeout_s`, retried with `with_retries` (few attempts: a status that
waits minutes for a dead cluster is no status), and errors name the cluster.
"""

from __future__ import annotations

import logging
import time
from typing import Mapping

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from treedist.kafka import clients
from treedist.kafka.admin import metadata
from treedist.kafka.errors import ClusterUnreachable
from treedist.kafka.watermarks import TopicPartitionKey

log = logging.getLogger(__name__)


def answers(admin: AdminClient, cluster: str, timeout_s: float) -> str | None:
    """None when `cluster` answers a metadata request, else the error (one line)."""
    try:
        metadata(cluster, admin, attempts=2, timeout=timeout_s)
        return None
    except ClusterUnreachable as err:
        return str(err).splitlines()[0]


def timestamps_at(client_config: Mapping[str, object], positions: Mapping[TopicPartitionKey, int], *, cluster: str,
                  timeout_s: float) -> dict[TopicPartitionKey, int]:
    """tp -> timestamp (ms) of the record at `positions[tp]`, read with a group-less
    consumer that commits nothing. A partition whose record did not arrive within
    `timeout_s` (deleted by retention, a transaction marker, a slow broker) is left out:
    the caller's age is then a lower bound, never an invention."""
    if not positions:
        return {}
    conf = {k: v for k, v in client_config.items() if k not in ("group.id", "enable.auto.commit")}
    consumer = clients.consumer(conf, **{"group.id": "treedist-status", "enable.auto.commit": False,
                                         "enable.auto.offset.store": False, "enable.partition.eof": False})
    try:
        consumer.assign([TopicPartition(tp.topic, tp.partition, offset) for tp, offset in positions.items()])
        found: dict[TopicPartitionKey, int] = {}
        deadline = time.monotonic() + timeout_s
        while len(found) < len(positions) and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=len(positions), timeout=0.2):
                if msg.error() is not None:
                    continue  # a fetch error on one partition: that partition is left out
                tp = TopicPartitionKey(msg.topic(), msg.partition())
                if tp in positions and tp not in found:
                    found[tp] = msg.timestamp()[1]
                    consumer.pause([TopicPartition(tp.topic, tp.partition)])
        return found
    except KafkaException as err:
        raise ClusterUnreachable(f"reading record timestamps on cluster {cluster!r} failed: {err}") from err
    finally:
        consumer.close()
