"""Warm executors before the first batch (issue 31 point 5): a tiny Spark job, one task per
task slot, started on the driver in a background thread while the queries start.

Why: without it, the queries' first micro-batches are the first tasks an executor runs. Each
of them waits for Spark's Python daemon to start, for a forked worker to import the record
path (confluent-kafka, pyarrow, treedist.records) and for its Kafka clients: a consumer's
bootstrap and an idempotent producer's id per target. The records of the first seconds after
launch (and after a control-plane worker starts) wait for all that.

Steps (driver): plan every source cluster of the deployment (pure), submit one job of
`slots` tasks in a daemon thread and return; a failure is logged, never raised: the warm-up
is only an optimisation and the queries build what they need anyway.
Each task (executor): `treedist.records.warm.warm_worker` imports the record path and parks
an idle consumer per source cluster and an idle producer per target, connected, in its
worker's pools: the queries' first tasks take them.
"""

from __future__ import annotations

import logging
import os
import threading
import time

from pyspark.sql import SparkSession

from treedist.config import Deployment
from treedist.kafka.clients import lingering_consumer_settings
from treedist.records.plan import plan_all
from treedist.records.transactions import EXACTLY_ONCE
from treedist.records.warm import warm_worker

log = logging.getLogger(__name__)

# Set to 0 to start without the warm-up (benchmarks/first_seconds.py measures both).
SWITCH_ENV = "TREEDIST_WARMUP"
SIMPLIFIED_TRACEBACK_CONF = "spark.sql.execution.pyspark.udf.simplifiedTraceback.enabled"
SIMPLIFIED_TRACEBACK_ENV = "SPARK_SIMPLIFIED_TRACEBACK"


def start(spark: SparkSession, deployment: Deployment) -> threading.Thread | None:
    """Driver: submit the warm-up job in a daemon thread (returned) and return at once."""
    if os.environ.get(SWITCH_ENV, "1") == "0":
        return None
    try:
        slots = spark.sparkContext.defaultParallelism
        plans = plan_all(deployment, cores=slots)
    except Exception as err:  # an optimisation only: the queries report their own errors
        log.info("no executor warm-up: %s", err)
        return None
    if not plans:
        return None
    # The settings the queries' first tasks take their consumer with: lingering ones batch
    # their fetches (treedist.records.task, `lingering_consumer_settings`).
    consumers = [lingering_consumer_settings(p.consumer) if p.lingers else dict(p.consumer) for p in plans]
    # exactly_once tasks build a transactional producer each: no kept producer to warm.
    kept = plans[0].distributor.delivery != EXACTLY_ONCE
    producers = {k: dict(v) for k, v in (plans[0].warm_producers or {}).items()} if kept else {}
    # Spark keeps one Python daemon and worker pool per distinct worker environment, and
    # its SQL tasks (the queries' data source reads) carry SPARK_SIMPLIFIED_TRACEBACK=1
    # while simplified tracebacks are on (the default); an RDD job does not. Without the
    # same variable the job forked a daemon and workers of its own that no query used:
    # its parked clients were never taken, and they cost ~220 MiB of RSS (4-cluster tree).
    # Set here, not in the thread: a query registered meanwhile copies sc.environment
    # (py4j iterates it), and a key added during that failed its start ("dictionary changed
    # size during iteration").
    try:
        if spark.conf.get(SIMPLIFIED_TRACEBACK_CONF, "true").lower() == "true":
            spark.sparkContext.environment[SIMPLIFIED_TRACEBACK_ENV] = "1"
    except Exception as err:  # an optimisation only, as above
        log.info("no executor warm-up: %s", err)
        return None
    thread = threading.Thread(target=_run, args=(spark, slots, consumers, producers), name="treedist-warmup", daemon=True)
    thread.start()
    return thread


def _run(spark: SparkSession, slots: int, consumers: list[dict], producers: dict[str, dict]) -> None:
    started = time.monotonic()
    try:
        sc = spark.sparkContext
        sc.setLocalProperty("spark.job.description", "treedist executor warm-up")
        pids = sc.parallelize(range(slots), slots).mapPartitions(
            lambda _: [warm_worker(consumers, producers)]).collect()
        log.info("executor warm-up: %d task(s) in %d worker(s), %.1f s", len(pids), len(set(pids)),
                 time.monotonic() - started)
    except Exception as err:  # e.g. the session stopped meanwhile: nothing to warm
        log.info("executor warm-up did not finish: %s", str(err).splitlines()[0] if str(err) else type(err).__name__)
