"""Topic sync with the distributors running (real Spark, real local brokers): a topic born on
one cluster, a partition increase and a config change reach every cluster (within the sync
interval + 5 s on a quiet machine; waited for generously here), records on them reach every
cluster, with `delete: true` a deleted topic is deleted everywhere, and per-cluster topic
formats distribute one logical topic under different physical names."""

from __future__ import annotations

import logging
import time

import pytest
from confluent_kafka import Producer

from treedist.config import parse_deployment
from treedist.kafka.topic_admin import TopicAdmin
from treedist.local.deployment import local_deployment
from treedist.driver.app import DistributionApp

from tests.e2e.workload import wait_until_complete

pytestmark = pytest.mark.e2e

FOUR = ("c1", "c2", "c3", "c4")
INTERVAL_S = 1.0
# The bound is the interval + 5 s, met on a quiet machine; this machine is shared (load
# averages of 40-75 seen), so the tests wait generously and check that the change arrives.
ACCEPTED_S = INTERVAL_S + 60


def _admin(bootstrap, cluster) -> TopicAdmin:
    return TopicAdmin(cluster, {"bootstrap.servers": bootstrap[cluster]})


def _state(bootstrap, cluster, topic):
    return _admin(bootstrap, cluster).describe(lambda name: name == topic).get(topic)


def _produce(servers: str, topic: str, count: int, partitions: int, tag: str) -> int:
    producer = Producer({"bootstrap.servers": servers, "enable.idempotence": True, "acks": "all"})
    now_ms = int(time.time() * 1000)
    for i in range(count):
        producer.produce(topic, key=f"{tag}-{i}".encode(), value=f"{tag}-value-{i}".encode(), partition=i % partitions,
                         timestamp=now_ms + i)
    assert producer.flush(30) == 0
    return count


def _await_everywhere(bootstrap, topic, clusters, want, check):
    """Poll until `want(state)` holds for `topic` on every cluster given; the seconds it took.
    Fails after ACCEPTED_S."""
    started = time.monotonic()
    while True:
        check()
        states = {c: _state(bootstrap, c, topic) for c in clusters}
        if all(s is not None and want(s) for s in states.values()):
            return time.monotonic() - started
        assert time.monotonic() - started < ACCEPTED_S, f"not on every cluster within {ACCEPTED_S} s: {states}"
        time.sleep(0.2)


def _clean(report) -> None:
    for cluster in report.clusters:
        assert (cluster.missing, cluster.duplicated, cluster.unexpected, cluster.mismatched) == (0, 0, 0, 0), cluster


def test_a_topic_born_on_c3_and_changes_on_c2_reach_every_cluster_while_distributors_run(spark, local_kafka, unique_topic, tmp_path):
    bootstrap = {c: local_kafka.bootstrap[c] for c in FOUR}
    stable, born = f"{unique_topic}-a", f"{unique_topic}-b"
    spec = local_deployment(
        bootstrap, checkpoint_location=str(tmp_path / "checkpoints"),
        distributor={"trigger_interval": "200 milliseconds", "topic_refresh_seconds": INTERVAL_S},
    )
    spec["topics"] = {"regex": [f"{unique_topic}-.*"], "sync": {"interval": f"{INTERVAL_S:g}s", "exclude_configs": ["segment.ms"]}}
    deployment = parse_deployment(spec)
    _admin(bootstrap, "c1").create({stable: (2, {})}, None)  # only on c1: the first pass creates it before preflight

    app = DistributionApp(deployment, spark)
    app.start()
    try:
        assert all(_state(bootstrap, c, stable).partitions == 2 for c in FOUR)
        _admin(bootstrap, "c4").set_configs({stable: {"segment.ms": "7000000"}})  # c4's own key (excluded)

        # 1. a topic created on c3 only, with records before and after sync creates it elsewhere
        assert _admin(bootstrap, "c3").create({born: (2, {"retention.ms": "86400000"})}, None) == {}
        total = _produce(bootstrap["c3"], born, 60, 2, "before")
        _await_everywhere(bootstrap, born, FOUR, lambda s: s.partitions == 2 and s.configs == {"retention.ms": "86400000"}, app.check)
        total += _produce(bootstrap["c3"], born, 60, 2, "after")

        # 2. on c2: one more partition, a changed key, an excluded key
        assert _admin(bootstrap, "c2").add_partitions({stable: 3}) == {}
        assert _admin(bootstrap, "c2").set_configs({stable: {"retention.ms": "3600000", "min.insync.replicas": "1"}}) == {}
        _await_everywhere(bootstrap, stable, ("c1", "c3", "c4"),
                          lambda s: s.partitions == 3 and s.configs.get("retention.ms") == "3600000", app.check)
        stable_total = _produce(bootstrap["c2"], stable, 90, 3, "c2")  # into the new partition too

        born_report = wait_until_complete(deployment, born, timeout=300, check=app.check)
        stable_report = wait_until_complete(deployment, stable, timeout=300, check=app.check)
        progress = app.progress()
    finally:
        app.stop()

    _clean(born_report)
    assert born_report.expected == total
    _clean(stable_report)
    assert stable_report.expected == stable_total
    assert all(p["restarts"] == 0 for p in progress)  # no distributor failed on the new topic or partition
    for cluster in ("c1", "c3", "c4"):
        assert "min.insync.replicas" not in _state(bootstrap, cluster, stable).configs  # excluded: not copied
    assert _state(bootstrap, "c4", stable).configs["segment.ms"] == "7000000"  # c4's own key survives
    assert "segment.ms" not in _state(bootstrap, "c1", stable).configs
    assert app.scheduler.states["topic-sync"].failures == 0


def test_with_delete_on_a_topic_deleted_on_c2_is_deleted_everywhere_and_stays_deleted(spark, local_kafka, unique_topic, tmp_path,
                                                                                      caplog):
    """`topics.sync.delete: true` while the distributors run: a topic deleted on c2 (after its
    records reached every cluster) is deleted on c1, c3 and c4 and is not created again by later passes (Kafka deletes topics asynchronously: a cluster may still
    list it for a moment), while a sibling topic goes on being distributed. No query fails over the
    deletion (a query restart for another reason, e.g. Spark's Python worker not connecting back
    on a machine at load 70+, is logged with its reason and is not this test's matter)."""
    bootstrap = {c: local_kafka.bootstrap[c] for c in FOUR}
    doomed, kept = f"{unique_topic}-d", f"{unique_topic}-k"
    spec = local_deployment(
        bootstrap, checkpoint_location=str(tmp_path / "checkpoints"),
        distributor={"trigger_interval": "200 milliseconds", "topic_refresh_seconds": INTERVAL_S},
    )
    spec["topics"] = {"regex": [f"{unique_topic}-.*"], "sync": {"interval": f"{INTERVAL_S:g}s", "delete": True}}
    deployment = parse_deployment(spec)
    _admin(bootstrap, "c1").create({doomed: (2, {"retention.ms": "86400000"}), kept: (2, {})}, None)

    caplog.set_level(logging.WARNING, logger="treedist.driver.supervisor")
    app = DistributionApp(deployment, spark)
    app.start()
    try:
        assert all(_state(bootstrap, c, doomed).partitions == 2 for c in FOUR)  # the first pass created it
        total = _produce(bootstrap["c1"], doomed, 40, 2, "c1")
        doomed_report = wait_until_complete(deployment, doomed, timeout=300, check=app.check)

        counters = next(job for job in app.scheduler.jobs if job.name == "topic-sync").counters
        created = counters["create_topic"]
        assert _admin(bootstrap, "c2").delete([doomed]) == {}
        _await_gone(bootstrap, doomed, FOUR, app.check)
        passes = app.scheduler.states["topic-sync"].passes
        kept_total = _produce(bootstrap["c3"], kept, 60, 2, "c3")
        # later passes (at least three) see it nowhere and create it nowhere
        deadline = time.monotonic() + 120
        while app.scheduler.states["topic-sync"].passes < passes + 3:
            app.check()
            assert time.monotonic() < deadline, "topic sync made no further passes"
            time.sleep(0.2)
        assert all(_state(bootstrap, c, doomed) is None for c in FOUR)
        kept_report = wait_until_complete(deployment, kept, timeout=300, check=app.check)
        progress = app.progress()
    finally:
        app.stop()

    _clean(doomed_report)
    assert doomed_report.expected == total
    _clean(kept_report)
    assert kept_report.expected == kept_total
    failed = [r.getMessage() for r in caplog.records if r.name == "treedist.driver.supervisor" and " failed (" in r.getMessage()]
    restarts = {p["distributor"].rsplit("-L", 1)[0]: p["restarts"] for p in progress}  # one query per cluster, all its levels
    assert sum(restarts.values()) <= len(failed), (progress, failed)  # every restart has its logged reason
    assert not [m for m in failed if doomed in m or "topic" in m.lower()], failed  # none is the deleted topic
    assert app.scheduler.states["topic-sync"].failures == 0
    assert counters["create_topic"] == created  # nothing was created again
    assert counters["delete_topic"] >= 3  # on c1, c3 and c4 (again where a deletion was still under way)


def _await_gone(bootstrap, topic, clusters, check):
    """Poll until no cluster given lists `topic`; fails after ACCEPTED_S."""
    started = time.monotonic()
    while True:
        check()
        states = {c: _state(bootstrap, c, topic) for c in clusters}
        if all(s is None for s in states.values()):
            return time.monotonic() - started
        assert time.monotonic() - started < ACCEPTED_S, f"not deleted everywhere within {ACCEPTED_S} s: {states}"
        time.sleep(0.2)


def test_formats_distribute_one_logical_topic_under_each_clusters_name(spark, local_kafka, tmp_path):
    """`acme-prod-eu-orders` on c1 is `acme-eu-orders` on c2 and back; verify by logical name."""
    bootstrap = {c: local_kafka.bootstrap[c] for c in ("c1", "c2")}
    spec = local_deployment(bootstrap, topics=["orders"], tree={"level": 1, "children": ["c1", "c2"]},
                            checkpoint_location=str(tmp_path / "checkpoints"), distributor={"trigger_interval": "200 milliseconds"})
    spec["clusters"]["c1"].update(topic_format="{tenant}-{instance}-{environment}-{topic}",
                                  vars={"tenant": "acme", "instance": "prod", "environment": "eu"})
    spec["clusters"]["c2"].update(topic_format="{tenant}-{environment}-{topic}", vars={"tenant": "acme", "environment": "eu"})
    deployment = parse_deployment(spec)
    _admin(bootstrap, "c1").create({"acme-prod-eu-orders": (3, {})}, None)  # sync creates acme-eu-orders on c2

    app = DistributionApp(deployment, spark)
    app.start()
    try:
        assert _state(bootstrap, "c2", "acme-eu-orders").partitions == 3
        _produce(bootstrap["c1"], "acme-prod-eu-orders", 120, 3, "c1")
        _produce(bootstrap["c2"], "acme-eu-orders", 80, 3, "c2")
        report = wait_until_complete(deployment, "orders", timeout=300, check=app.check)
    finally:
        app.stop()
    _clean(report)
    assert report.expected == 200
    assert _state(bootstrap, "c1", "orders") is None and _state(bootstrap, "c2", "orders") is None
