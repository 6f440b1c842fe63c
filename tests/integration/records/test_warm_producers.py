"""A Python worker's first task leaves an idle producer for every cluster the deployment
copies to (executor code, run in this process, on real brokers): a task of another query
that copies to one of them later takes that producer instead of building one mid-run."""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

from confluent_kafka import Producer
from pyspark.sql.streaming.datasource import ReadAllAvailable

from treedist.config import parse_deployment
from treedist.local.deployment import local_deployment
from treedist.records import client_pool as clients
from treedist.records.plan import plan_cluster
from treedist.records.distributor_source import DistributorReader
from treedist.records.task import run_task

from tests.e2e.workload import create_topic_everywhere, wait_for_counts

# c4's distributors copy to c5 (level 1) and to c1, c2 or c3 (level 3): never to c4 itself.
UNBALANCED = {
    "level": 3,
    "children": [
        {"level": 2, "children": ["c1", {"level": 1, "children": ["c2", "c3"]}]},
        {"level": 1, "children": ["c4", "c5"]},
    ],
}


def test_a_workers_first_task_warms_a_producer_for_every_target_of_the_deployment(local_kafka, unique_topic, tmp_path,
                                                                                 monkeypatch):
    monkeypatch.setattr(clients, "_WARMED", False)  # this process may have run tasks before
    monkeypatch.setattr(clients, "_IDLE_PRODUCERS", OrderedDict())
    bootstrap = dict(local_kafka.bootstrap)
    create_topic_everywhere(bootstrap, unique_topic, 1)
    deployment = parse_deployment(local_deployment(bootstrap, topics=[unique_topic], tree=UNBALANCED,
                                                   checkpoint_location=str(tmp_path / "ck")), "<test>")
    c4, c5 = plan_cluster(deployment, "c4"), plan_cluster(deployment, "c5")
    assert "c4" not in c4.producers and set(c4.warm_producers) == {"c1", "c2", "c3", "c4", "c5"}
    Path(c4.checkpoint).mkdir(parents=True)
    producer = Producer({"bootstrap.servers": bootstrap["c4"], "linger.ms": 0})
    for i in range(10):
        producer.produce(unique_topic, value=f"v{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    reader = DistributorReader(c4, counters=None)
    start = reader.initialOffset()
    [task] = reader.partitions(start, reader.latestOffset(start, ReadAllAvailable()))

    stats = run_task(c4, task)
    assert stats.records_in == 10 and stats.copied == 20  # to c5 and to c1
    idle = clients._IDLE_PRODUCERS
    assert {k for k in idle} == {clients._key(s) for s in c4.warm_producers.values()}
    warmed_c4 = idle[clients._key(c4.warm_producers["c4"])]

    # A worker warms once: its next task builds nothing.
    before = dict(idle)
    run_task(c4, task)
    assert all(idle[k] is before[k] for k in before)

    # c5's query copies to c4 (level 1): its task in this worker takes the warmed producer, which works.
    taken = clients.take_producer(c5.producers["c4"])
    try:
        assert taken is warmed_c4
        taken.raw.produce(unique_topic, value=b"through the warmed producer", partition=0)
        taken.finish()
    finally:
        taken.abandon()
        for p in idle.values():
            p.abandon()
    assert wait_for_counts({"c4": bootstrap["c4"]}, unique_topic, 11, timeout=30) == {"c4": 11}


def test_a_target_whose_producer_cannot_be_built_is_named_and_the_others_are_warmed(local_kafka, monkeypatch, caplog):
    monkeypatch.setattr(clients, "_WARMED", False)
    monkeypatch.setattr(clients, "_IDLE_PRODUCERS", OrderedDict())
    good = {"bootstrap.servers": local_kafka.bootstrap["c1"], "enable.idempotence": "true", "acks": "all"}
    bad = {"bootstrap.servers": local_kafka.bootstrap["c2"], "no.such.setting": "1"}
    with caplog.at_level("WARNING", logger="treedist.records.client_pool"):
        clients.warm_producers({"c2": bad, "c1": good}, in_use=[])
    try:
        assert list(clients._IDLE_PRODUCERS) == [clients._key(good)]
        assert "no idle producer for cluster 'c2'" in caplog.text and "no.such.setting" in caplog.text
    finally:
        for p in clients._IDLE_PRODUCERS.values():
            p.abandon()
