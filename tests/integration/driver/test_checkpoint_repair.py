"""A kill -9 while a query writes its first offsets leaves `offsets/.0.<uuid>.tmp` behind.

Spark's own check then refuses the checkpoint on every restart
(STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY); the distributor removes the interrupted write
and resumes, delivering every record. The crash state is rebuilt exactly: the checkpoint's
`metadata`, and the first offset entry still under its temp name, with no commit.
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException

from treedist.config import parse_deployment
from treedist.local.deployment import local_deployment
from treedist.records.counters import ClusterCounters
from treedist.records.plan import plan_cluster
from treedist.driver.query import start_cluster_query

from tests.e2e.workload import create_topic_everywhere, produce_concurrently, wait_for_counts

CLUSTERS = ["c1", "c2"]


def _crash_during_first_offsets(finished: Path, crashed: Path) -> None:
    """`crashed` = `finished`'s metadata + its offsets/0 not yet renamed from the temp file."""
    crashed.mkdir(parents=True, exist_ok=True)
    shutil.copy(finished / "metadata", crashed / "metadata")
    (crashed / "offsets").mkdir()
    (crashed / "commits").mkdir()
    temp = crashed / "offsets" / f".0.{uuid.uuid4()}.tmp"
    shutil.copy(finished / "offsets" / "0", temp)


def _rate_to_noop(spark, checkpoint: Path):
    return (
        spark.readStream.format("rate").option("rowsPerSecond", 10).load()
        .writeStream.format("noop").option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
    )


def test_spark_itself_refuses_a_checkpoint_with_an_interrupted_first_write(spark, tmp_path):
    """Pins the Spark behaviour the repair exists for (if Spark stops counting temp files, this says so)."""
    first = _rate_to_noop(spark, tmp_path / "finished")
    first.awaitTermination(120)
    _crash_during_first_offsets(tmp_path / "finished", tmp_path / "crashed")

    query = _rate_to_noop(spark, tmp_path / "crashed")
    with pytest.raises(StreamingQueryException, match="STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY"):
        query.awaitTermination(120)


def test_a_distributor_killed_during_its_first_offsets_write_restarts_and_delivers(spark, local_kafka, unique_topic, tmp_path):
    bootstrap = {c: local_kafka.bootstrap[c] for c in CLUSTERS}
    spec = local_deployment(
        bootstrap, topics=[unique_topic], tree={"level": 1, "children": CLUSTERS},
        checkpoint_location=str(tmp_path / "checkpoints"), distributor={"trigger_interval": "500 milliseconds"},
    )
    deployment = parse_deployment(spec)
    plan = plan_cluster(deployment, "c1")
    create_topic_everywhere(bootstrap, unique_topic, 2)

    probe = _rate_to_noop(spark, tmp_path / "finished")  # a real first offsets entry and metadata
    probe.awaitTermination(120)
    _crash_during_first_offsets(tmp_path / "finished", Path(plan.checkpoint))

    total = produce_concurrently({"c1": bootstrap["c1"]}, unique_topic, 200, 2)
    query = start_cluster_query(spark, plan, ClusterCounters(spark, plan), 0.5)
    try:
        counts = wait_for_counts({"c2": bootstrap["c2"]}, unique_topic, total, timeout=180, check=lambda: _alive(query))
    finally:
        query.stop()

    assert counts == {"c2": total}
    assert not any(p.name.endswith(".tmp") for p in (Path(plan.checkpoint) / "offsets").iterdir())


def _alive(query) -> None:
    if not query.isActive:
        raise AssertionError(f"distributor query ended: {query.exception()}")
