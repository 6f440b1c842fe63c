"""Checkpoints on an S3-compatible store (moto's server, `s3a://`): `treedist run` SIGKILLed
mid-stream and started again resumes from the checkpoints in the bucket: nothing missing.

The files beside the checkpoint go to the bucket too: the status readers see the committed
batches there, and the copy-ahead intents are written by the executors into it."""

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
from tests.fixtures.s3 import s3_store  # noqa: F401  (the fixture)

CLUSTERS = ["c1", "c2", "c3", "c4"]
PARTITIONS = 4


def _committed(store, root: str) -> dict[str, int]:
    """cluster -> the newest committed batch id of its query, read from the bucket (-1: none)."""
    newest = {}
    for cluster in CLUSTERS:
        batches = recent_batches(join(root, "messages", cluster), 0.0, time.time(), store=store)
        newest[cluster] = batches[-1].batch_id if batches else -1
    return newest


def test_killed_driver_resumes_from_checkpoints_on_s3(local_kafka, unique_topic, tmp_path, s3_store):
    bootstrap = {c: local_kafka.bootstrap[c] for c in CLUSTERS}
    root = s3_store.location("checkpoints")
    spec = local_deployment(
        bootstrap, topics=[unique_topic], checkpoint_location=root,
        spark={"master": "local[2,4]", "conf": {"spark.ui.enabled": "false", **s3_store.spark_conf()}},
        distributor={"max_records_per_trigger": 400, "trigger_interval": "200 milliseconds"},
    )
    config = tmp_path / "deployment.yaml"
    config.write_text(yaml.safe_dump(spec))
    deployment = parse_deployment(spec)
    assert deployment.checkpoint_location == root
    create_topic_everywhere(bootstrap, unique_topic, PARTITIONS)
    log = tmp_path / "app.log"
    store = s3_store.store()

    first = kill_9_mid_stream(bootstrap, unique_topic, PARTITIONS, config, log, timeout=240)

    before = _committed(store, root)
    assert all(b >= 0 for b in before.values()), (before, log.read_text()[-3000:])
    # executors wrote their copy-ahead intents into the bucket (the planner made the directory there)
    assert any(store.is_dir(ahead_dir(join(root, "messages", c))) for c in CLUSTERS), before

    second = produce_concurrently(bootstrap, unique_topic, 500, PARTITIONS)
    total = first + second
    report = restart_until_complete(config, log, deployment, unique_topic, timeout=300)
    assert report.expected == total
    assert [c.missing for c in report.clusters] == [0] * len(CLUSTERS), report
    assert all(c.unexpected == 0 and c.order_violations == 0 and c.mismatched == 0 for c in report.clusters), report
    # resumed, not started over: every query's batches continue the ids it had committed in the bucket
    after = _committed(store, root)
    assert all(after[c] > before[c] for c in CLUSTERS), (before, after)

