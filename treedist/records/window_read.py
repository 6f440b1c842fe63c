"""Reading a task's windows exactly (executor; steps 2-3 of `treedist.records.task`).

`read_windows` assigns the consumer to every window at its first offset and consumes large
batches; each run of records of one partition, cut at the window's end, goes to the copier.
A window is complete once a record at or past its end arrived, the consumer's position
reached its end (compaction, transaction markers) or the broker reported end of partition
there; no progress for `poll_timeout_s` fails the task naming the windows: a short batch is
never returned. Records received past a window's end can be kept for copying ahead
(`treedist.records.ahead_copy`).
"""

from __future__ import annotations

import logging
import time
from typing import Sequence

from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

from treedist.records.errors import PipelineError
from treedist.records.positions import PartitionWindow

log = logging.getLogger(__name__)

CONSUME_BATCH = 20_000
CONSUME_WAIT_S = 0.1
# The records the windows' fetches brought past their ends are held until their intents are
# written (Message objects: ~300 bytes each besides key and value): at most this many.
MAX_HELD_AHEAD = 100_000


class ReadStalled(PipelineError):
    """A planned window could not be read to its end within the poll timeout."""


def read_windows(consumer: Consumer, windows: Sequence[PartitionWindow], on_records, poll_timeout_s: float,
                 beyond: dict | None = None) -> None:
    """Read every window exactly, handing runs of one partition's records, in offset order,
    to `on_records(window, topic, partition, records)` (steps 2-3). With `beyond`, the
    records received past a window's end are kept there ((topic, partition) -> records in
    offset order) instead of dropped."""
    reads = WindowReads(windows, on_records, beyond)
    consumer.assign([TopicPartition(w.topic, w.partition, w.from_offset) for w in windows])
    last_progress = time.monotonic()
    while reads.pending:
        # consume() waits until it has num_messages or the timeout passed: ask for what the
        # windows still hold, so a task whose records are all there does not sit out the wait.
        remaining = reads.remaining()
        messages = consumer.consume(max(1, min(CONSUME_BATCH, remaining)), CONSUME_WAIT_S)
        progressed = False
        run: list[Message] = []
        run_tp = None
        for msg in messages:
            if msg.error() is not None:
                progressed |= reads.flush(run_tp, run)
                run, run_tp = [], None
                reads.on_error(msg)
                continue
            tp = (msg.topic(), msg.partition())
            if tp != run_tp:
                progressed |= reads.flush(run_tp, run)
                run, run_tp = [], tp
            run.append(msg)
        progressed |= reads.flush(run_tp, run)
        if reads.pending and len(messages) < remaining:
            progressed |= reads.advance_by_position(consumer)
        if reads.pending and len(reads.fetching) > len(reads.pending):
            reads.stop_fetching_complete(consumer)
        if progressed:
            last_progress = time.monotonic()
        elif time.monotonic() - last_progress > poll_timeout_s:
            raise ReadStalled(
                f"no progress for {poll_timeout_s:.0f}s reading {reads.stuck()}; the planned range cannot be read "
                f"fully (records lost or broker unreachable)"
            )


class WindowReads:
    """One read of a task's windows (executor): each partition's next offset, the windows not
    complete yet (`pending`), the partitions still fetched, and where the records past a
    window's end go (`beyond`, or None: dropped)."""

    def __init__(self, windows: Sequence[PartitionWindow], on_records, beyond: dict | None) -> None:
        self.windows, self.on_records, self.beyond = windows, on_records, beyond
        # An empty window (a lingering task's idle partition, `positions.idle_windows`) is
        # complete from the start: it is only tailed for copying ahead.
        self.next_offset = {(w.topic, w.partition): w.from_offset for w in windows}
        self.pending = {(w.topic, w.partition): w for w in windows if w.count > 0}
        self.fetching = set(self.next_offset)

    def remaining(self) -> int:
        """How many offsets the pending windows still hold."""
        return sum(w.until_offset - self.next_offset[tp] for tp, w in self.pending.items())

    def stuck(self) -> str:
        """The pending windows and where each is, for the error that names them."""
        return ", ".join(f"{w} at {self.next_offset[tp]}" for tp, w in sorted(self.pending.items()))

    def flush(self, tp, run: list) -> bool:
        """Hand a run to the copier, cut at its window's end; True if it advanced the window.
        What lies past the end goes to `beyond` (if given), else is dropped."""
        if not run:
            return False
        beyond, next_offset = self.beyond, self.next_offset
        window = self.pending.get(tp)
        if window is None:  # already complete: records of the next batch, prefetched
            if beyond is not None and tp in next_offset:
                keep_beyond(beyond, tp, run, next_offset[tp])
            return False
        first = next_offset[tp]
        if run[0].offset() < first:
            run = [m for m in run if m.offset() >= first]
        if run and run[-1].offset() >= window.until_offset:
            if beyond is not None:
                keep_beyond(beyond, tp, [m for m in run if m.offset() >= window.until_offset], window.until_offset)
            run = [m for m in run if m.offset() < window.until_offset]
        if not run:
            return False
        self.on_records(window, tp[0], tp[1], run)
        next_offset[tp] = run[-1].offset() + 1
        if next_offset[tp] >= window.until_offset:
            del self.pending[tp]
        return True

    def on_error(self, msg: Message) -> None:
        """End of partition completes a window reached; a retriable error is logged; any other
        raises naming the window and offset."""
        err = msg.error()
        tp = (msg.topic(), msg.partition())
        if err.code() == KafkaError._PARTITION_EOF:
            window = self.pending.get(tp)
            if window is not None and msg.offset() >= window.until_offset:
                del self.pending[tp]
        elif err.retriable():
            log.warning("%s[%s]: retriable consumer error: %s", tp[0], tp[1], err)
        else:
            window = self.pending.get(tp)
            where = str(window) if window is not None else f"{tp[0]}[{tp[1]}]"
            raise PipelineError(f"{where}: consumer error at offset {msg.offset()}: {err}")

    def advance_by_position(self, consumer: Consumer) -> bool:
        """Offsets can be missing inside a window (compaction, transaction markers): the
        consumer's position then moves past them without a record."""
        progressed = False
        for position in consumer.position([TopicPartition(t, p) for t, p in self.pending]):
            tp = (position.topic, position.partition)
            if position.offset > self.next_offset[tp]:
                self.next_offset[tp] = position.offset
                progressed = True
            if position.offset >= self.pending[tp].until_offset:
                del self.pending[tp]
                progressed = True
        return progressed

    def stop_fetching_complete(self, consumer: Consumer) -> None:
        """Unassign the partitions whose window is complete (step 3), so that the broker's
        answers and the consumer's queue carry only the windows still being read. Why: on a
        backlog, a complete partition kept being fetched (up to `max.partition.fetch.bytes`
        per fetch) and its records past the window's end crowded the other partitions out of
        the fetches for seconds (docs/performance.md, "Single link: bursts"). A partition stays
        assigned while copying ahead (step 3b) may still take its records: a uniform window,
        fewer than MAX_HELD_AHEAD held. `incremental_unassign` also drops what librdkafka
        queued for it."""
        beyond = self.beyond
        held = sum(len(v) for v in beyond.values()) if beyond is not None else 0
        uniform = {(w.topic, w.partition) for w in self.windows if w.uniform}
        done = [tp for tp in self.fetching if tp not in self.pending
                and (beyond is None or tp not in uniform or held >= MAX_HELD_AHEAD)]
        if done:
            consumer.incremental_unassign([TopicPartition(t, p) for t, p in done])
            self.fetching.difference_update(done)


def keep_beyond(beyond: dict, tp: tuple, records: list, floor: int) -> None:
    """Append `records` (one partition, offset order) past what `beyond` holds for `tp`,
    none below `floor` (the window's end)."""
    kept = beyond.setdefault(tp, [])
    low = kept[-1].offset() + 1 if kept else floor
    kept.extend(m for m in records if m.offset() >= low)
