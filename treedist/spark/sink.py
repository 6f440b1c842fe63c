"""The streaming sink: Arrow batches produced to Kafka, one producer per task.

Protocol of one micro-batch:

1. Query start (driver planner process): the writer is built and the input schema checked.
2. `write(batches)` (executor, one call per task): produce every row with an idempotent
   producer (acks=all), flush, and check every delivery (`treedist.spark.produce`). Any
   failure raises: the task fails and Spark retries it; Spark's task retries and batch
   replays make delivery at-least-once. The returned `KafkaSinkCommitMessage` carries the
   task's counts.
3. `commit(messages, batchId)` (driver, fresh writer instance in its own process): all
   tasks succeeded; logs the batch's record and byte counts. Records are already in
   Kafka, so there is nothing else to commit.
4. `abort(messages, batchId)` (driver): some task failed after retries; records of the
   succeeded tasks are already in Kafka and reappear when the batch is replayed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Iterator, Optional, Sequence

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from treedist.spark.errors import KafkaSinkError
from treedist.spark.options import SinkOptions
from treedist.spark.schema import HEADER_TYPE

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class KafkaSinkCommitMessage(WriterCommitMessage):
    """What one write task reports to the driver-side commit."""

    batch_id: int | None
    task_partition: int
    attempt: int
    records: int
    bytes: int


@dataclass(frozen=True)
class SinkBatchMetrics:
    """Totals of one committed micro-batch."""

    batch_id: int
    tasks: int
    records: int
    bytes: int

    @classmethod
    def of(cls, messages: Sequence[Optional[WriterCommitMessage]], batch_id: int) -> "SinkBatchMetrics":
        ours = [m for m in messages if isinstance(m, KafkaSinkCommitMessage)]
        return cls(batch_id, len(ours), sum(m.records for m in ours), sum(m.bytes for m in ours))


_ACCEPTED = {
    "key": (BinaryType, StringType),
    "value": (BinaryType, StringType),
    "topic": (StringType,),
    "partition": (IntegerType,),
    "timestamp": (TimestampType, TimestampNTZType),
}


def check_input_schema(schema: StructType, options: SinkOptions) -> None:
    """Raise KafkaSinkError naming the column if the input cannot be written (driver)."""
    names = set(schema.fieldNames())
    if "value" not in names:
        raise KafkaSinkError("the input has no 'value' column")
    if "topic" not in names and not options.topic:
        raise KafkaSinkError("the input has no 'topic' column and no 'topic' option is set")
    for field in schema.fields:
        accepted = _ACCEPTED.get(field.name)
        if accepted and not isinstance(field.dataType, accepted):
            raise KafkaSinkError(
                f"column {field.name!r} has type {field.dataType.simpleString()}; "
                f"expected {' or '.join(t().simpleString() for t in accepted)}"
            )
        if field.name == "headers" and field.dataType != ArrayType(HEADER_TYPE):
            if not (
                isinstance(field.dataType, ArrayType)
                and isinstance(field.dataType.elementType, StructType)
                and [(f.name, type(f.dataType)) for f in field.dataType.elementType.fields]
                == [("key", StringType), ("value", BinaryType)]
            ):
                raise KafkaSinkError(
                    f"column 'headers' has type {field.dataType.simpleString()}; "
                    "expected array<struct<key:string,value:binary>>"
                )


class KafkaStreamWriter(DataSourceStreamArrowWriter):
    """Kafka micro-batch writer: `write` runs in executors, `commit`/`abort` on the driver."""

    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        check_input_schema(schema, options)
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaSinkCommitMessage:
        """Executor: produce all rows of this task and prove their delivery (step 2)."""
        from treedist.spark.produce import BatchProducer

        ctx = TaskContext.get()
        batch_id = ctx.getLocalProperty("streaming.sql.batchId") if ctx else None
        producer = BatchProducer(self.options)
        try:
            for batch in iterator:
                producer.produce_batch(batch)
            producer.finish()
        except BaseException:
            producer.abandon()
            raise
        return KafkaSinkCommitMessage(
            batch_id=int(batch_id) if batch_id is not None else None,
            task_partition=ctx.partitionId() if ctx else -1,
            attempt=ctx.attemptNumber() if ctx else 0,
            records=producer.records,
            bytes=producer.bytes,
        )

    def commit(self, messages: list[Optional[WriterCommitMessage]], batchId: int) -> None:
        """Driver: every task delivered its records (step 3); report the batch's counts."""
        metrics = SinkBatchMetrics.of(messages, batchId)
        log.info(
            "batch %d committed: %d records, %d bytes from %d tasks",
            metrics.batch_id, metrics.records, metrics.bytes, metrics.tasks,
        )

    def abort(self, messages: list[Optional[WriterCommitMessage]], batchId: int) -> None:
        """Driver: a task failed for good (step 4); delivered records stay in Kafka."""
        metrics = SinkBatchMetrics.of(messages, batchId)
        log.warning(
            "batch %d aborted: %d of %d tasks had delivered %d records before the failure",
            batchId, metrics.tasks, len(messages), metrics.records,
        )
