"""The distributor's `fused` mode: read, copy step and produce inside one executor `read()`.

Why this mode exists: in the `source-sink` mode the source yields the copies as Arrow
batches into the JVM, which turns them into rows, and the `treedist-kafka` sink turns those
rows back into Arrow in another Python worker before producing them. That round trip was
~80% of the JVM's CPU and capped a distributor at ~25-30k records/s on a 2-core machine.
Here the records never enter the JVM: each task reads its offset range, applies the
CopyStep and produces the copies with the sink's own `BatchProducer` (same settings:
idempotent, acks=all; same partition, key, value, headers and timestamp), then hands Spark
ONE summary row (`SUMMARY_SCHEMA`), which the query writes to Spark's `noop` sink.

Protocol of one micro-batch (the source's planning is `treedist.spark.source` unchanged):

1. driver: `latestOffset` plans the batch's end offsets; Spark writes them to the
   checkpoint's offset log (the batch is now fixed: a restart replays exactly it).
2. driver: `partitions(start, end)` cuts the batch into `OffsetRange`s, one task each.
3. executor, `read(range)`, one task:
   a. replay the range exactly (`treedist.spark.fetch.read_range`, as the source does);
   b. apply the CopyStep per Arrow batch, updating the accumulators (records_in, copied,
      malformed) as the `source-sink` reader does;
   c. produce every copy with a `BatchProducer` built from the sink's `SinkOptions`;
   d. `finish()`: flush and check every delivery of this task; any failed or undelivered
      record raises (after `abandon()` purges what is still queued), so the task fails and
      Spark retries it (`local[N,F]` / `spark.task.maxFailures`);
   e. only then yield one summary row (records_in, copied, bytes).
4. driver: the `noop` sink's write job ends once every task returned its row, i.e. every
   task flushed and verified its deliveries; only then does Spark write the batch to the
   commit log (and call the source's `commit(end)` when planning the next batch).
Delivery is at least once, exactly as in `source-sink`: offsets reach the commit log only
after every copy of the batch was acknowledged by the target; a crash before that replays
the batch from the offset log (copies may be duplicated, never lost).

Producer reuse: with `spark.python.worker.reuse=true` a Python worker runs many tasks one
after another; building a Producer costs ~55 ms (connect, idempotent producer id) per task.
So each worker keeps finished producers in `_IDLE`, keyed by the target's settings. A task
takes one out (no other task can use it meanwhile), and puts it back only after `finish()`
succeeded, i.e. with nothing queued and no failure recorded. A producer whose task failed is
abandoned and dropped, never reused, so a failure seen by `finish()` always belongs to the
current task, and every delivery of a task is verified before the task returns.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Iterator

from pyspark.sql import SparkSession
from pyspark.sql.types import LongType, StructField, StructType

from treedist.pipeline.copy_step import CopyStep
from treedist.pipeline.distributor_source import DistributorDataSource, DistributorStreamReader
from treedist.spark.options import SinkOptions, SourceOptions

log = logging.getLogger(__name__)

# One row per task: what the task read, copied and produced (key + value bytes).
SUMMARY_SCHEMA = StructType(
    [
        StructField("records_in", LongType(), False),
        StructField("copied", LongType(), False),
        StructField("bytes", LongType(), False),
    ]
)
MAX_IDLE_PRODUCERS = 8
# Executor, per Python worker: producers of finished tasks, by target settings (oldest first).
_IDLE: "OrderedDict[tuple, object]" = OrderedDict()


def _key(sink: SinkOptions) -> tuple:
    return (sink.topic, tuple(sorted(sink.kafka.items())))


def take_producer(sink: SinkOptions):
    """Executor: an idle producer for `sink`'s target, or a new one."""
    from treedist.spark.produce import BatchProducer

    producer = _IDLE.pop(_key(sink), None)
    return producer if producer is not None else BatchProducer(sink)


def return_producer(sink: SinkOptions, producer) -> None:
    """Executor: keep a producer whose `finish()` just succeeded for the next task."""
    _IDLE[_key(sink)] = producer
    while len(_IDLE) > MAX_IDLE_PRODUCERS:
        _IDLE.popitem(last=False)


class FusedDistributorReader(DistributorStreamReader):
    """Plans like treedist-kafka; `read` copies a whole offset range to the target itself."""

    def __init__(self, options: SourceOptions, step: CopyStep, counters: tuple, sink: SinkOptions) -> None:
        super().__init__(options, step, counters)
        self.sink = sink

    def read(self, partition) -> Iterator[tuple[int, int, int]]:
        """Executor: steps 3a-3e of the module docstring for one `OffsetRange`."""
        records_in = copied = 0
        producer = None
        records_before = bytes_before = 0
        try:
            for out, stats in self.copies(partition):
                records_in += stats.records_in
                copied += stats.copied
                if not out.num_rows:
                    continue
                if producer is None:  # lazily: a range with no copies needs no producer
                    producer = take_producer(self.sink)
                    records_before, bytes_before = producer.records, producer.bytes
                producer.produce_batch(out)
            if producer is not None:
                producer.finish()
        except BaseException:
            if producer is not None:
                producer.abandon()  # dropped, not returned: never reused after a failure
            raise
        produced_bytes = 0
        if producer is not None:
            produced = producer.records - records_before
            produced_bytes = producer.bytes - bytes_before
            if produced != copied:  # a bug, not a broker problem: never commit such a batch
                raise RuntimeError(f"{partition}: copied {copied} records but produced {produced}")
            return_producer(self.sink, producer)
        yield (records_in, copied, produced_bytes)


class FusedDistributorDataSource(DistributorDataSource):
    """Base of the per-distributor fused formats; see `register_fused_source`."""

    FORMAT: str = "treedist-fused"
    SINK: SinkOptions | None = None

    def schema(self) -> StructType:
        return SUMMARY_SCHEMA

    def streamReader(self, schema: StructType) -> FusedDistributorReader:
        if schema != SUMMARY_SCHEMA:
            raise ValueError(f"{self.FORMAT} has the fixed schema {SUMMARY_SCHEMA.simpleString()}")
        if self.SINK is None:
            raise ValueError(f"{self.FORMAT} has no target: register it with register_fused_source")
        return FusedDistributorReader(SourceOptions.parse(self.options), self.STEP, self.COUNTERS, self.SINK)

    def streamWriter(self, schema: StructType, overwrite: bool):
        raise NotImplementedError(f"{self.FORMAT} only reads; write its summary rows to the noop sink")


def register_fused_source(
    spark: SparkSession, format_name: str, step: CopyStep, counters: tuple, sink: SinkOptions
) -> str:
    """Driver: register a format that reads like treedist-kafka, applies `step` and produces
    the copies to the target of `sink` (the options the treedist-kafka sink would get)."""
    cls = type(
        f"FusedDistributorDataSource_{format_name.replace('-', '_')}",
        (FusedDistributorDataSource,),
        {"FORMAT": format_name, "STEP": step, "COUNTERS": tuple(counters), "SINK": sink, "__module__": __name__},
    )
    spark.dataSource.register(cls)
    return format_name
