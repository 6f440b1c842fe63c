"""The query's planner (DistributorReader.latestOffset, driver) on a real broker when a
partition has fewer offsets than were read: a broker that lost its last records goes on from
its latest offset; a topic deleted and created again is read from its start, even when the new
topic already holds more records than were read of the old one."""

from __future__ import annotations

import logging

from confluent_kafka import Producer
from pyspark.sql.streaming.datasource import ReadAllAvailable

from treedist.config import parse_deployment
from treedist.kafka import admin_client
from treedist.local.deployment import local_deployment
from treedist.records.plan import plan_cluster
from treedist.records.positions import LevelPositions, batch_windows
from treedist.records.distributor_source import DistributorReader
from treedist.kafka.read_positions import KafkaOffsets, TopicPartitionKey

from tests.e2e.workload import create_topic_everywhere


def _setup(local_kafka, topic):
    bootstrap = {c: local_kafka.bootstrap[c] for c in ("c1", "c2")}
    create_topic_everywhere(bootstrap, topic, 1)
    deployment = parse_deployment(local_deployment(bootstrap, topics=[topic]), "<test>")
    return bootstrap, DistributorReader(plan_cluster(deployment, "c1"), counters=None)


def _produce(servers: str, topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": servers, "linger.ms": 0})
    for i in range(n):
        p.produce(topic, value=f"v{i}".encode(), partition=0)
    assert p.flush(30) == 0


def _at(tp: TopicPartitionKey, offset: int) -> dict:
    return LevelPositions({1: KafkaOffsets({tp: offset})}).to_dict()


def _position(end: dict, tp: TopicPartitionKey) -> int:
    return LevelPositions.from_dict(end).levels[1].get(tp)


def test_a_broker_that_lost_its_last_records_is_followed_from_its_latest_offset(local_kafka, unique_topic, caplog):
    bootstrap, reader = _setup(local_kafka, unique_topic)
    tp = TopicPartitionKey(unique_topic, 0)
    _produce(bootstrap["c1"], unique_topic, 10)
    start = _at(tp, 25)  # read up to 25, the broker has 10 now
    with caplog.at_level(logging.WARNING, logger="treedist.records.distributor_source"):
        end = reader.latestOffset(start, ReadAllAvailable())
    assert _position(end, tp) == 10
    assert batch_windows(LevelPositions.from_dict(start), LevelPositions.from_dict(end)) == []
    assert any("has fewer records (latest offset 10) than were read (25)" in r.getMessage() for r in caplog.records)
    _produce(bootstrap["c1"], unique_topic, 5)  # new records after the loss are copied
    after = reader.latestOffset(end, ReadAllAvailable())
    [window] = batch_windows(LevelPositions.from_dict(end), LevelPositions.from_dict(after))
    assert (window.from_offset, window.until_offset) == (10, 15)


def test_a_topic_deleted_and_created_again_is_read_from_its_start(local_kafka, unique_topic, caplog):
    bootstrap, reader = _setup(local_kafka, unique_topic)
    tp = TopicPartitionKey(unique_topic, 0)
    _produce(bootstrap["c1"], unique_topic, 10)
    end = reader.latestOffset(_at(tp, 8), ReadAllAvailable())
    assert _position(end, tp) == 10

    admin = admin_client({"bootstrap.servers": bootstrap["c1"]})
    [f.result(30) for f in admin.delete_topics([unique_topic]).values()]
    gone = reader.latestOffset(end, ReadAllAvailable())
    assert _position(gone, tp) == 10  # nothing to read: the position stays
    create_topic_everywhere({"c1": bootstrap["c1"]}, unique_topic, 1)
    _produce(bootstrap["c1"], unique_topic, 12)  # more than were read of the old topic

    with caplog.at_level(logging.WARNING, logger="treedist.records.distributor_source"):
        reset = reader.latestOffset(gone, ReadAllAvailable())
    assert _position(reset, tp) == 0
    assert any("was deleted and created again" in r.getMessage() for r in caplog.records)
    after = reader.latestOffset(reset, ReadAllAvailable())
    [window] = batch_windows(LevelPositions.from_dict(reset), LevelPositions.from_dict(after))
    assert (window.from_offset, window.until_offset) == (0, 12)  # every record of the new topic
