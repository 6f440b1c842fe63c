"""A lean local SparkSession for treedist (driver side).

Sets the environment every Python worker needs (`SPARK_LOCAL_IP` on loopback, the current
interpreter as `PYSPARK_PYTHON` so workers have pyarrow and confluent-kafka) and the
settings measured to keep start-up and micro-batch latency low on small machines.
"""

from __future__ import annotations

import os
import sys
from typing import Mapping

from pyspark.sql import SparkSession

# Int.MaxValue turns off Spark's per-row Arrow size check on the way to Python workers
# (BatchedPythonArrowInput): that check calls ListVector.setValueCount on every row, which is
# O(rows in batch) for the `headers` array<struct> column, so each batch costs O(n^2). Measured
# with the sink: about 5k rows/s with the check, 20-60k+ rows/s without. Batches stay bounded
# by spark.sql.execution.arrow.maxRecordsPerBatch.
NO_ARROW_BYTE_LIMIT = str(2**31 - 1)

LEAN_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.streaming.stopTimeout": "30s",
    "spark.python.worker.reuse": "true",
    "spark.sql.execution.arrow.maxBytesPerBatch": NO_ARROW_BYTE_LIMIT,
}

# For short-lived sessions (tests): a JVM that starts fast but never reaches full JIT speed.
FAST_START_CONF: dict[str, str] = {
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
}


def build_session(
    master: str = "local[2,4]",
    app_name: str = "treedist",
    conf: Mapping[str, str] | None = None,
    *,
    register_sources: bool = True,
) -> SparkSession:
    """Create (or return the running) SparkSession with the lean settings, `conf` on top.

    `local[N,F]` gives each task F attempts, so a task failed by a broker error is retried.
    With `register_sources` the `treedist-kafka` format is registered on the session.
    Environment variables are only set when not already set by the caller.
    """
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in {**LEAN_CONF, **dict(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    if register_sources:
        from treedist.spark import register

        register(spark)
    return spark
