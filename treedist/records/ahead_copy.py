"""Copying ahead (executor; step 3b of `treedist.records.task`, `treedist.records.ahead`).

After every window was read, the records already received past the end of each uniform
window are copied too, and then, while a backlog keeps arriving, what the consumer fetches
next; each partition's intent file is written before its records are copied.
"""

from __future__ import annotations

import logging
import time

from confluent_kafka import Consumer, KafkaError

from treedist.kafka.read_positions import TopicPartitionKey
from treedist.records import ahead
from treedist.records.positions import LevelRange, PartitionWindow, ReadTask
from treedist.records.window_read import CONSUME_BATCH, MAX_HELD_AHEAD, keep_beyond

log = logging.getLogger(__name__)

# Copying ahead (step 3b) goes on while a backlog keeps arriving: each consume waits at most
# AHEAD_WAIT_S (a fetch's round trip), the task stops at one that brings fewer than
# AHEAD_MIN_RECORDS records (no backlog: the next batch takes them),
# and after AHEAD_LINGER_S in any case (other queries' batches wait for the core).
AHEAD_WAIT_S = 0.02
AHEAD_MIN_RECORDS = 1_000
AHEAD_LINGER_S = 1.0

def copy_ahead(consumer: Consumer, task: ReadTask, beyond: dict, on_records, intents: ahead.Intents,
               live_targets: str | None = None) -> None:
    """Step 3b (executor; `treedist.records.ahead`): after every window was read, copy the
    records past the end of the uniform windows, and go on while a backlog keeps arriving.
    All of it within the task's `ahead_limit` (its share of what `max_records_per_trigger`
    leaves after the batch's windows; without a limit, as many as the windows held, at least
    `CONSUME_BATCH`).

    1. take what the windows' own fetches brought past their ends (`beyond`), at most
       MAX_HELD_AHEAD records, a prefix of each partition (a partition cut there takes no
       more: its next records would leave a gap);
    2. write the intent of EVERY uniform window (its end, and the offset copied up to: the end
       when nothing was received past it), then copy those records, every level, in offset
       order;
    3. for at most AHEAD_LINGER_S: consume what arrives (waiting up to AHEAD_WAIT_S), write the
       intents of the partitions it advances, then copy it; stop after a consume that brought
       fewer than AHEAD_MIN_RECORDS records (no backlog: the next batch takes what comes, and
       the task frees its core for the other queries). With `task.linger_s` (lingering,
       `treedist.records.ahead`), the task goes on without a backlog until linger_s, each
       consume waiting up to LINGER_WAIT_S, unless the query is stopping or its targets
       switched (`LingerWatch` on `live_targets`); `ahead.keep_copying` decides. A partition
       with a consumer error stops where it is (its records past that are read again by the
       next batch).

    The producers' `finish()` follows: the batch commits only once every copy landed.
    Streaming (step 3) holds no more than one consume's records.
    """
    uniform = {(w.topic, w.partition): w for w in task.windows if w.uniform}
    for tp in [tp for tp in beyond if tp not in uniform]:
        del beyond[tp]
    cap = task.ahead_limit if task.ahead_limit is not None else max(CONSUME_BATCH, task.count)
    stopped: set = _trim(beyond, min(cap, MAX_HELD_AHEAD))
    held = sum(len(v) for v in beyond.values())
    copied_to = {tp: w.until_offset for tp, w in uniform.items()}
    _copy_beyond(beyond, uniform, copied_to, list(uniform), on_records, intents, task.batch)
    began, took = time.monotonic(), AHEAD_MIN_RECORDS  # the first consume looks for a backlog
    watch = ahead.LingerWatch(live_targets if task.linger_s > 0 else None)
    while held < cap:
        left = max(AHEAD_LINGER_S, task.linger_s) - (time.monotonic() - began)
        if left <= 0:
            break
        messages = consumer.consume(min(CONSUME_BATCH, cap - held),
                                    ahead.consume_wait(took, AHEAD_MIN_RECORDS, AHEAD_WAIT_S, left))
        received: dict[tuple, list] = {}  # this consume's records per partition, in offset order
        for msg in messages:
            tp = (msg.topic(), msg.partition())
            if tp not in uniform or tp in stopped:
                continue
            if msg.error() is not None:
                if msg.error().code() != KafkaError._PARTITION_EOF:
                    log.info("%s[%s]: not copying ahead past offset %s: %s", tp[0], tp[1], msg.offset(), msg.error())
                    stopped.add(tp)
                continue
            received.setdefault(tp, []).append(msg)
        fresh: dict[tuple, list] = {}
        for tp, records in received.items():
            keep_beyond(fresh, tp, records, copied_to[tp])
        took = sum(len(v) for v in fresh.values())
        if fresh:
            _copy_beyond(fresh, uniform, copied_to, list(fresh), on_records, intents, task.batch)
        held += len(messages)
        if not ahead.keep_copying(took, time.monotonic() - began, task.linger_s, watch.ended(),
                                  min_records=AHEAD_MIN_RECORDS, backlog_s=AHEAD_LINGER_S):
            break


def _copy_beyond(records_by_tp: dict, uniform: dict, copied_to: dict, tps: list, on_records, intents: ahead.Intents,
                 batch: str) -> None:
    """Write the intents of `tps` (each partition's window end and the offset copied up to,
    after `records_by_tp`), then copy those records for every level."""
    tps, runs = sorted(tps), []
    for tp in tps:
        window, records = uniform[tp], records_by_tp.get(tp) or []
        if records:
            since, to = copied_to[tp], records[-1].offset() + 1
            ranges = tuple(LevelRange(r.level, since, to) for r in window.levels)
            runs.append((PartitionWindow(tp[0], tp[1], since, to, ranges), records))
            copied_to[tp] = to
    intents.write(batch, [(TopicPartitionKey(tp[0], tp[1]), uniform[tp].until_offset, copied_to[tp]) for tp in tps])
    for window, records in runs:
        on_records(window, window.topic, window.partition, records)


def _trim(beyond: dict, cap: int) -> set:
    """Keep at most `cap` records in `beyond`: a prefix of each partition's (so what is kept
    stays contiguous from the window's end), partitions in sorted order. Returns the
    partitions that lost records."""
    left, cut = cap, set()
    for tp in sorted(beyond):
        if len(beyond[tp]) > left:
            del beyond[tp][left:]
            cut.add(tp)
        left -= len(beyond[tp])
    return cut
