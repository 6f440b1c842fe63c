"""A cluster's query on real local brokers and real Spark: one read per record for all of the
cluster's distributors, everything preserved, counted per distributor; a failed delivery
fails the batch and commits nothing; a restart resumes from the query's checkpoint, and a
first start resumes from the per-(cluster, level) checkpoints of the version before read-once.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException

from treedist.config import parse_deployment
from treedist.local import LocalClusters
from treedist.local.deployment import local_deployment
from treedist.driver.app import DistributionApp
from treedist.records.counters import ClusterCounters
from treedist.records.plan import plan_cluster
from treedist.driver.query import batch_in_flight, start_cluster_query
from treedist.verify import verify_topic

from tests.e2e.workload import create_topic_everywhere, produce_concurrently, produce_malformed_flags, wait_for_counts

CLUSTERS = ["c1", "c2"]
TREE = {"level": 1, "children": CLUSTERS}
PARTITIONS = 3
LEGACY = Path(__file__).resolve().parents[2] / "data" / "legacy_checkpoint"


def _deployment(bootstrap, topic, checkpoints, **distributor):
    spec = local_deployment(
        bootstrap, topics=[topic], tree=TREE, checkpoint_location=str(checkpoints),
        distributor={"trigger_interval": "200 milliseconds", **distributor},
    )
    return parse_deployment(spec)


def _run_until(app, bootstrap, topic, total):
    """Start `app`, wait until every cluster holds `total` records (a dict: per cluster) and
    the queries are idle; the counts after that."""
    app.start()
    try:
        expected = total if isinstance(total, dict) else {c: total for c in bootstrap}
        for cluster, count in expected.items():
            wait_for_counts({cluster: bootstrap[cluster]}, topic, count, timeout=240, check=app.check)
        _await_settled(app)
        counts = wait_for_counts(bootstrap, topic, 0, timeout=0)
        return counts, {p["distributor"]: p for p in app.progress()}
    finally:
        app.stop()


def _await_settled(app, quiet_seconds=3.0, timeout=60.0):
    """Wait until every query has been idle, with unchanged counters, for `quiet_seconds`.

    One idle sample is not enough: the copies that made a target's count complete land on
    that target between its triggers, and its query reports idle (its last trigger found
    nothing) until the next trigger, 200 ms later, reads them (CI failed once on that:
    c2-L1 had read 300 of 605)."""
    deadline = time.monotonic() + timeout
    quiet_since, last = None, None
    while time.monotonic() < deadline:
        now = time.monotonic()
        snapshot = [(run.plan.cluster, run.counters.snapshot()) for run in app.running.values()]
        if app.idle() and snapshot == last:
            quiet_since = quiet_since or now
            if now - quiet_since >= quiet_seconds:
                return
        else:
            quiet_since = None
        last = snapshot
        time.sleep(0.1)


def _report(deployment, topic):
    return {c.cluster: c for c in verify_topic(deployment, topic).clusters}


def _assert_each_record_once(deployment, topic):
    for cluster in _report(deployment, topic).values():
        # mismatched covers key, value, timestamp, partition and the other headers.
        assert (cluster.missing, cluster.duplicated, cluster.unexpected, cluster.order_violations, cluster.mismatched) == (
            0, 0, 0, 0, 0,
        ), cluster


def test_every_record_is_copied_once_with_everything_preserved(spark, local_kafka, unique_topic, tmp_path):
    bootstrap = {c: local_kafka.bootstrap[c] for c in CLUSTERS}
    deployment = _deployment(bootstrap, unique_topic, tmp_path / "checkpoints")
    create_topic_everywhere(bootstrap, unique_topic, PARTITIONS)
    app = DistributionApp(deployment, spark)

    malformed = produce_malformed_flags(bootstrap["c1"], unique_topic, 5)
    total = produce_concurrently(bootstrap, unique_topic, 300, PARTITIONS) + malformed
    counts, by_name = _run_until(app, bootstrap, unique_topic, total)

    assert counts == {c: total for c in CLUSTERS}
    assert sorted(run.query.name for run in app.running.values()) == ["c1-messages", "c2-messages"]
    _assert_each_record_once(deployment, unique_topic)
    # Each distributor reads every record of its cluster (originals and copies) and copies
    # the originals only; the malformed headers are seen (and counted) on c1 alone.
    assert {n: p["records_in"] for n, p in by_name.items()} == {"c1-L1": total, "c2-L1": total}
    assert {n: p["copied"] for n, p in by_name.items()} == {"c1-L1": 300 + malformed, "c2-L1": 300}
    assert {n: p["malformed"] for n, p in by_name.items()} == {"c1-L1": malformed, "c2-L1": 0}


def test_a_restart_copies_only_what_arrived_since_the_last_commit(spark, local_kafka, unique_topic, tmp_path):
    bootstrap = {c: local_kafka.bootstrap[c] for c in CLUSTERS}
    deployment = _deployment(bootstrap, unique_topic, tmp_path / "checkpoints")
    create_topic_everywhere(bootstrap, unique_topic, PARTITIONS)

    total = 0
    for per_cluster in (200, 100, 50):
        total += produce_concurrently(bootstrap, unique_topic, per_cluster, PARTITIONS)
        counts, by_name = _run_until(DistributionApp(deployment, spark), bootstrap, unique_topic, total)
        assert counts == {c: total for c in CLUSTERS}
        assert sum(p["copied"] for p in by_name.values()) == per_cluster * len(CLUSTERS)
    _assert_each_record_once(deployment, unique_topic)


def test_a_failed_delivery_fails_the_batch_and_a_restart_delivers_it(spark, local_kafka, unique_topic, tmp_path):
    """The target stops answering after a first committed batch: every attempt of the next
    task fails to deliver, the query fails and commits nothing more; once the target is back,
    a restart from the checkpoint copies every record (at least once: no record is lost)."""
    own = tmp_path / "target"
    target = LocalClusters.start(["c2"], own)  # a broker of its own: this test stops it
    try:
        bootstrap = {"c1": local_kafka.bootstrap["c1"], "c2": target.bootstrap["c2"]}
        deployment = _deployment(bootstrap, unique_topic, tmp_path / "checkpoints", delivery_timeout_ms=3000)
        create_topic_everywhere(bootstrap, unique_topic, PARTITIONS)
        first = produce_concurrently({"c1": bootstrap["c1"]}, unique_topic, 150, PARTITIONS)
        plan = plan_cluster(deployment, "c1")
        counters = ClusterCounters(spark, plan)
        checkpoint = Path(plan.checkpoint)

        query = start_cluster_query(spark, plan, counters, 0.2)
        try:
            wait_for_counts({"c2": bootstrap["c2"]}, unique_topic, first, timeout=180)
            _await_committed(checkpoint, query)
            committed = _batch_files(checkpoint / "commits")
            target.stop()
            total = first + produce_concurrently({"c1": bootstrap["c1"]}, unique_topic, 150, PARTITIONS)
            with pytest.raises(StreamingQueryException):
                query.awaitTermination(180)
        finally:
            query.stop()
        _await_no_running_tasks(spark, timeout=60)
        assert _batch_files(checkpoint / "commits") == committed  # the failed batch was planned but not committed
        assert len(_batch_files(checkpoint / "offsets")) == len(committed) + 1
        assert counters.snapshot()["c1-L1"]["copied"] == first  # failed tasks' accumulator updates are dropped

        target = LocalClusters.start(["c2"], own)  # same data dir; the port may differ (TIME_WAIT)
        bootstrap["c2"] = target.bootstrap["c2"]
        deployment = _deployment(bootstrap, unique_topic, tmp_path / "checkpoints", delivery_timeout_ms=3000)
        plan = plan_cluster(deployment, "c1")
        counters = ClusterCounters(spark, plan)
        query = start_cluster_query(spark, plan, counters, 0.2)  # same checkpoint
        try:
            counts = wait_for_counts({"c2": bootstrap["c2"]}, unique_topic, total, timeout=180)
            _await_committed(checkpoint, query, len(committed) + 1)
        finally:
            query.stop()
        assert counts == {"c2": total}
        assert counters.snapshot()["c1-L1"]["copied"] == total - first  # the failed batch, replayed
        _assert_each_record_once(deployment, unique_topic)
    finally:
        target.stop()


def test_a_topic_missing_on_its_target_waits_unread_and_is_copied_once_it_exists(spark, local_kafka, unique_topic, tmp_path):
    """A partition is taken only once it exists on every target (topic sync creates it there):
    until then the query runs on without planning it, and nothing fails."""
    bootstrap = {c: local_kafka.bootstrap[c] for c in CLUSTERS}
    deployment = _deployment(bootstrap, unique_topic, tmp_path / "checkpoints", topic_refresh_seconds=1.0)
    create_topic_everywhere({"c1": bootstrap["c1"]}, unique_topic, PARTITIONS)
    total = produce_concurrently({"c1": bootstrap["c1"]}, unique_topic, 150, PARTITIONS)
    plan = plan_cluster(deployment, "c1")
    counters = ClusterCounters(spark, plan)
    query = start_cluster_query(spark, plan, counters, 0.2)
    try:
        deadline = time.monotonic() + 8  # several refreshes of the listing while the target lacks the topic
        while time.monotonic() < deadline:
            assert query.isActive, query.exception()
            time.sleep(0.5)
        assert counters.snapshot()["c1-L1"]["records_in"] == 0  # the partitions were not read
        create_topic_everywhere({"c2": bootstrap["c2"]}, unique_topic, PARTITIONS)
        counts = wait_for_counts({"c2": bootstrap["c2"]}, unique_topic, total, timeout=180)
    finally:
        query.stop()
    assert counts == {"c2": total}
    _assert_each_record_once(deployment, unique_topic)


def _await_committed(checkpoint: Path, query, at_least: int = 1, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while len(_batch_files(checkpoint / "commits")) < at_least or batch_in_flight(query.status):
        assert time.monotonic() < deadline, "no committed batch"
        assert query.isActive, query.exception()
        time.sleep(0.2)


def test_checkpoints_of_the_version_before_read_once_resume_with_at_most_one_batch_replayed(spark, tmp_path):
    """tests/data/legacy_checkpoint holds two brokers' data and the per-(cluster, level)
    checkpoints `c1-L1` and `c2-L1` written by the pre-read-once version (commit a5af537,
    capture script beside them): c1 had 100 originals per partition and c2 50, all
    distributed with max_records_per_trigger 150; c1-L1's batch 1 (offsets 50-99 of each
    partition, 150 records) was then left planned and uncommitted, as a crash after its
    copies landed leaves it; 20 more records per partition were produced on c1 afterwards.
    The new query must copy the 60 new records, replay only that one batch, and lose nothing.

    On noida-db: the brokers' data was captured when noida-db was the only local engine (its
    `kafka.json` files), and the checkpoints' offsets are positions in that data; an Apache
    Kafka node cannot read it."""
    shutil.copytree(LEGACY, tmp_path / "state")
    clusters = LocalClusters.start(CLUSTERS, tmp_path / "state" / "brokers", engine="noida")
    try:
        bootstrap = clusters.bootstrap
        deployment = _deployment(bootstrap, "legacy-orders", tmp_path / "state" / "checkpoints", max_records_per_trigger=150)
        # c2: 450 before, the replayed batch (150) again, the 60 new records
        counts, by_name = _run_until(DistributionApp(deployment, spark), bootstrap, "legacy-orders", {"c1": 510, "c2": 660})
        report = _report(deployment, "legacy-orders")
    finally:
        clusters.stop()

    assert counts == {"c1": 510, "c2": 660}  # 3 x (100 + 20) from c1, 3 x 50 from c2, 150 replayed
    assert by_name["c1-L1"]["copied"] == 150 + 60  # the uncommitted batch again, and the new records
    assert by_name["c2-L1"]["copied"] == 0  # c2-L1 had committed everything
    for name, cluster in report.items():
        assert (cluster.missing, cluster.unexpected, cluster.order_violations, cluster.mismatched) == (0, 0, 0, 0), cluster
    assert report["c1"].duplicated == 0
    assert report["c2"].duplicated == 150  # exactly one batch replayed


def test_copies_go_to_each_clusters_name_of_the_topic(spark, local_kafka, unique_topic, tmp_path):
    """Per-cluster topic formats: `acme-prod-eu-<t>` on c1 is `acme-eu-<t>` on c2, and back."""
    bootstrap = {c: local_kafka.bootstrap[c] for c in CLUSTERS}
    spec = local_deployment(
        bootstrap, topics=[unique_topic], tree=TREE, checkpoint_location=str(tmp_path / "checkpoints"),
        distributor={"trigger_interval": "200 milliseconds"},
    )
    spec["clusters"]["c1"].update(topic_format="{tenant}-{instance}-{environment}-{topic}",
                                  vars={"tenant": "acme", "instance": "prod", "environment": "eu"})
    spec["clusters"]["c2"].update(topic_format="{tenant}-{environment}-{topic}", vars={"tenant": "acme", "environment": "eu"})
    deployment = parse_deployment(spec)
    names = {"c1": f"acme-prod-eu-{unique_topic}", "c2": f"acme-eu-{unique_topic}"}
    for cluster, name in names.items():
        create_topic_everywhere({cluster: bootstrap[cluster]}, name, PARTITIONS)
        produce_concurrently({cluster: bootstrap[cluster]}, name, 120 if cluster == "c1" else 80, PARTITIONS)
    create_topic_everywhere({"c1": bootstrap["c1"]}, unique_topic, 1)  # a topic that does not fit c1's format

    app = DistributionApp(deployment, spark)
    app.start()
    try:
        counts = {c: wait_for_counts({c: bootstrap[c]}, names[c], 200, timeout=180, check=app.check)[c] for c in CLUSTERS}
        deadline = time.monotonic() + 30
        while not app.idle() and time.monotonic() < deadline:
            time.sleep(0.2)
        progress = {p["distributor"]: p for p in app.progress()}
    finally:
        app.stop()
    assert counts == {"c1": 200, "c2": 200}
    assert {n: p["copied"] for n, p in progress.items()} == {"c1-L1": 120, "c2-L1": 80}


def _await_no_running_tasks(spark, timeout: float) -> None:
    tracker = spark.sparkContext._jsc.sc().statusTracker()
    deadline = time.monotonic() + timeout
    while any(info.numRunningTasks() for info in tracker.getExecutorInfos()):
        assert time.monotonic() < deadline, "tasks of the failed query still running"
        time.sleep(0.2)


def _batch_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.isdigit()) if directory.exists() else []
