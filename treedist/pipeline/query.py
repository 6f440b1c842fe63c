"""Start the streaming query of one source cluster (driver).

Delivery: at least once. A batch is committed to the checkpoint only after every copy of
it was acknowledged by its target; a crash between the two replays the batch, so a restart
may duplicate (verify reports duplicates) but never loses a record.
"""

from __future__ import annotations

import logging

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from treedist.pipeline.counters import ClusterCounters
from treedist.pipeline.plan import ClusterPlan
from treedist.pipeline.source import distributor_source
from treedist.spark.checkpoint import remove_interrupted_writes

log = logging.getLogger(__name__)


def start_cluster_query(spark: SparkSession, plan: ClusterPlan, counters: ClusterCounters, trigger_interval: str) -> StreamingQuery:
    """Start `plan`'s query, named `<cluster>-messages`, on its own checkpoint.

    Its previous query must have ended: a crash's interrupted checkpoint writes are removed first.
    """
    for path in remove_interrupted_writes(plan.checkpoint):
        log.warning("query %s: removed %s, a checkpoint write a crash interrupted", plan.query_name, path)
    source = distributor_source(plan, counters.accumulator)
    spark.dataSource.register(source)
    return (
        spark.readStream.format(source.name())
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", plan.checkpoint)
        .queryName(plan.query_name)
        .trigger(processingTime=trigger_interval)
        .start()
    )
