"""The message distributor: one Spark streaming query per (cluster, level).

Built on the driver; the copy step runs in executors, inside the source's read(). Two modes
(`distributor.mode`, same checkpoint layout, so a distributor can switch between them):

- `fused` (`treedist.pipeline.fused_source`): the source's read() replays its offset range,
  applies the CopyStep (rule, flag bit, origin header) and produces the copies to the target
  itself (the sink's BatchProducer: same topic name and partition; idempotent producer,
  acks=all), flushes and verifies every delivery, then yields one summary row per task;
  the query writes those rows to Spark's `noop` sink. Records never cross into the JVM.
- `source-sink`: treedist-kafka source on the distributor's cluster with the CopyStep applied
  inside its read() -> the copies as Arrow batches through the JVM -> treedist-kafka sink on
  the target (same producer, same settings).

Delivery (both modes): at least once. A batch is committed to the checkpoint only after every
record of it was acknowledged by the target; a crash between the two replays the batch, so a
restart may duplicate (verify reports duplicates) but never loses a record.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from treedist.config import Deployment
from treedist.pipeline.copy_step import CopyStep
from treedist.pipeline.distributor_source import register_distributor_source
from treedist.pipeline.fused_source import register_fused_source
from treedist.spark.checkpoint import remove_interrupted_writes
from treedist.spark.options import SinkOptions
from treedist.topology import Distributor

KAFKA_FORMAT = "treedist-kafka"
log = logging.getLogger(__name__)


def kafka_options(client_config: dict[str, object]) -> dict[str, str]:
    """librdkafka settings -> data source options (`kafka.` prefix, as spark-sql-kafka)."""
    return {f"kafka.{key}": str(value).lower() if isinstance(value, bool) else str(value) for key, value in client_config.items()}


@dataclass
class DistributorCounters:
    """Spark accumulators: updated in executors, read on the driver."""

    records_in: object
    copied: object
    malformed: object

    @classmethod
    def create(cls, spark: SparkSession) -> "DistributorCounters":
        sc = spark.sparkContext
        return cls(sc.accumulator(0), sc.accumulator(0), sc.accumulator(0))

    def snapshot(self) -> dict[str, int]:
        return {"records_in": self.records_in.value, "copied": self.copied.value, "malformed": self.malformed.value}


def copy_step_for(deployment: Deployment, dist: Distributor) -> CopyStep:
    return CopyStep(
        cluster=dist.cluster,
        mask=dist.mask,
        bit=dist.bit,
        flags_header=deployment.copy_flags_header,
        origin_header=deployment.origin_header,
        malformed_policy=deployment.distributor.malformed_flags,
        max_record_bytes=deployment.distributor.max_record_bytes,
    )


def source_options(deployment: Deployment, cluster: str) -> dict[str, str]:
    """Options of the treedist-kafka source for the distributed topics of one cluster."""
    topics = deployment.topics
    opts = kafka_options(deployment.cluster(cluster).client_config())
    if topics.names:
        opts["subscribe"] = ",".join(topics.names)
    if topics.regex:
        opts["subscribePattern"] = "|".join(f"(?:{p})" for p in topics.regex)
        if topics.exclude:
            opts["excludePattern"] = "|".join(f"(?:{p})" for p in topics.exclude)
    opts["startingOffsets"] = "earliest"
    opts["maxOffsetsPerTrigger"] = str(deployment.distributor.max_records_per_trigger)
    opts["topicRefreshIntervalMs"] = str(int(deployment.distributor.topic_refresh_seconds * 1000))
    return opts


def sink_options(deployment: Deployment, target: str) -> dict[str, str]:
    opts = kafka_options(deployment.cluster(target).client_config())
    opts["kafka.delivery.timeout.ms"] = str(deployment.distributor.delivery_timeout_ms)
    return opts


def checkpoint_dir(deployment: Deployment, dist: Distributor) -> str:
    """Per (cluster, level), not per target: switching the target keeps the source offsets."""
    return str(Path(deployment.checkpoint_location).resolve() / dist.name)


def build_stream(spark: SparkSession, deployment: Deployment, dist: Distributor, counters: DistributorCounters) -> DataFrame:
    """Source-sink mode: the copies, its source with the copy step applied in `read()`."""
    format_name = register_distributor_source(
        spark,
        f"treedist-distributor-{dist.name}",
        copy_step_for(deployment, dist),
        (counters.records_in, counters.copied, counters.malformed),
    )
    return spark.readStream.format(format_name).options(**source_options(deployment, dist.cluster)).load()


def build_fused_stream(spark: SparkSession, deployment: Deployment, dist: Distributor, counters: DistributorCounters) -> DataFrame:
    """Fused mode: one summary row per task; the copies were produced inside `read()`.

    The target's settings are the ones the treedist-kafka sink gets (`sink_options`), parsed
    and checked here on the driver and carried to the executors by the registered class.
    """
    format_name = register_fused_source(
        spark,
        f"treedist-fused-{dist.name}",
        copy_step_for(deployment, dist),
        (counters.records_in, counters.copied, counters.malformed),
        SinkOptions.parse(sink_options(deployment, dist.target)),
    )
    return spark.readStream.format(format_name).options(**source_options(deployment, dist.cluster)).load()


def start_distributor(spark: SparkSession, deployment: Deployment, dist: Distributor, counters: DistributorCounters) -> StreamingQuery:
    """Start the query of one distributor in `distributor.mode`; its name is `<cluster>-L<level>`.

    Its previous query must have ended: a crash's interrupted checkpoint writes are removed first.
    """
    checkpoint = checkpoint_dir(deployment, dist)
    for path in remove_interrupted_writes(checkpoint):
        log.warning("distributor %s: removed %s, a checkpoint write a crash interrupted", dist.name, path)
    if deployment.distributor.mode == "fused":
        writer = build_fused_stream(spark, deployment, dist, counters).writeStream.format("noop")
    else:
        writer = (
            build_stream(spark, deployment, dist, counters)
            .writeStream.format(KAFKA_FORMAT)
            .options(**sink_options(deployment, dist.target))
        )
    return (
        writer.option("checkpointLocation", checkpoint)
        .queryName(dist.name)
        .trigger(processingTime=deployment.distributor.trigger_interval)
        .start()
    )
