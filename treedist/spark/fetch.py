"""Executor side of the source: replay exactly one planned offset range as Arrow batches.

`read_range` is a deterministic replay of [from_offset, until_offset) of one partition: a
plain Consumer is assigned (never subscribed, no group commits) at `from_offset`, records
are taken in large `consume()` batches and turned into Arrow columns, and reading stops at
`until_offset`. Offsets inside a range can be missing only through compaction or
transaction markers; the range is complete once a record at or past `until - 1` arrived,
the consumer position reached `until`, or the broker reported end of partition at or past
`until`. If that does not happen within `kafkaConsumer.pollTimeoutMs` without progress,
the task fails with an error naming the range: a short batch is never returned.
"""

from __future__ import annotations

import logging
import time
from itertools import chain
from operator import itemgetter
from typing import Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

from treedist.spark.errors import SparkSourceError
from treedist.spark.offsets import OffsetRange
from treedist.spark.schema import HEADER_ARROW_TYPE, HEADERS_ARROW_TYPE, KAFKA_ARROW_SCHEMA
from treedist.kafka.logs import client_logger

log = logging.getLogger(__name__)

CONSUME_BATCH = 20_000
CONSUME_WAIT_S = 0.2
_TS_TYPE = KAFKA_ARROW_SCHEMA.field("timestamp").type
_NO_HEADERS: tuple = ()


def read_range(kafka_conf: Mapping[str, str], rng: OffsetRange, poll_timeout_s: float) -> Iterator[pa.RecordBatch]:
    """Yield the records of `rng` in offset order as RecordBatches of KAFKA_ARROW_SCHEMA."""
    consumer = Consumer({"logger": client_logger(), **dict(kafka_conf)})
    tp = TopicPartition(rng.topic, rng.partition, rng.from_offset)
    try:
        consumer.assign([tp])
        next_offset = rng.from_offset
        last_progress = time.monotonic()
        while next_offset < rng.until_offset:
            messages = consumer.consume(min(CONSUME_BATCH, rng.until_offset - next_offset), CONSUME_WAIT_S)
            records, eof_at = _records(messages, rng)
            if records:
                batch = messages_to_batch(records, rng.topic, rng.partition)
                next_offset = records[-1].offset() + 1
                last_progress = time.monotonic()
                yield batch
            if next_offset >= rng.until_offset or (eof_at is not None and eof_at >= rng.until_offset):
                return
            position = consumer.position([TopicPartition(rng.topic, rng.partition)])[0].offset
            if position >= rng.until_offset:
                return
            if position > next_offset:
                next_offset, last_progress = position, time.monotonic()
            if time.monotonic() - last_progress > poll_timeout_s:
                raise SparkSourceError(
                    f"{rng}: no progress for {poll_timeout_s:.0f}s at offset {next_offset}; "
                    f"the planned range cannot be read fully (records lost or broker unreachable)"
                )
    finally:
        consumer.close()


def _records(messages: Sequence[Message], rng: OffsetRange) -> tuple[list[Message], int | None]:
    """The records of `messages` below `until_offset`, and the end-of-partition offset if reported.

    Raises SparkSourceError for any error other than end of partition or a retriable one.
    """
    errors = [m for m in messages if m.error() is not None]
    eof_at = None
    if errors:
        for m in errors:
            err = m.error()
            if err.code() == KafkaError._PARTITION_EOF:
                eof_at = max(eof_at or 0, m.offset())
            elif err.retriable():
                log.warning("%s: retriable consumer error: %s", rng, err)
            else:
                raise SparkSourceError(f"{rng}: consumer error at offset {m.offset()}: {err}")
        messages = [m for m in messages if m.error() is None]
    if messages and messages[-1].offset() >= rng.until_offset:
        messages = [m for m in messages if m.offset() < rng.until_offset]
    return list(messages), eof_at


def messages_to_batch(records: Sequence[Message], topic: str, partition: int) -> pa.RecordBatch:
    """Column-wise Arrow conversion of consumed records of one topic-partition."""
    n = len(records)
    stamps = np.fromiter(chain.from_iterable(map(Message.timestamp, records)), np.int64, 2 * n).reshape(n, 2)
    ts_types = stamps[:, 0].astype(np.int32)
    ts_missing = ts_types == 0
    columns = [
        pa.array(list(map(Message.key, records)), pa.binary()),
        pa.array(list(map(Message.value, records)), pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.array(np.fromiter(map(Message.offset, records), np.int64, n)),
        pa.array(
            stamps[:, 1] * 1000, _TS_TYPE, mask=ts_missing if ts_missing.any() else None
        ),
        # librdkafka: 0 none, 1 CreateTime, 2 LogAppendTime; Kafka's ids are one lower.
        pa.array(ts_types - 1, pa.int32()),
        headers_array(list(map(Message.headers, records))),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=KAFKA_ARROW_SCHEMA)


def headers_array(headers: Sequence[list[tuple[str, bytes | None]] | None]) -> pa.Array:
    """Arrow list<struct<key, value>> from per-record header lists; no headers gives null."""
    n = len(headers)
    lists = [h or _NO_HEADERS for h in headers]
    counts = np.fromiter(map(len, lists), np.int32, n)
    if not counts.any():
        return pa.nulls(n, HEADERS_ARROW_TYPE)
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(counts, out=offsets[1:])
    flat = list(chain.from_iterable(lists))
    items = pa.StructArray.from_arrays(
        [pa.array(list(map(itemgetter(0), flat)), pa.string()), pa.array(list(map(itemgetter(1), flat)), pa.binary())],
        fields=list(HEADER_ARROW_TYPE),
    )
    return pa.ListArray.from_arrays(pa.array(offsets), items, type=HEADERS_ARROW_TYPE, mask=pa.array(counts == 0))
