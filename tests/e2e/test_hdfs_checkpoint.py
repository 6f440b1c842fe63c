"""Checkpoints on HDFS (a MiniDFSCluster, `hdfs://`): `treedist run` SIGKILLed mid-stream and
started again resumes from the checkpoints there: nothing missing, nothing duplicated.

Spark's checkpoint goes through the driver's JVM (PySpark's own HDFS client); the files beside
it go through WebHDFS (treedist.spark.webhdfs): the executors write their copy-ahead intents
there, and the status readers find the committed batches there."""

from __future__ import annotations

import time

import yaml

from treedist.config import parse_deployment
from treedist.local.deployment import local_deployment
from treedist.ops.checkpoint import recent_batches
from treedist.records.ahead import ahead_dir
from treedist.spark.checkpoint_fs import join

from tests.e2e.test_crash_restart import kill_9_mid_stream, restart_until_complete
from tests.e2e.workload import create_topic_everywhere, produce_concurrently
from tests.fixtures.hdfs import hdfs  # noqa: F401  (the fixture)

CLUSTERS = ["c1", "c2", "c3", "c4"]
PARTITIONS = 4


def _committed(store, root: str) -> dict[str, int]:
    """cluster -> the newest committed batch id of its query, read from HDFS (-1: none)."""
    newest = {}
    for cluster in CLUSTERS:
        batches = recent_batches(join(root, "messages", cluster), 0.0, time.time(), store=store)
        newest[cluster] = batches[-1].batch_id if batches else -1
    return newest


def test_killed_driver_resumes_from_checkpoints_on_hdfs(local_kafka, unique_topic, tmp_path, hdfs):
    bootstrap = {c: local_kafka.bootstrap[c] for c in CLUSTERS}
    root = hdfs.location("td")
    spec = local_deployment(
        bootstrap, topics=[unique_topic], checkpoint_location=root,
        spark={"master": "local[2,4]", "conf": {"spark.ui.enabled": "false", **hdfs.spark_conf()}},
        distributor={"max_records_per_trigger": 400, "trigger_interval": "200 milliseconds"},
    )
    config = tmp_path / "deployment.yaml"
    config.write_text(yaml.safe_dump(spec))
    deployment = parse_deployment(spec)
    assert deployment.checkpoint_location == root
    create_topic_everywhere(bootstrap, unique_topic, PARTITIONS)
    log = tmp_path / "app.log"
    store = hdfs.store()

    first = kill_9_mid_stream(bootstrap, unique_topic, PARTITIONS, config, log, timeout=240)

    before = _committed(store, root)
    assert all(b >= 0 for b in before.values()), (before, log.read_text()[-3000:])
    # the executors wrote copy-ahead intents (one file per topic-partition) into HDFS
    intents = {c: store.files(ahead_dir(join(root, "messages", c))) for c in CLUSTERS}
    assert any(intents.values()), (intents, log.read_text()[-3000:])
    assert all(name.startswith(f"{unique_topic}~") for files in intents.values() for name in files), intents

    second = produce_concurrently(bootstrap, unique_topic, 500, PARTITIONS)
    total = first + second
    report = restart_until_complete(config, log, deployment, unique_topic, timeout=300)
    assert report.expected == total
    assert [c.missing for c in report.clusters] == [0] * len(CLUSTERS), report
    assert [c.unexpected for c in report.clusters] == [0] * len(CLUSTERS), report
    assert all(c.order_violations == 0 and c.mismatched == 0 for c in report.clusters), report
    # resumed, not started over: every query's batches continue the ids it had committed on HDFS
    after = _committed(store, root)
    assert all(after[c] > before[c] for c in CLUSTERS), (before, after)
