"""A driver SIGKILLed mid-stream and started again, with its checkpoints on a remote file
system (an S3-compatible store, HDFS): shared by the tests of each (tests/e2e/test_hdfs_checkpoint.py,
tests/integration/driver/test_s3_checkpoint.py)."""

from __future__ import annotations

import time
from pathlib import Path

import yaml

from treedist.config import parse_deployment
from treedist.local.deployment import local_deployment
from treedist.ops.checkpoint import recent_batches
from treedist.records.ahead import ahead_dir
from treedist.spark.checkpoint_fs import Store, join

from tests.e2e.test_crash_restart import kill_9_mid_stream, restart_until_complete
from tests.e2e.workload import create_topic_everywhere, produce_concurrently

CLUSTERS = ["c1", "c2", "c3", "c4"]
PARTITIONS = 4


def _committed(store: Store, root: str) -> dict[str, int]:
    """cluster -> the newest committed batch id of its query, read from the store (-1: none)."""
    newest = {}
    for cluster in CLUSTERS:
        batches = recent_batches(join(root, "messages", cluster), 0.0, time.time(), store=store)
        newest[cluster] = batches[-1].batch_id if batches else -1
    return newest


def kill_and_resume(bootstrap: dict[str, str], topic: str, tmp_path: Path, root: str,
                    spark_conf: dict[str, str], store: Store):
    """Run the 4-cluster tree with `checkpoint_location: root`, SIGKILL the driver mid-stream,
    check that the checkpoints and the executors' copy-ahead intents are in the store, start
    it again and wait until every record is everywhere. Returns the verify report; asserts
    nothing missing or foreign, and that the queries resumed (batch ids continue)."""
    spec = local_deployment(
        bootstrap, topics=[topic], checkpoint_location=root,
        spark={"master": "local[2,4]", "conf": {"spark.ui.enabled": "false", **spark_conf}},
        distributor={"max_records_per_trigger": 400, "trigger_interval": "200 milliseconds"},
    )
    config = tmp_path / "deployment.yaml"
    config.write_text(yaml.safe_dump(spec))
    deployment = parse_deployment(spec)
    assert deployment.checkpoint_location == root
    create_topic_everywhere(bootstrap, topic, PARTITIONS)
    log = tmp_path / "app.log"

    first = kill_9_mid_stream(bootstrap, topic, PARTITIONS, config, log, timeout=240)

    before = _committed(store, root)
    assert all(b >= 0 for b in before.values()), (before, log.read_text()[-3000:])
    # the executors wrote copy-ahead intents (one file per topic-partition) into the store
    intents = {c: store.files(ahead_dir(join(root, "messages", c))) for c in CLUSTERS}
    assert any(intents.values()), (intents, log.read_text()[-3000:])
    assert all(name.startswith(f"{topic}~") for files in intents.values() for name in files), intents

    second = produce_concurrently(bootstrap, topic, 500, PARTITIONS)
    report = restart_until_complete(config, log, deployment, topic, timeout=300)
    assert report.expected == first + second
    assert [c.missing for c in report.clusters] == [0] * len(CLUSTERS), report
    assert [c.unexpected for c in report.clusters] == [0] * len(CLUSTERS), report
    assert all(c.order_violations == 0 and c.mismatched == 0 for c in report.clusters), report
    # resumed, not started over: every query's batches continue the ids it had committed there
    after = _committed(store, root)
    assert all(after[c] > before[c] for c in CLUSTERS), (before, after)
    return report
