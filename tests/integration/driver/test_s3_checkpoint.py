"""Checkpoints on an S3-compatible store (moto's server, `s3a://`): `treedist run` SIGKILLed
mid-stream and started again resumes from the checkpoints in the bucket: nothing missing.

The files beside the checkpoint go to the bucket too: the status readers see the committed
batches there, and the copy-ahead intents are written by the executors into it
(tests/e2e/remote_checkpoint.py, shared with the HDFS test)."""

from __future__ import annotations

from tests.e2e.remote_checkpoint import CLUSTERS, kill_and_resume


def test_killed_driver_resumes_from_checkpoints_on_s3(local_kafka, unique_topic, tmp_path, s3_store):
    bootstrap = {c: local_kafka.bootstrap[c] for c in CLUSTERS}
    kill_and_resume(bootstrap, unique_topic, tmp_path, s3_store.location("checkpoints"), s3_store.spark_conf(),
                    s3_store.store())
