"""treedist.client.group_positions against a real broker: a group's own commit and a commit
made in treedist's format (what the offset committer writes) are told apart."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from treedist.client import group_positions
from treedist.topology.offsets import CommitMetadata

from tests.e2e.workload import create_topic_everywhere


# A Kafka broker creates and loads `__consumer_offsets` on a group's first use: until then its
# coordinator answers with one of these, and the commit is made again (bounded).
COORDINATOR_BUSY = {KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.NOT_COORDINATOR}
COMMIT_ATTEMPTS = 60


def _commit(servers: str, group: str, topic: str, partition: int, offset: int, metadata: str | None) -> None:
    consumer = Consumer({"bootstrap.servers": servers, "group.id": group, "enable.auto.commit": False})
    try:
        tp = TopicPartition(topic, partition, offset, metadata=metadata) if metadata is not None else \
            TopicPartition(topic, partition, offset)
        for attempt in range(1, COMMIT_ATTEMPTS + 1):
            try:
                consumer.commit(offsets=[tp], asynchronous=False)
                return
            except KafkaException as err:
                if err.args[0].code() not in COORDINATOR_BUSY or attempt == COMMIT_ATTEMPTS:
                    raise
                time.sleep(0.5)
    finally:
        consumer.close()


def test_a_groups_own_commit_and_a_translated_one_are_told_apart(local_kafka, unique_topic):
    servers = local_kafka.bootstrap["c1"]
    create_topic_everywhere({"c1": servers}, unique_topic, 3)
    group = f"app-{uuid.uuid4().hex[:8]}"
    _commit(servers, group, unique_topic, 0, 7, None)
    translated = CommitMetadata(flags=0b0101, origin_ts_ms=1_700_000_000_000, made_ms=1_700_000_001_000)
    _commit(servers, group, unique_topic, 2, 11, translated.encode())
    exact = CommitMetadata(flags=0b0001, origin_ts_ms=5, frontier=(("c2", 9),))
    other = f"app-{uuid.uuid4().hex[:8]}"
    _commit(servers, other, unique_topic, 1, 3, exact.encode())

    positions = group_positions({"bootstrap.servers": servers}, group, unique_topic)
    assert set(positions) == {0, 2}  # partition 1 was never committed by this group
    own, copied = positions[0], positions[2]
    assert (own.offset, own.translated, own.mode, own.copy_flags, own.origin_timestamp_ms) == (7, False, None, 0, None)
    assert (copied.offset, copied.translated, copied.mode, copied.copy_flags) == (11, True, "timestamp", 0b0101)
    assert copied.origin_timestamp_ms == 1_700_000_000_000 and copied.made_ms == 1_700_000_001_000
    assert group_positions({"bootstrap.servers": servers}, other, unique_topic)[1].mode == "exact"
    assert group_positions({"bootstrap.servers": servers}, group, "another-topic") == {}
