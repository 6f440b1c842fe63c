"""Warm executors before the first batch, and keep them warm: a tiny Spark job, one task per
task slot, started on the driver in a background thread while the queries start.

Why: without it, the queries' first micro-batches are the first tasks an executor runs. Each
of them waits for Spark's Python daemon to start, for a forked worker to import the record
path (confluent-kafka, pyarrow, treedist.records) and for its Kafka clients: a consumer's
bootstrap and an idempotent producer's id per target. The records of the first seconds after
launch (and after a control-plane worker starts) wait for all that.

Steps (driver): plan every source cluster of the deployment (pure), submit one job of
`slots` tasks in a daemon thread and return (the thread submits it again every KEEP_WARM_S
while the session runs); a failure is logged, never raised: the warm-up
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
# Spark ends a Python worker that stayed idle for a minute (PythonWorkerFactory, not
# configurable), and with it the clients its pools kept: the first task after a quiet minute
# forked a new worker, imported the record path and connected again, ~2.4 s before the first
# record after the quiet spell was copied. The warm-up job runs again at this interval so that
# every worker has a task (a few ms) within each minute.
KEEP_WARM_S = 40.0
SWITCH_ENV = "TREEDIST_WARMUP"
SIMPLIFIED_TRACEBACK_CONF = "spark.sql.execution.pyspark.udf.simplifiedTraceback.enabled"
SIMPLIFIED_TRACEBACK_ENV = "SPARK_SIMPLIFIED_TRACEBACK"


def start(spark: SparkSession, deployment: Deployment, stop: threading.Event | None = None) -> threading.Thread | None:
    """Driver: submit the warm-up job in a daemon thread (returned) and return at once. With
    `stop` (the application's), a second daemon thread submits it again every KEEP_WARM_S
    once the first ended, until `stop` is set."""
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
    # its parked clients were never taken, and their memory was spent for nothing.
    # Set here, not in the thread: a query registered meanwhile copies sc.environment
    # (py4j iterates it), and a key added during that failed its start ("dictionary changed
    # size during iteration").
    try:
        if spark.conf.get(SIMPLIFIED_TRACEBACK_CONF, "true").lower() == "true":
            spark.sparkContext.environment[SIMPLIFIED_TRACEBACK_ENV] = "1"
    except Exception as err:  # an optimisation only, as above
        log.info("no executor warm-up: %s", err)
        return None
    args = (spark, slots, consumers, producers)
    thread = threading.Thread(target=_run, args=args, name="treedist-warmup", daemon=True)
    thread.start()
    if stop is not None:
        threading.Thread(target=_keep_warm, args=(stop, thread, *args), name="treedist-keep-warm", daemon=True).start()
    return thread


def _keep_warm(stop: threading.Event, first: threading.Thread, spark: SparkSession, slots: int,
               consumers: list[dict], producers: dict[str, dict]) -> None:
    """Driver thread: once the first warm-up job ended, the same job again every KEEP_WARM_S
    until `stop` is set or the session stopped, so that the Python workers outlive a quiet
    spell (KEEP_WARM_S)."""
    first.join()
    while not stop.wait(KEEP_WARM_S):
        if spark.sparkContext._jsc is None:  # the session stopped: nothing left to warm
            return
        _run(spark, slots, consumers, producers, quiet=True)


def _run(spark: SparkSession, slots: int, consumers: list[dict], producers: dict[str, dict],
         quiet: bool = False) -> None:
    started = time.monotonic()
    try:
        sc = spark.sparkContext
        sc.setLocalProperty("spark.job.description", "treedist executor warm-up")
        pids = sc.parallelize(range(slots), slots).mapPartitions(
            lambda _: [warm_worker(consumers, producers)]).collect()
        log.log(logging.DEBUG if quiet else logging.INFO, "executor warm-up: %d task(s) in %d worker(s), %.1f s",
                len(pids), len(set(pids)), time.monotonic() - started)
    except Exception as err:  # e.g. the session stopped meanwhile: nothing to warm
        log.log(logging.DEBUG if quiet else logging.INFO, "executor warm-up did not finish: %s", str(err).splitlines()[0] if str(err) else type(err).__name__)
