"""Executor side of the sink: produce Arrow batches to Kafka and prove every delivery.

One `BatchProducer` per Spark task: a `treedist.kafka.producer.DeliveryProducer` (target
check, delivery proof, steps 1 and 3 of its protocol) that produces Arrow RecordBatches of the
sink's input schema (step 2): rows in a tight loop (idempotent producer, acks=all), a full
local queue drained by polling, bounded by the delivery timeout. A raised KafkaSinkError
fails the task; Spark retries it, so a record is never silently dropped.
"""

from __future__ import annotations

import logging

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import KafkaException

from treedist.kafka.producer import DeliveryProducer
from treedist.spark.errors import KafkaSinkError
from treedist.spark.options import SinkOptions

log = logging.getLogger(__name__)


class BatchProducer(DeliveryProducer):
    """Produces RecordBatches of the sink's input schema to one cluster (executor)."""

    error = KafkaSinkError

    def __init__(self, options: SinkOptions) -> None:
        super().__init__(options.kafka)
        self._options = options

    # 2. produce -------------------------------------------------------------------------

    def produce_batch(self, batch: pa.RecordBatch) -> None:
        """Produce every row of `batch`; raises KafkaSinkError on a bad row or target."""
        n = batch.num_rows
        if n == 0:
            return
        self._raise_if_fatal()
        topics = self._topics(batch)
        partitions = _column(batch, "partition")
        self.check_targets(_max_partition_per_topic(topics, partitions, n))
        values = _column(batch, "value")
        keys = _column(batch, "key")
        topic_list = topics.to_pylist() if isinstance(topics, pa.Array) else [topics] * n
        part_list = partitions.fill_null(-1).to_pylist() if partitions is not None else [-1] * n
        key_list = keys.to_pylist() if keys is not None else [None] * n
        value_list = values.to_pylist() if values is not None else [None] * n
        ts_list = _timestamps_ms(_column(batch, "timestamp"), n)
        header_list = _headers(_column(batch, "headers"), n)
        self.bytes += _nbytes(keys) + _nbytes(values)
        produce = self._producer.produce
        try:
            for topic, value, key, part, ts, headers in zip(
                topic_list, value_list, key_list, part_list, ts_list, header_list
            ):
                try:
                    produce(topic, value, key, part, timestamp=ts, headers=headers)
                except BufferError:
                    self.produce_when_queue_drains(topic, value, key, part, ts, headers)
        except KafkaException as exc:
            raise KafkaSinkError(f"cannot produce a record to {topic}[{part}]: {exc}") from exc
        # Serve (failure-only) delivery reports once per batch (at most maxRecordsPerBatch rows).
        self._producer.poll(0)
        self.records += n

    def _topics(self, batch: pa.RecordBatch) -> pa.Array | str:
        if self._options.topic:
            return self._options.topic
        topics = _column(batch, "topic")
        if topics is None:
            raise KafkaSinkError("no 'topic' option and no 'topic' column")
        if topics.null_count:
            raise KafkaSinkError("null value in the 'topic' column and no 'topic' option")
        return topics


def _column(batch: pa.RecordBatch, name: str) -> pa.Array | None:
    index = batch.schema.get_field_index(name)
    return batch.column(index) if index >= 0 else None


def _max_partition_per_topic(topics: pa.Array | str, partitions: pa.Array | None, n: int) -> dict[str, int]:
    if partitions is None:
        return dict.fromkeys([topics] if isinstance(topics, str) else pc.unique(topics).to_pylist(), -1)
    lowest = pc.min(partitions).as_py()
    if lowest is not None and lowest < 0:
        raise KafkaSinkError(f"negative value {lowest} in the 'partition' column")
    if isinstance(topics, str):
        top = pc.max(partitions).as_py()
        return {topics: -1 if top is None else top}
    table = pa.table({"t": topics, "p": partitions}).group_by("t").aggregate([("p", "max")])
    return {t: (-1 if p is None else p) for t, p in zip(table["t"].to_pylist(), table["p_max"].to_pylist())}


def _timestamps_ms(column: pa.Array | None, n: int) -> list[int]:
    """CreateTime in epoch milliseconds per row; 0 (librdkafka: now) where null or absent."""
    if column is None:
        return [0] * n
    if column.type.unit != "us":
        column = column.cast(pa.timestamp("us", tz=column.type.tz))
    return pc.divide(column.cast(pa.int64()), 1000).fill_null(0).to_pylist()


def _headers(column: pa.Array | None, n: int) -> list[list[tuple[str, bytes | None]] | None]:
    """Per-row header lists of (key, value) tuples; None for a null or empty list."""
    if column is None or column.null_count == n:
        return [None] * n
    offsets = column.offsets.to_numpy()
    # `.values` ignores the array's slicing; `offsets` index into it.
    first, last = int(offsets[0]), int(offsets[-1])
    items = column.values.slice(first, last - first)
    pairs = list(zip(items.field("key").to_pylist(), items.field("value").to_pylist()))
    counts = np.diff(offsets).tolist()
    valid = column.is_valid().to_pylist() if column.null_count else None
    out: list[list[tuple[str, bytes | None]] | None] = []
    j = 0
    for i, count in enumerate(counts):
        out.append(pairs[j : j + count] if count and (valid is None or valid[i]) else None)
        j += count
    return out


def _nbytes(column: pa.Array | None) -> int:
    if column is None:
        return 0
    return int(pc.sum(pc.binary_length(column)).as_py() or 0)
