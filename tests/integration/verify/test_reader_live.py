"""The verify reader on a real broker: the snapshot stops at the high watermarks taken when
the read starts, progress is reported up to the total, a partition that ends in offsets with
no record (an aborted transaction and its marker) completes, and a missing topic is named."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from treedist.config import parse_deployment
from treedist.local.deployment import local_deployment
from treedist.verify import OriginPartition, TopicNotFound, read_cluster

from tests.e2e.workload import create_topic_everywhere


@pytest.fixture
def deployment(local_kafka, unique_topic):
    return parse_deployment(local_deployment({"c1": local_kafka.bootstrap["c1"], "c2": local_kafka.bootstrap["c2"]},
                                             topics=[unique_topic]), "<test>")


def _produce(servers: str, topic: str, partition: int, n: int, headers=None) -> None:
    p = Producer({"bootstrap.servers": servers, "linger.ms": 0})
    for i in range(n):
        p.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=partition, headers=headers)
    assert p.flush(30) == 0


def test_the_snapshot_ends_at_the_start_of_read_watermarks_and_reports_progress(deployment, local_kafka,
                                                                              unique_topic) -> None:
    servers = local_kafka.bootstrap["c1"]
    create_topic_everywhere({"c1": servers}, unique_topic, 3)
    _produce(servers, unique_topic, 0, 30)
    _produce(servers, unique_topic, 1, 10, headers=[(deployment.origin_header, f"c2/{unique_topic}/1/4".encode()),
                                                    (deployment.copy_flags_header, b"0001")])
    seen: list[tuple[str, int, int]] = []

    def progress(cluster: str, done: int, total: int) -> None:
        if not seen:  # records arriving after the read started are not part of the snapshot
            _produce(servers, unique_topic, 0, 5)
            _produce(servers, unique_topic, 2, 5)
        seen.append((cluster, done, total))

    s = read_cluster(deployment, "c1", unique_topic, batch=7, progress=progress, idle_timeout=10)
    assert list(s.originals[0].offsets) == list(range(30))
    assert 2 not in s.originals  # the partition was empty when the read started
    assert len(s.copies[(1, OriginPartition("c2", unique_topic, 1))].offsets) == 10
    assert s.records == 40
    assert {(c, t) for c, _, t in seen} == {("c1", 40)}
    done = [d for _, d, _ in seen]
    assert done == sorted(done) and done[-1] == 40 and len(done) > 2  # monotone, ends complete


def test_a_partition_ending_in_an_aborted_transaction_completes(deployment, local_kafka, unique_topic) -> None:
    servers = local_kafka.bootstrap["c1"]
    create_topic_everywhere({"c1": servers}, unique_topic, 1)
    _produce(servers, unique_topic, 0, 2)
    txn = Producer({"bootstrap.servers": servers, "transactional.id": f"{unique_topic}-txn"})
    txn.init_transactions(30)
    txn.begin_transaction()
    for i in range(3):
        txn.produce(unique_topic, value=f"aborted{i}".encode(), partition=0)
    txn.flush(30)
    txn.abort_transaction(30)
    s = read_cluster(deployment, "c1", unique_topic, idle_timeout=5)
    assert list(s.originals[0].offsets) == [0, 1]  # offsets 2..5 hold aborted records and the marker


def test_a_missing_topic_is_an_error_naming_the_cluster(deployment, unique_topic) -> None:
    with pytest.raises(TopicNotFound, match=f"cluster 'c1' topic '{unique_topic}-absent'"):
        read_cluster(deployment, "c1", unique_topic + "-absent", idle_timeout=5)
