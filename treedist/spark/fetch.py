"""Executor side of the source: replay exactly one planned offset range as Arrow batches.

`read_range` is a deterministic replay of [from_offset, until_offset) of one partition
through the bounded range reader (`treedist.kafka.ranges`): a plain Consumer is assigned
(never subscribed, no group commits) at `from_offset`, records are taken in large
`consume()` batches and turned into Arrow columns, and reading stops at `until_offset`.
Offsets inside a range can be missing only through compaction or transaction markers; the range is complete once a record at or past `until - 1` arrived,
the consumer position reached `until`, or the broker reported end of partition at or past
`until`. If that does not happen within `kafkaConsumer.pollTimeoutMs` without progress,
the task fails with an error naming the range: a short batch is never returned.
"""

from __future__ import annotations

from itertools import chain
from operator import itemgetter
from typing import Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
from confluent_kafka import Message

from treedist.spark.errors import SparkSourceError
from treedist.kafka.read_positions import OffsetRange
from treedist.spark.schema import HEADER_ARROW_TYPE, HEADERS_ARROW_TYPE, KAFKA_ARROW_SCHEMA
from treedist.kafka import clients, ranges

CONSUME_BATCH = 20_000
CONSUME_WAIT_S = 0.2
_TS_TYPE = KAFKA_ARROW_SCHEMA.field("timestamp").type
_NO_HEADERS: tuple = ()


def read_range(kafka_conf: Mapping[str, str], rng: OffsetRange, poll_timeout_s: float) -> Iterator[pa.RecordBatch]:
    """Yield the records of `rng` in offset order as RecordBatches of KAFKA_ARROW_SCHEMA
    (`treedist.kafka.ranges.read_range`, its errors raised as SparkSourceError)."""
    consumer = clients.consumer(kafka_conf)
    try:
        for run in ranges.read_range(consumer, rng.topic, rng.partition, rng.from_offset, rng.until_offset,
                                     stall_s=poll_timeout_s, batch=CONSUME_BATCH, wait_s=CONSUME_WAIT_S):
            yield messages_to_batch(run, rng.topic, rng.partition)
    except ranges.RangeReadError as err:
        raise SparkSourceError(f"{rng}: {err.detail}") from None
    finally:
        consumer.close()


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
