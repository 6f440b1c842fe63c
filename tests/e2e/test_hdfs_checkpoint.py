"""Checkpoints on HDFS (a MiniDFSCluster, `hdfs://`): `treedist run` SIGKILLed mid-stream and
started again resumes from the checkpoints there: nothing missing.

Spark's checkpoint goes through the driver's JVM (PySpark's own HDFS client); the files beside
it go through WebHDFS (treedist.spark.webhdfs): the executors write their copy-ahead intents
there, and the status readers find the committed batches there. Duplicates are allowed: the
batch in flight at the kill is copied again (at least once; measured 400-800 per cluster)."""

from __future__ import annotations

from tests.e2e.remote_checkpoint import CLUSTERS, kill_and_resume


def test_killed_driver_resumes_from_checkpoints_on_hdfs(local_kafka, unique_topic, tmp_path, hdfs):
    bootstrap = {c: local_kafka.bootstrap[c] for c in CLUSTERS}
    kill_and_resume(bootstrap, unique_topic, tmp_path, hdfs.location("td"), hdfs.spark_conf(), hdfs.store())
