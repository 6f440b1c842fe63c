"""The streaming source: plans offset ranges on the driver, replays them in executors.

Protocol of one micro-batch (Spark drives it; offsets are `KafkaOffsets` dicts):

1. `latestOffset(start, limit)` (driver): list subscribed partitions (at most every
   `topicRefreshIntervalMs`), read their latest offsets, cap them by the read limit
   (`maxOffsetsPerTrigger`, split fairly) and by the availableNow target. A partition not
   yet in `start` is registered at its earliest offset and read from the next batch on, so
   every range is bounded by two checkpointed offsets.
2. Spark writes the returned end offset to the checkpoint's offset log.
3. `partitions(start, end)` (driver) cuts [start, end) into `OffsetRange`s.
4. `read(range)` (executor) replays exactly that range (see `treedist.spark.fetch`).
5. After the sink committed the batch, Spark writes the commit log, then calls
   `commit(end)` when planning the next batch. Nothing is committed to Kafka: the offsets
   live only in the checkpoint, and a restarted query replays from its last committed batch.
"""

from __future__ import annotations

import logging
import time
from typing import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from treedist.spark.errors import SparkSourceError
from treedist.kafka.read_positions import KafkaOffsets, OffsetRange, TopicPartitionKey
from treedist.spark.options import SourceOptions
from treedist.kafka.batching import fair_limit, split_ranges

log = logging.getLogger(__name__)


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Kafka micro-batch reader. Planning methods run in one long-lived driver process per
    query (state survives between calls); `read` runs in executors and is stateless."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._meta = None
        self._listing: list[TopicPartitionKey] = []
        self._listed_at = float("-inf")
        self._target: KafkaOffsets | None = None
        self._latest: dict[TopicPartitionKey, int] = {}

    def __getstate__(self) -> dict:
        # Pickled into executors for `read`: broker clients stay on the driver.
        state = dict(self.__dict__)
        state["_meta"] = None
        return state

    # -- driver ---------------------------------------------------------------------------

    def initialOffset(self) -> dict:
        """Driver, once for a new query: `startingOffsets` of every subscribed partition."""
        tps = self._partitions(force=True)
        offsets = self._metadata().offsets(tps, self.options.starting_offsets)
        log.info("initial offsets (%s) of %d partitions", self.options.starting_offsets, len(offsets))
        return KafkaOffsets(offsets).to_dict()

    def getDefaultReadLimit(self) -> ReadLimit:
        """Driver: `maxOffsetsPerTrigger` as a row limit, else everything available."""
        n = self.options.max_offsets_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Driver, once at the start of an availableNow query: fix the target offsets.

        Later `latestOffset` calls never pass the target and list no new partitions.
        """
        tps = self._partitions(force=True)
        self._target = KafkaOffsets(self._metadata().offsets(tps, "latest"))
        log.info("availableNow target set for %d partitions", len(self._target))

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        """Driver, before every micro-batch: the end offset of the next batch (step 1)."""
        begin = KafkaOffsets.from_dict(start)
        tps = sorted(self._target.positions) if self._target is not None else self._partitions()
        known = [tp for tp in tps if tp in begin]
        new = [tp for tp in tps if tp not in begin]
        meta = self._metadata()
        latest = meta.offsets(known, "latest")
        for tp, offset in latest.items():
            if offset < begin.get(tp):
                raise SparkSourceError(
                    f"{tp}: latest offset {offset} is below the checkpointed offset {begin.get(tp)}; "
                    f"the topic was deleted and recreated or truncated"
                )
        self._latest = dict(latest)
        if self._target is not None:
            latest = {tp: max(begin.get(tp), min(o, self._target.get(tp))) for tp, o in latest.items()}
        if isinstance(limit, ReadMaxRows):
            latest = fair_limit(begin.positions, latest, limit.max_rows)
        registered = meta.offsets(new, "earliest")
        if registered:
            log.info("new partitions registered at earliest: %s", ", ".join(map(str, sorted(registered))))
        end = {**begin.positions, **latest, **registered}
        return KafkaOffsets(end).to_dict()

    def reportLatestOffset(self) -> dict | None:
        """Driver: the latest offsets seen by the last `latestOffset`, for query progress."""
        return KafkaOffsets(self._latest).to_dict() if self._latest else None

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        """Driver: the offset ranges of the batch [start, end) (step 3)."""
        return split_ranges(
            KafkaOffsets.from_dict(start),
            KafkaOffsets.from_dict(end),
            min_partitions=self.options.min_partitions,
            max_records_per_partition=self.options.max_records_per_partition,
        )

    def commit(self, end: dict) -> None:
        """Driver, after the batch ending at `end` is in the commit log (step 5).

        Deliberately commits nothing to Kafka: the checkpoint is the only offset store.
        """
        log.debug("batch up to %s committed", end)

    def stop(self) -> None:
        """Driver, when the query terminates: drop the admin client."""
        self._meta = None

    # -- executor -------------------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Executor: replay one `OffsetRange` exactly (step 4)."""
        from treedist.spark.fetch import read_range

        if not isinstance(partition, OffsetRange):
            raise SparkSourceError(f"unexpected input partition {partition!r}")
        return read_range(self.options.kafka, partition, self.options.poll_timeout_ms / 1000.0)

    # -- helpers (driver) -------------------------------------------------------------------

    def _metadata(self):
        if self._meta is None:
            from treedist.kafka.watermarks import OffsetReader

            self._meta = OffsetReader(self.options.kafka, timeout_s=self.options.metadata_timeout_ms / 1000.0)
        return self._meta

    def _partitions(self, force: bool = False) -> list[TopicPartitionKey]:
        now = time.monotonic()
        if force or (now - self._listed_at) * 1000 >= self.options.topic_refresh_interval_ms:
            self._listing = self._metadata().partitions(self.options.matches)
            self._listed_at = now
        return self._listing
