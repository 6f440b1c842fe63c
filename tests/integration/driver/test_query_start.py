"""When the application may release the next query: once the previous one planned its first
read (`first_read_planned`), read off real streaming queries on the shared SparkSession; and
what a held query does before its release (`ClusterPlan.hold_file`)."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

from treedist.config import parse_deployment
from treedist.kafka.watermarks import OffsetReader
from treedist.local.deployment import local_deployment
from treedist.records.counters import ClusterCounters
from treedist.records.plan import plan_cluster
from treedist.driver.query import INITIALIZING_SOURCES, LastBatch, first_read_planned, last_batch, start_cluster_query

from tests.e2e.offsets_workload import wait_for
from tests.e2e.workload import create_topic_everywhere, produce_concurrently

CLUSTERS = ["c1", "c2"]
TREE = {"level": 1, "children": CLUSTERS}


def test_a_query_counts_as_planned_once_its_first_batch_submitted_a_job_before_the_batch_ends(spark):
    release = threading.Event()
    seen_batches = []

    def hold_first_batch(df, batch_id):
        df.count()  # a job in the query's job group: the batch's read was planned
        seen_batches.append(batch_id)
        release.wait(60)

    query = (spark.readStream.format("rate").option("rowsPerSecond", 5).load()
             .writeStream.foreachBatch(hold_first_batch).start())
    try:
        assert wait_for(lambda: bool(seen_batches), 60, interval=0.05), "the first batch never ran"
        # The batch is still running (held above): no progress yet, but its job was submitted.
        assert query.lastProgress is None and query.status["isTriggerActive"]
        assert first_read_planned(spark, query)
    finally:
        release.set()
        query.stop()


def test_last_batch_reads_the_batch_id_and_trigger_time_of_lastProgress_from_the_jvm(spark):
    query = spark.readStream.format("rate").option("rowsPerSecond", 5).load().writeStream.format("noop").start()
    try:
        assert last_batch(query) is None or query.lastProgress is not None
        assert wait_for(lambda: (last_batch(query) or LastBatch(-1, None)).batch_id >= 1, 60, interval=0.05)
    finally:
        query.stop()
    progress = query.lastProgress  # a stopped query keeps its last progress: both read the same one
    assert last_batch(query) == LastBatch(progress["batchId"], float(progress["durationMs"]["triggerExecution"]))


def test_a_cluster_query_on_an_empty_topic_counts_as_planned_at_its_first_trigger(spark, local_kafka, unique_topic, tmp_path):
    # A cluster without a backlog must not hold the next query's start for the start-up timeout.
    bootstrap = {c: local_kafka.bootstrap[c] for c in CLUSTERS}
    deployment = parse_deployment(local_deployment(bootstrap, topics=[unique_topic], tree=TREE,
                                                   checkpoint_location=str(tmp_path / "checkpoints")))
    create_topic_everywhere(bootstrap, unique_topic, 2)
    plan = plan_cluster(deployment, "c1", spark.sparkContext.defaultParallelism)
    query = start_cluster_query(spark, plan, ClusterCounters(spark, plan), 0.2)
    try:
        assert wait_for(lambda: first_read_planned(spark, query), 30, interval=0.05)
        assert query.isActive and query.exception() is None
    finally:
        query.stop()


def test_a_held_cluster_query_has_its_sources_up_and_copies_nothing_until_its_hold_file_goes(
        spark, local_kafka, unique_topic, tmp_path):
    # DistributionApp.start starts every query held, then releases them one after another.
    bootstrap = {c: local_kafka.bootstrap[c] for c in CLUSTERS}
    deployment = parse_deployment(local_deployment(bootstrap, topics=[unique_topic], tree=TREE,
                                                   checkpoint_location=str(tmp_path / "checkpoints")))
    create_topic_everywhere(bootstrap, unique_topic, 2)
    produced = produce_concurrently({"c1": bootstrap["c1"]}, unique_topic, 200, 2)
    hold = tmp_path / "hold-c1"
    hold.touch()
    plan = replace(plan_cluster(deployment, "c1", spark.sparkContext.defaultParallelism), hold_file=str(hold))
    query = start_cluster_query(spark, plan, ClusterCounters(spark, plan), 0.2)
    target = OffsetReader({"bootstrap.servers": bootstrap["c2"]}, cluster="c2", timeout_s=10.0)
    try:
        assert wait_for(lambda: query.status["message"] != INITIALIZING_SOURCES, 60, interval=0.05)
        time.sleep(2.0)  # ten triggers' worth: a query that were not held would have planned a batch
        assert query.isActive and query.lastProgress is None
        assert not first_read_planned(spark, query)
        assert target.record_count(unique_topic) == 0
        hold.unlink()
        assert wait_for(lambda: target.record_count(unique_topic) == produced, 60, interval=0.1)
        assert query.exception() is None
    finally:
        hold.unlink(missing_ok=True)
        query.stop()
