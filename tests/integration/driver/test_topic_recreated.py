"""A source topic deleted and created again between two batches, on Kafka (topic IDs): the
new topic is read from its start, whatever its offsets are compared with what was read of the
old one (fewer: not a lost tail; more: its first records not skipped).

The planner alone (DistributorReader.latestOffset, driver) between two calls that see no gap
in the listing, and a real query on real Spark restarted from its checkpoint: every record of
the new topic is copied, nothing of the old one twice."""

from __future__ import annotations

import logging
import time
from collections import Counter
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import NewTopic
from pyspark.sql.streaming.datasource import ReadAllAvailable

from treedist.config import parse_deployment
from treedist.kafka import admin_client
from treedist.local.deployment import local_deployment
from treedist.records.counters import ClusterCounters
from treedist.records.plan import plan_cluster
from treedist.records.positions import LevelPositions, batch_windows, topic_ids
from treedist.driver.query import batch_in_flight, start_cluster_query
from treedist.records.distributor_source import DistributorReader
from treedist.kafka.read_positions import TopicPartitionKey

from tests.e2e.workload import create_topic_everywhere, wait_for_counts

CLUSTERS = ("c1", "c2")


def _produce(servers: str, topic: str, counts: dict[int, int], tag: str) -> None:
    """counts: partition -> records, valued `<tag>-<partition>-<i>`."""
    p = Producer({"bootstrap.servers": servers, "linger.ms": 0, "enable.idempotence": True})
    for partition, n in counts.items():
        for i in range(n):
            p.produce(topic, value=f"{tag}-{partition}-{i}".encode(), partition=partition)
    assert p.flush(30) == 0


def _recreate(servers: str, topic: str, partitions: int) -> None:
    """Delete `topic` and create it again once Kafka has deleted it (asynchronously): a create
    while the deletion is under way fails with TOPIC_ALREADY_EXISTS; retried, bounded."""
    admin = admin_client({"bootstrap.servers": servers})
    [f.result(30) for f in admin.delete_topics([topic], operation_timeout=30).values()]
    last: object = "still listed"
    for _ in range(120):
        if topic not in admin.list_topics(timeout=10).topics:
            try:
                admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=30)[topic].result(30)
                return
            except KafkaException as err:
                last = err
        time.sleep(0.5)
    raise AssertionError(f"{topic} could not be created again on {servers}: {last}")


def _values(servers: str, topic: str) -> Counter:
    """Every record value of `topic` (all partitions, from the start), counted."""
    consumer = Consumer({"bootstrap.servers": servers, "group.id": f"read-{topic}-{time.monotonic_ns()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False, "enable.partition.eof": True})
    md = consumer.list_topics(topic, timeout=10)
    partitions = set(md.topics[topic].partitions)
    consumer.subscribe([topic])
    seen: Counter = Counter()
    ended: set[int] = set()
    try:
        while ended != partitions:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == -191:  # _PARTITION_EOF
                    ended.add(msg.partition())
                    continue
                raise KafkaException(msg.error())
            seen[msg.value().decode()] += 1
    finally:
        consumer.close()
    return seen


def test_the_planner_reads_a_topic_recreated_between_two_batches_from_its_start(local_kafka, unique_topic, caplog):
    bootstrap = {c: local_kafka.bootstrap[c] for c in CLUSTERS}
    create_topic_everywhere(bootstrap, unique_topic, 2)
    deployment = parse_deployment(local_deployment(bootstrap, topics=[unique_topic]), "<test>")
    reader = DistributorReader(plan_cluster(deployment, "c1"), counters=None)
    p0, p1 = TopicPartitionKey(unique_topic, 0), TopicPartitionKey(unique_topic, 1)
    _produce(bootstrap["c1"], unique_topic, {0: 20, 1: 20}, "old")
    first = reader.initialOffset()
    end = reader.latestOffset(first, ReadAllAvailable())
    old_id = topic_ids(end)[unique_topic]
    assert {tp: o for tp, o in LevelPositions.from_dict(end).levels[1].positions.items()} == {p0: 20, p1: 20}

    _recreate(bootstrap["c1"], unique_topic, 2)  # the listing (cached) never sees it gone
    _produce(bootstrap["c1"], unique_topic, {0: 5, 1: 30}, "new")  # fewer, and more, than were read
    with caplog.at_level(logging.WARNING, logger="treedist.records.distributor_source"):
        reset = reader.latestOffset(end, ReadAllAvailable())
    assert topic_ids(reset)[unique_topic] != old_id
    assert LevelPositions.from_dict(reset).levels[1].positions == {p0: 0, p1: 0}
    assert sum("topic ID changed" in r.getMessage() and "cluster c1" in r.getMessage() for r in caplog.records) == 2
    assert not any("fewer records" in r.getMessage() for r in caplog.records)

    after = reader.latestOffset(reset, ReadAllAvailable())
    windows = batch_windows(LevelPositions.from_dict(reset), LevelPositions.from_dict(after))
    assert [(w.partition, w.from_offset, w.until_offset) for w in windows] == [(0, 0, 5), (1, 0, 30)]
    assert reader.latestOffset(after, ReadAllAvailable()) == after  # the same IDs: nothing new, no batch


def test_a_query_copies_every_record_of_a_topic_recreated_while_it_was_stopped(spark, local_kafka, unique_topic, tmp_path):
    """Between the query's last batch and the first after its restart (no listing in between,
    no state but the checkpoint) the source topic is deleted and created again."""
    bootstrap = {c: local_kafka.bootstrap[c] for c in CLUSTERS}
    spec = local_deployment(bootstrap, topics=[unique_topic], tree={"level": 1, "children": list(CLUSTERS)},
                            checkpoint_location=str(tmp_path / "checkpoints"),
                            distributor={"trigger_interval": "200 milliseconds"})
    deployment = parse_deployment(spec)
    create_topic_everywhere(bootstrap, unique_topic, 2)
    _produce(bootstrap["c1"], unique_topic, {0: 40, 1: 40}, "old")
    _run_until_copied(spark, deployment, bootstrap["c2"], unique_topic, 80)

    _recreate(bootstrap["c1"], unique_topic, 2)
    _produce(bootstrap["c1"], unique_topic, {0: 15, 1: 60}, "new")  # p0 below, p1 past what was read
    _run_until_copied(spark, deployment, bootstrap["c2"], unique_topic, 80 + 75)

    copied = _values(bootstrap["c2"], unique_topic)
    expected = Counter([f"old-{p}-{i}" for p in (0, 1) for i in range(40)]
                       + [f"new-0-{i}" for i in range(15)] + [f"new-1-{i}" for i in range(60)])
    assert copied == expected  # every record of the new topic, nothing of the old one twice


def _run_until_copied(spark, deployment, target: str, topic: str, total: int) -> None:
    """Run c1's query until c2 holds `total` records and a batch past them is committed."""
    plan = plan_cluster(deployment, "c1")
    query = start_cluster_query(spark, plan, ClusterCounters(spark, plan), deployment.distributor.trigger_interval)
    try:
        wait_for_counts({"c2": target}, topic, total, timeout=240)
        commits = Path(plan.checkpoint) / "commits"
        deadline = time.monotonic() + 120
        while batch_in_flight(query.status) or not any(commits.glob("[0-9]*")):
            assert query.isActive, query.exception()
            assert time.monotonic() < deadline, "no committed batch"
            time.sleep(0.2)
        query.processAllAvailable()
    finally:
        query.stop()
