"""The distributor's source: `treedist-kafka` with the copy step applied inside `read()`.

Why a source of its own: applying the rule in a separate mapInArrow stage costs every record
two more JVM<->Arrow conversions and a Python hop; applied where the records are read (in
executors), records a distributor does not copy never leave the Python worker at all.

Each distributor registers a subclass under its own format name, carrying its CopyStep and
its Spark accumulators as class attributes (the registered class is pickled into the
driver-side planner worker and from there into executors; accumulator updates made in
`read()` flow back to the driver at task end).

This is the reader of the `source-sink` mode (its copies go to the `treedist-kafka` sink);
`treedist.pipeline.fused_source` extends it for the `fused` mode (it produces the copies
itself). Both share `copies()`, so the copy step and the accumulators behave alike.
"""

from __future__ import annotations

import logging
from typing import Iterator

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.types import StructType

from treedist.pipeline.copy_step import CopyStep, StepStats
from treedist.spark.datasource import KafkaDataSource
from treedist.spark.options import SourceOptions
from treedist.spark.source import KafkaStreamReader

log = logging.getLogger(__name__)


class DistributorStreamReader(KafkaStreamReader):
    """KafkaStreamReader whose executor-side `read` yields only the copies, stamped."""

    def __init__(self, options: SourceOptions, step: CopyStep, counters: tuple) -> None:
        super().__init__(options)
        self.step = step
        self.counters = counters

    def copies(self, partition) -> Iterator[tuple[pa.RecordBatch, StepStats]]:
        """Executor: replay the range, apply the copy step per Arrow batch, count.

        Yields (copies, stats) for every batch read, also when it has no copies.
        """
        records_in, copied, malformed = self.counters
        for batch in super().read(partition):
            out, stats = self.step.apply(batch)
            records_in.add(stats.records_in)
            copied.add(stats.copied)
            if stats.malformed:
                malformed.add(stats.malformed)
            yield out, stats

    def read(self, partition) -> Iterator[pa.RecordBatch]:
        """Executor: the copies of one offset range, as Arrow batches for the sink."""
        for out, _stats in self.copies(partition):
            if out.num_rows:
                yield out


class DistributorDataSource(KafkaDataSource):
    """Base of the per-distributor formats; see `register_distributor_source`."""

    FORMAT: str = "treedist-distributor"
    STEP: CopyStep | None = None
    COUNTERS: tuple = ()

    @classmethod
    def name(cls) -> str:
        return cls.FORMAT

    def streamReader(self, schema: StructType) -> DistributorStreamReader:
        base = super().streamReader(schema)
        return DistributorStreamReader(base.options, self.STEP, self.COUNTERS)

    def streamWriter(self, schema: StructType, overwrite: bool):
        raise NotImplementedError(f"{self.FORMAT} only reads; write with treedist-kafka")


def register_distributor_source(spark: SparkSession, format_name: str, step: CopyStep, counters: tuple) -> str:
    """Driver: register a format that reads like treedist-kafka and applies `step`."""
    cls = type(
        f"DistributorDataSource_{format_name.replace('-', '_')}",
        (DistributorDataSource,),
        {"FORMAT": format_name, "STEP": step, "COUNTERS": tuple(counters), "__module__": __name__},
    )
    spark.dataSource.register(cls)
    return format_name
