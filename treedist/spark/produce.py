"""Executor side of the sink: produce Arrow batches to Kafka and prove every delivery.

One `BatchProducer` per Spark task. Protocol:

1. Before a batch is produced, every target topic must exist on the target cluster with
   the partition numbers the rows ask for (checked against cached metadata, refreshed once
   on a miss); otherwise the task fails with an error naming topic and partition.
2. Rows are produced in a tight loop (idempotent producer, acks=all); a full local queue
   is drained by polling, bounded by the delivery timeout.
3. `finish()` flushes, bounded by `delivery.timeout.ms`, and raises if any record is still
   undelivered or any delivery report carried an error. Delivery reports are requested for
   failures only (`delivery.report.only.error`), so every report seen is a failure.
A raised error fails the task; Spark retries it, so a record is never silently dropped.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import KafkaError, KafkaException, Producer

from treedist.spark.errors import KafkaSinkError
from treedist.spark.options import SinkOptions
from treedist.kafka.logs import client_logger
from treedist.kafka.retry import with_retries

log = logging.getLogger(__name__)

_MAX_REPORTED_FAILURES = 5


@dataclass
class DeliveryFailures:
    """Failed deliveries reported by librdkafka (called from poll/flush on this thread)."""

    count: int = 0
    first: list[str] = field(default_factory=list)
    fatal: str | None = None

    def on_delivery(self, err: KafkaError | None, msg: Any) -> None:
        if err is None:
            return
        self.count += 1
        if len(self.first) < _MAX_REPORTED_FAILURES:
            self.first.append(f"{msg.topic()}[{msg.partition()}]: {err}")

    def on_error(self, err: KafkaError) -> None:
        if err.fatal():
            self.fatal = str(err)
        else:
            log.warning("producer error: %s", err)


class BatchProducer:
    """Produces RecordBatches of the sink's input schema to one cluster (executor)."""

    def __init__(self, options: SinkOptions) -> None:
        self._options = options
        self._failures = DeliveryFailures()
        conf: dict[str, Any] = dict(options.kafka)
        # A confluent-kafka (not librdkafka) property: it must be a bool.
        only_errors = str(conf.pop("delivery.report.only.error", "true")).strip().lower()
        conf["delivery.report.only.error"] = only_errors in ("true", "1", "yes")
        conf["on_delivery"] = self._failures.on_delivery
        conf["error_cb"] = self._failures.on_error
        conf.setdefault("logger", client_logger())  # librdkafka's logs condensed (treedist.kafka.logs)
        self._producer = Producer(conf)
        self._partitions: dict[str, int] | None = None
        self.records = 0
        self.bytes = 0

    @property
    def raw(self) -> Producer:
        """The confluent-kafka Producer, for callers that produce record by record (the
        distributor's copy loop); they call `count()` and `produce_when_queue_drains()`."""
        return self._producer

    def count(self, records: int, nbytes: int) -> None:
        """Account records produced through `raw` (used in `finish()`'s messages)."""
        self.records += records
        self.bytes += nbytes

    # 1. target check -------------------------------------------------------------------

    def _partition_counts(self, refresh: bool) -> dict[str, int]:
        if self._partitions is None or refresh:
            timeout = min(30.0, self._options.delivery_timeout_s)
            md = with_retries(
                lambda: self._producer.list_topics(timeout=timeout),
                what="reading topic metadata of the target cluster failed",
                error=KafkaSinkError,
            )
            self._partitions = {name: len(t.partitions) for name, t in md.topics.items() if t.error is None}
        return self._partitions

    def check_targets(self, wanted: dict[str, int]) -> None:
        """Fail unless each topic exists with a partition numbered `wanted[topic]` (-1: any)."""
        counts = self._partition_counts(refresh=False)
        if any(t not in counts or p >= counts[t] for t, p in wanted.items()):
            counts = self._partition_counts(refresh=True)
        for topic, partition in sorted(wanted.items()):
            if topic not in counts:
                raise KafkaSinkError(f"target topic {topic!r} does not exist on the target cluster")
            if partition >= counts[topic]:
                raise KafkaSinkError(
                    f"target topic {topic!r} has {counts[topic]} partitions; partition {partition} does not exist"
                )

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

    def produce_when_queue_drains(self, *row: Any) -> None:
        """The local queue is full: serve delivery reports until it takes the row, bounded
        by the delivery timeout (records that long undelivered fail anyway)."""
        topic, value, key, part, ts, headers = row
        deadline = time.monotonic() + self._options.delivery_timeout_s
        while True:
            self._producer.poll(0.05)
            self._raise_if_fatal()
            try:
                self._producer.produce(topic, value, key, part, timestamp=ts, headers=headers)
                return
            except BufferError:
                if time.monotonic() >= deadline:
                    raise KafkaSinkError(
                        f"producer queue stayed full for {self._options.delivery_timeout_s:.0f}s; "
                        "the target cluster is not accepting records"
                    ) from None

    # 3. finish ---------------------------------------------------------------------------

    def finish(self) -> None:
        """Flush and prove delivery of every produced record, else raise KafkaSinkError."""
        remaining = self._producer.flush(self._options.delivery_timeout_s + 5.0)
        self._raise_if_fatal()
        if self._failures.count:
            raise KafkaSinkError(
                f"{self._failures.count} of {self.records} records failed delivery; first: "
                + "; ".join(self._failures.first)
            )
        if remaining:
            raise KafkaSinkError(
                f"{remaining} of {self.records} records still undelivered after "
                f"{self._options.delivery_timeout_s:.0f}s"
            )

    def abandon(self) -> None:
        """After a failure: drop queued records (the retried task produces them again)."""
        self._producer.purge()
        self._producer.flush(0)

    def _raise_if_fatal(self) -> None:
        if self._failures.fatal:
            raise KafkaSinkError(f"fatal producer error: {self._failures.fatal}")


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
