"""The one bounded range reader: the records of one partition in [start, stop) (driver and executor).

`read_range` assigns a consumer (never subscribed, nothing committed) to the partition at
`start` and yields runs of records, in offset order, below `stop`. Steps:

1. `consume()` asks for at most what the range still holds (it waits until it has that many
   records or `wait_s` passed: a range whose records are all there does not sit out the wait);
2. the records below `stop` of each consume are yielded as one run;
3. the range is complete once a record at or past `stop - 1` arrived, the consumer's position
   reached `stop` (offsets that hold no record: compacted away, transaction markers), or the
   broker reported end of partition at or past `stop`; with `end_is_complete`, end of
   partition anywhere ends the read (a reader of what the partition holds, not of an exact
   range);
4. no progress for `stall_s` raises RangeStalled naming the range: a short range is never
   returned as complete. A consumer error other than end of partition or a retriable one
   raises RangeReadError naming the range and offset.

The consumer is unassigned at the end (the caller owns it: a reused or a per-call consumer).
"""

from __future__ import annotations

import logging
import time
from typing import Iterator

from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

from treedist.kafka.errors import KafkaLayerError

log = logging.getLogger(__name__)

BATCH = 20_000
WAIT_S = 0.2


class RangeReadError(KafkaLayerError):
    """A consumer error while reading a range; names the partition and offset."""

    def __init__(self, where: str, detail: str) -> None:
        super().__init__(f"{where}: {detail}")
        self.detail = detail


class RangeStalled(RangeReadError):
    """A range that made no progress for the stall bound; names the range and the offset reached."""


def read_range(consumer: Consumer, topic: str, partition: int, start: int, stop: int, *, stall_s: float,
               batch: int = BATCH, wait_s: float = WAIT_S, end_is_complete: bool = False) -> Iterator[list[Message]]:
    """Yield runs of the records of `topic`[`partition`] in [start, stop), in offset order
    (steps 1-4 of the module docstring)."""
    if start >= stop:
        return
    where = f"{topic}[{partition}] offsets [{start}, {stop})"
    consumer.assign([TopicPartition(topic, partition, start)])
    next_offset, last_progress = start, time.monotonic()
    try:
        while next_offset < stop:
            messages = consumer.consume(max(1, min(batch, stop - next_offset)), wait_s)  # 1.
            run, end_at = _records(messages, stop, where)
            if run:  # 2.
                next_offset, last_progress = run[-1].offset() + 1, time.monotonic()
                yield run
            if next_offset >= stop or (end_at is not None and (end_is_complete or end_at >= stop)):  # 3.
                return
            position = consumer.position([TopicPartition(topic, partition)])[0].offset
            if position >= stop:
                return
            if position > next_offset:
                next_offset, last_progress = position, time.monotonic()
            if time.monotonic() - last_progress > stall_s:  # 4.
                raise RangeStalled(where, f"no progress for {stall_s:.0f}s at offset {next_offset}; the planned "
                                          f"range cannot be read fully (records lost or broker unreachable)")
    finally:
        consumer.unassign()


def _records(messages: list[Message], stop: int, where: str) -> tuple[list[Message], int | None]:
    """The records below `stop` (only the range's partition is assigned), and the
    end-of-partition offset if reported. Why lists and no per-record test when there is no
    error: the source's replay (treedist.spark.fetch) reads through here."""
    errors = [m for m in messages if m.error() is not None]
    end_at = None
    if errors:
        for m in errors:
            err = m.error()
            if err.code() == KafkaError._PARTITION_EOF:
                end_at = max(end_at or 0, m.offset())
            elif err.retriable():
                log.warning("%s: retriable consumer error: %s", where, err)
            else:
                raise RangeReadError(where, f"consumer error at offset {m.offset()}: {err}")
        messages = [m for m in messages if m.error() is None]
    if messages and messages[-1].offset() >= stop:
        messages = [m for m in messages if m.offset() < stop]
    return list(messages), end_at
