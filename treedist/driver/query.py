"""Start the streaming query of one source cluster (driver).

Delivery: at least once. A batch is committed to the checkpoint only after every copy of
it was acknowledged by its target; a crash between the two replays the batch, so a restart
may duplicate (verify reports duplicates) but never loses a record.
"""

from __future__ import annotations

import logging

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from treedist.config.durations import spark_interval
from treedist.records.counters import ClusterCounters
from treedist.records.plan import ClusterPlan
from treedist.records.reader import distributor_source
from treedist.spark.checkpoint import remove_interrupted_writes

log = logging.getLogger(__name__)


def start_cluster_query(spark: SparkSession, plan: ClusterPlan, counters: ClusterCounters, trigger_interval: float) -> StreamingQuery:
    """Start `plan`'s query, named `<cluster>-messages`, on its own checkpoint.

    Its previous query must have ended: a crash's interrupted checkpoint writes are removed first.
    """
    for path in remove_interrupted_writes(plan.checkpoint, plan.store):
        log.warning("query %s: removed %s, a checkpoint write a crash interrupted", plan.query_name, path)
    source = distributor_source(plan, counters.accumulator)
    spark.dataSource.register(source)
    return (
        spark.readStream.format(source.name())
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", plan.checkpoint)
        .queryName(plan.query_name)
        .trigger(processingTime=spark_interval(trigger_interval))
        .start()
    )


# Spark's status message from a query's start until its first trigger begins.
INITIALIZING_SOURCES = "Initializing sources"


def first_read_planned(spark: SparkSession, query: StreamingQuery) -> bool:
    """Driver: has `query` planned the read of its first micro-batch (or found nothing to read)?

    True once a job of the query was submitted (Spark sets each streaming query's job group to
    its run id, and plans the batch's read, `plan_data_source_read` in a Python worker, before
    it submits the batch's job), once a batch completed, or once the first trigger ended
    without a batch (nothing to read).
    Why the application releases its held queries one after another on this (and not all at
    once, `DistributionApp.start`): the read planning steps of queries planned at the same time
    each take a Python worker of ~80 MiB (pyarrow) that Spark keeps idle for a minute; one
    after another they share one. Measured with the 4-cluster tree (when the queries were
    started, not released, on it): peak RSS 1,509-1,574 -> 1,428-1,434 MiB, first copy on the
    farthest cluster 10.5-11.6 -> 10.7-15.1 s (benchmarks/startup_memory.py).
    """
    status = query.status
    if status.get("message") == INITIALIZING_SOURCES:  # the first trigger has not begun
        return False
    if query.lastProgress is not None or not status.get("isTriggerActive", True):
        return True  # a batch completed, or the first trigger ended without one
    return bool(spark.sparkContext.statusTracker().getJobIdsForGroup(str(query.runId)))
