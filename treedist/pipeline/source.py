"""The distributor source: one streaming query per source cluster, every level at once.

The query reads each record of its cluster once and copies it for every level (the fused
path: read, copy rule and produce inside the executor's `read()`; records never enter the
JVM). Spark gets one summary row per task and writes it to its `noop` sink.

Protocol of one micro-batch:

1. driver, `latestOffset(start, limit)`: list the cluster's selected partitions (at most
   every `topic_refresh_seconds`), read their latest offsets, and plan the end of the batch
   for every level (`positions.next_positions`: the read window capped by
   `max_records_per_trigger`, shared fairly; a partition new to a level is registered at
   its earliest offset and read from the next batch on);
2. Spark writes that end to the checkpoint's offset log: the batch is fixed, a restart
   replays exactly it;
3. driver, `partitions(start, end)`: the windows of the batch packed into at most
   `max_tasks` tasks, each carrying every level's current target;
4. executor, `read(task)`: `treedist.pipeline.task.run_task` (read once, copy per level,
   produce, flush and verify every delivery), then add the task's counts to the
   accumulator and yield one summary row;
5. the `noop` write job ends once every task returned, so only batches whose every copy was
   acknowledged reach the commit log. A crash before that replays the batch: at least once.

A new query (no offsets in its checkpoint) starts each level where the distributor's own
checkpoint of earlier versions last committed (`treedist.pipeline.legacy`), else at the
earliest offsets.
"""

from __future__ import annotations

import logging
import time
from typing import Iterator, Sequence

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows
from pyspark.sql.types import LongType, StructField, StructType

from treedist.pipeline.errors import PipelineError
from treedist.pipeline.legacy import last_committed_end
from treedist.pipeline.plan import ClusterPlan
from treedist.pipeline.positions import LevelPositions, ReadTask, batch_windows, next_positions, pack_tasks
from treedist.spark.offsets import KafkaOffsets, TopicPartitionKey

log = logging.getLogger(__name__)

# One row per task: what the task read, copied (all levels) and produced (key + value bytes).
SUMMARY_SCHEMA = StructType(
    [
        StructField("records_in", LongType(), False),
        StructField("copied", LongType(), False),
        StructField("bytes", LongType(), False),
    ]
)


class DistributorReader(DataSourceStreamReader):
    """Planning methods run in the query's long-lived driver-side Python process (state
    survives between calls); `read` runs in executors."""

    def __init__(self, plan: ClusterPlan, counters) -> None:
        self.plan = plan
        self.counters = counters
        self._offsets = None
        self._listing: list[TopicPartitionKey] = []
        self._listed_at = float("-inf")
        self._latest: dict[TopicPartitionKey, int] = {}
        self._misfits: set[str] = set()

    def __getstate__(self) -> dict:
        # Pickled into executors for `read`: broker clients stay on the driver.
        state = dict(self.__dict__)
        state["_offsets"] = None
        return state

    # -- driver ---------------------------------------------------------------------------

    def initialOffset(self) -> dict:
        """Driver, once for a new query: each level where its old checkpoint committed, or
        the earliest offsets."""
        tps = self._partitions(force=True)
        earliest = self._reader().offsets(tps, "earliest")
        levels = {}
        for lp in self.plan.levels:
            legacy = last_committed_end(self.plan.legacy_checkpoints[lp.level])
            if legacy is not None:
                log.info("%s: resuming from its own checkpoint %s", lp.name, self.plan.legacy_checkpoints[lp.level])
            old = legacy.positions if legacy is not None else {}
            levels[lp.level] = KafkaOffsets({tp: old.get(tp, offset) for tp, offset in earliest.items()})
        return LevelPositions(levels).to_dict()

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.plan.max_records_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        """Driver, before every micro-batch: the end of the next batch (step 1)."""
        begin = LevelPositions.from_dict(start)
        listed = self._partitions()
        known = begin.partitions()
        reader = self._reader()
        latest = reader.offsets(sorted(known), "latest")
        for tp, offset in latest.items():
            highest = max(o.get(tp) for o in begin.levels.values() if tp in o)
            if offset < highest:
                raise PipelineError(
                    f"cluster {self.plan.cluster!r}: {tp}: latest offset {offset} is below the checkpointed "
                    f"offset {highest}; the topic was deleted and recreated or truncated"
                )
        self._latest = latest
        levels = [lp.level for lp in self.plan.levels]
        unregistered = [tp for tp in listed if any(tp not in begin.levels.get(level, {}) for level in levels)]
        registered = reader.offsets(unregistered, "earliest")
        if registered:
            log.info("cluster %s: partitions registered at earliest: %s", self.plan.cluster, ", ".join(map(str, sorted(registered))))
        max_records = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return next_positions(begin, levels, latest, registered, max_records).to_dict()

    def reportLatestOffset(self) -> dict | None:
        return KafkaOffsets(self._latest).to_dict() if self._latest else None

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        """Driver: the tasks of the batch (start, end] (step 3)."""
        windows = batch_windows(LevelPositions.from_dict(start), LevelPositions.from_dict(end))
        targets = tuple((lp.level, lp.target) for lp in self.plan.levels)
        groups = pack_tasks(windows, self.plan.max_tasks, self.plan.min_records_per_task)
        return [ReadTask(tuple(group), targets) for group in groups]

    def commit(self, end: dict) -> None:
        """Driver, after the batch ending at `end` is in the commit log: nothing to do, the
        checkpoint is the only offset store."""

    def stop(self) -> None:
        self._offsets = None

    # -- executor -------------------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[tuple[int, int, int]]:
        """Executor: one task (step 4)."""
        from treedist.pipeline.task import run_task

        if not isinstance(partition, ReadTask):
            raise PipelineError(f"unexpected input partition {partition!r}")
        stats = run_task(self.plan, partition)
        self.counters.add(stats.vector())
        yield (stats.records_in, stats.copied, stats.bytes)

    # -- helpers (driver) -------------------------------------------------------------------

    def _reader(self):
        if self._offsets is None:
            from treedist.kafka.offsets import OffsetReader

            self._offsets = OffsetReader(self.plan.consumer, cluster=self.plan.cluster, timeout_s=self.plan.metadata_timeout_s)
        return self._offsets

    def _selects(self, topic: str) -> bool:
        if self.plan.misfit(topic) and topic not in self._misfits:
            self._misfits.add(topic)
            log.warning(
                "cluster %s: topic %r does not fit the cluster's topic_format; it is not distributed",
                self.plan.cluster, topic,
            )
        return self.plan.selects(topic)

    def _partitions(self, force: bool = False) -> list[TopicPartitionKey]:
        now = time.monotonic()
        if force or now - self._listed_at >= self.plan.topic_refresh_seconds:
            self._listing = self._reader().partitions(self._selects)
            self._listed_at = now
        return self._listing


class DistributorSource(DataSource):
    """Base of the per-cluster formats made by `distributor_source`; fixed summary schema."""

    PLAN: ClusterPlan
    COUNTERS: object

    @classmethod
    def name(cls) -> str:
        return f"treedist-distributor-{cls.PLAN.cluster}"

    def schema(self) -> StructType:
        return SUMMARY_SCHEMA

    def streamReader(self, schema: StructType) -> DistributorReader:
        return DistributorReader(self.PLAN, self.COUNTERS)


def distributor_source(plan: ClusterPlan, counters) -> type[DistributorSource]:
    """Driver: the data source class of one cluster's query, bound to its plan and counters
    (Spark instantiates registered classes itself, so the binding is the class's)."""

    class BoundDistributorSource(DistributorSource):
        PLAN = plan
        COUNTERS = counters

    BoundDistributorSource.__qualname__ = f"DistributorSource[{plan.cluster}]"
    return BoundDistributorSource
