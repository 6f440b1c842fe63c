"""One task of a cluster's query: read its windows once, copy for every level, prove delivery.

Runs in an executor (a Python worker), inside the source's `read()`. Steps:

1. take a consumer and, per target, a producer from the worker's idle clients
   (`treedist.records.clients`); check that every topic of the task exists with its
   partitions on every level's target (named error otherwise), and with
   `on_uncopyable: dead_letter` the dead-letter topic; take each target topic's size limit
   (`treedist.records.uncopyable`: max.message.bytes, asked once per worker and topic);
2. assign the consumer to every window at its first offset and consume large batches; each
   run of records of one partition, cut at the window's end, goes to the RecordCopier, which
   produces the copies of every level (idempotent producer, acks=all, same partition);
3. a window is complete once a record at or past its end arrived, the consumer's position
   reached its end (compaction, transaction markers) or the broker reported end of
   partition there; no progress for `poll_timeout_s` fails the task naming the windows: a
   short batch is never returned;
   3b. copy ahead (`treedist.records.ahead`): the records already received past the end
   of a window that every level copies whole are copied too, and then, while a backlog keeps
   arriving, what the consumer fetches next (about a second at most; with
   `distributor.task_linger`, also without a backlog for that long), each partition's
   intent file written before its records are copied (not with `distributor.copy_ahead` off);
4. unassign the consumer, then `finish()` every producer: flush and check every delivery;
   any failed or undelivered record raises, so the task fails and Spark retries it. Why
   unassign first: a consumer left assigned keeps fetching while the producers flush
   (0.1-0.3 s per task under load), records that unassign then drops; a broker that answers
   a fetch at a partition's end at once (noida-db) turns that into a loop of empty fetches
   costing it and the task CPU;
5. only then hand the clients back for the next task and return the stats (the source
   yields one summary row; the batch reaches Spark's commit log only after every task of it
   returned). A failed task's clients are purged and dropped.

In `distributor.delivery: exactly_once` (`treedist.records.transactions`), step 1 builds a
transactional producer per target for this task instead of taking a kept one, fences the
previous producer of its id, reads the link's positions on the target and begins the
transaction; step 2 skips what the target already committed for this batch (a replay); there
is no step 3b; after step 4's `finish()` the positions (the windows' ends) are sent to the
transaction and it is committed, target by target; a failure aborts the open transactions.
"""

from __future__ import annotations

import gc
import logging
import time
from contextlib import contextmanager
from typing import Iterator, Sequence

from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

from treedist.records import ahead, clients, transactions, uncopyable
from treedist.records.copier import LevelCopy, RecordCopier, TaskStats
from treedist.records.errors import PipelineError
from treedist.records.plan import ClusterPlan
from treedist.records.positions import LevelRange, PartitionWindow, ReadTask
from treedist.kafka.read_positions import TopicPartitionKey
from treedist.kafka.clients import lingering_consumer_settings
from treedist.kafka.producer import DeliveryFailed, DeliveryProducer
from treedist.records.transactions import transactional_settings

log = logging.getLogger(__name__)

CONSUME_BATCH = 20_000
CONSUME_WAIT_S = 0.1
# Copying ahead (step 3b) goes on while a backlog keeps arriving: each consume waits at most
# AHEAD_WAIT_S (a fetch's round trip), the task stops at one that brings fewer than
# AHEAD_MIN_RECORDS records (under 50,000 records/s: no backlog, the next batch takes them),
# and after AHEAD_LINGER_S in any case (other queries' batches wait for the core).
AHEAD_WAIT_S = 0.02
AHEAD_MIN_RECORDS = 1_000
AHEAD_LINGER_S = 1.0
# The records the windows' fetches brought past their ends are held until their intents are
# written (Message objects: ~300 bytes each besides key and value): at most this many.
MAX_HELD_AHEAD = 100_000


class ReadStalled(PipelineError):
    """A planned window could not be read to its end within the poll timeout."""


_frozen = False


@contextmanager
def lean_gc() -> Iterator[None]:
    """Executor: keep Python's cycle collector out of the copy loop.

    Spark's reused worker runs a full `gc.collect()` after every task, and the loop's header
    lists trigger young-generation collections all the time; both scanned every object of the
    worker (pyspark, pyarrow and pandas modules included): ~8% of the executors' samples in
    py-spy. So (1) once per worker, objects alive at the first task (imports, the pooled
    clients' wrappers) move to the permanent generation that collections skip (`gc.freeze`:
    only what later becomes cyclic garbage among them is never freed, a bounded amount
    once per process); (2) automatic collection is off while a task runs: the copy path makes
    no reference cycles, and the daemon's collection after the task frees any other's.
    """
    global _frozen
    if not _frozen:
        gc.collect()
        gc.freeze()
        _frozen = True
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def run_task(plan: ClusterPlan, task: ReadTask) -> TaskStats:
    """Steps 1-5 of the module docstring for one task (executor), without the cycle
    collector (`lean_gc`)."""
    with lean_gc():
        return _run_task(plan, task)


def _run_task(plan: ClusterPlan, task: ReadTask) -> TaskStats:
    targets = dict(task.targets)
    # A lingering task tails its partitions: its consumer batches fetches
    # (`treedist.kafka.clients.LINGERING_CONSUMER`: fetching at every record that lands was
    # most of a lingering task's CPU). Kept idle under those settings, apart from the others.
    consumer_settings = lingering_consumer_settings(plan.consumer) if task.linger_s > 0 else plan.consumer
    consumer = clients.take_consumer(consumer_settings)
    producers: dict[str, DeliveryProducer] = {}
    exactly = plan.distributor.delivery == transactions.EXACTLY_ONCE
    txns: dict[str, transactions.TargetTransaction] = {}
    done = False
    try:
        wanted = _max_partition_per_topic(task.windows)
        level_targets = [targets.get(lp.level, lp.target) for lp in plan.levels]
        names = {t: _target_names(plan, wanted, t) for t in set(level_targets)}
        for target in level_targets:
            if target not in producers:
                if exactly:  # a new transactional producer per task and target (transactions docstring)
                    producers[target] = DeliveryProducer(transactional_settings(
                        plan.producers[target], plan.deployment_key, plan.cluster, target, _task_index()))
                else:
                    producers[target] = clients.take_producer(plan.producers[target])
                _check_target(producers[target], target, {names[target][t]: p for t, p in wanted.items()}
                              | _dead_letter_wanted(plan))
        limits = {t: _record_limits(plan, t, list(names[t].values())) for t in set(level_targets)}
        windows = task.windows
        if exactly:
            windows = _begin_transactions(plan, task, level_targets, names, producers, txns)
        else:
            clients.warm_producers(plan.warm_producers, [plan.producers[t] for t in producers])
        level_copies = [
            LevelCopy(
                lp.level, lp.mask, lp.bit, producers[t].raw.produce, producers[t].produce_when_queue_drains,
                None if all(k == v for k, v in names[t].items()) else names[t], limits[t], t,
            )
            for lp, t in zip(plan.levels, level_targets)
        ]
        distributor = plan.distributor
        limit = distributor.max_record_bytes
        copier = RecordCopier(
            plan.cluster, level_copies, plan.flags_header, plan.origin_header, distributor.malformed_flags,
            limit if limit is not None else uncopyable.record_limit(None, None, {}),
            distributor.on_uncopyable, distributor.dead_letter_topic, explicit_limit=limit is not None,
        )
        intents = ahead.Intents.of(plan.checkpoint, plan.store)
        visible = bool(task.batch) and intents.visible()
        beyond: dict | None = {} if visible and copies_ahead(plan, task) else None
        if visible and beyond is None:
            reset_intents(task, intents)
        read_windows(consumer, windows, copier.copy, plan.poll_timeout_s, beyond)
        if beyond is not None:
            copy_ahead(consumer, task, beyond, copier.copy, intents, plan.live_targets)
        consumer.unassign()
        for target, stats in zip(level_targets, copier.stats.levels):
            producers[target].count(stats.copied, 0)
        for producer in producers.values():
            producer.finish()
        for target, txn in txns.items():  # 4b. exactly_once: positions and copies committed together
            txn.commit(task.batch, {lv: transactions.window_ends(task.windows, lv, names[target]) for lv in txn.levels})
        copier.confirm()  # every copy acknowledged (and committed) now: the latency figures
        done = True
        return copier.stats
    finally:
        if done:  # the consumer was unassigned before the flush (step 4)
            clients.return_consumer(consumer_settings, consumer)
            if not exactly:  # transactional producers are never kept (transactions docstring)
                for target, producer in producers.items():
                    clients.return_producer(plan.producers[target], producer)
        else:
            for txn in txns.values():
                txn.abort()
            for producer in producers.values():
                producer.abandon()  # dropped, not returned: never reused after a failure
            consumer.close()


def _task_index() -> int:
    """The task's place in its batch (executor): part of its transactional.id, the same for
    every attempt of the task. 0 outside Spark (tests that call run_task directly)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    return context.partitionId() if context is not None else 0


def _begin_transactions(plan: ClusterPlan, task: ReadTask, level_targets: list[str], names: dict,
                        producers: dict[str, DeliveryProducer], txns: dict) -> list[PartitionWindow]:
    """exactly_once, before the copy (steps 1-3 of `treedist.records.transactions`): per
    target, fence the previous producer of the id, read the link's positions there, begin the
    transaction. Returns the windows less what the targets already committed for this batch."""
    committed: dict[tuple[int, str, int], int] = {}
    level_names: dict[int, dict[str, str]] = {}
    partitions = [(w.topic, w.partition) for w in task.windows]
    for lp, target in zip(plan.levels, level_targets):
        level_names[lp.level] = names[target]
    for target in dict.fromkeys(level_targets):
        levels = [lp.level for lp, t in zip(plan.levels, level_targets) if t == target]
        txn = transactions.TargetTransaction(producers[target], plan.cluster, target, levels, plan.producers[target],
                                             plan.metadata_timeout_s)
        txns[target] = txn
        txn.init()
        committed.update(txn.committed(task.batch, names[target], partitions))
        txn.begin()
    windows = transactions.skip_committed(task.windows, committed, level_names)
    if committed:
        log.info("%s: replay of batch %s: the targets committed %d of its positions already; copying from there",
                 plan.cluster, task.batch, len(committed))
    return windows


def _dead_letter_wanted(plan: ClusterPlan) -> dict[str, int]:
    """With on_uncopyable 'dead_letter', the dead-letter topic must exist on every target:
    checked at step 1 with the copies' topics, so that a missing one fails the task at its
    start, named, and not when a first oversized record comes."""
    distributor = plan.distributor
    return {distributor.dead_letter_topic: -1} if distributor.on_uncopyable == uncopyable.DEAD_LETTER else {}


def _record_limits(plan: ClusterPlan, target: str, topics: list[str]) -> dict[str, int]:
    """Target topic -> the most key + value bytes of a copy (step 1): max_record_bytes when set,
    else the topic's max.message.bytes on the target (asked once per worker and topic,
    `uncopyable.LIMITS`) and the producer's message.max.bytes."""
    settings = plan.producers[target]
    limit = plan.distributor.max_record_bytes
    if limit is not None:
        return {t: limit for t in topics}
    known = uncopyable.LIMITS.get(target, settings, topics)
    return {t: uncopyable.record_limit(None, known.get(t), settings) for t in topics}


def _max_partition_per_topic(windows: Sequence[PartitionWindow]) -> dict[str, int]:
    wanted: dict[str, int] = {}
    for w in windows:
        wanted[w.topic] = max(wanted.get(w.topic, -1), w.partition)
    return wanted


def _target_names(plan: ClusterPlan, topics: dict[str, int], target: str) -> dict[str, str]:
    """Each source topic's name on `target` (the clusters' topic formats)."""
    names = {}
    for topic in topics:
        name = plan.naming.translate(plan.cluster, topic, target)
        if name is None:
            raise PipelineError(
                f"topic {topic!r} of cluster {plan.cluster!r} has no name on target {target!r} under their topic formats"
            )
        names[topic] = name
    return names


def _check_target(producer: DeliveryProducer, target: str, wanted: dict[str, int]) -> None:
    try:
        producer.check_targets(wanted)
    except DeliveryFailed as err:  # add the target's name
        raise PipelineError(f"target cluster {target!r}: {err}") from err


def copies_ahead(plan: ClusterPlan, task: ReadTask) -> bool:
    """Executor, pure: whether this task copies ahead (step 3b), where it sees the query's
    intents directory: a task of a planned batch, with an ahead limit other than 0 (the
    planner's 0: `distributor.copy_ahead` off, or nothing left of `max_records_per_trigger`),
    with `copy_ahead` on in its plan. Never in exactly_once: the positions a transaction
    records end at the windows' ends, and records copied past them would be copied again by
    the next batch."""
    return (bool(task.batch) and task.ahead_limit != 0 and plan.distributor.copy_ahead
            and plan.distributor.delivery != transactions.EXACTLY_ONCE)


def reset_intents(task: ReadTask, intents: ahead.Intents) -> None:
    """Executor, a task of a planned batch that does not copy ahead, where it sees the
    query's intents: write "nothing copied ahead" (copied up to = the window's end) as the
    intent of each of its uniform windows, before it reads them.

    Why: an earlier attempt of this batch may have copied ahead, written its intents and died
    before its copies landed; a replay that does not copy ahead (the query restarted with
    `distributor.copy_ahead` off, `delivery: exactly_once`, or a smaller ahead share) would
    otherwise leave those intents, with this batch's token, for the planner to act upon once
    this attempt commits: the positions would move past copies that never landed (a gap).
    Raises CheckpointStoreError: the task fails and is retried, like a failed intent write."""
    intents.write(task.batch, [(TopicPartitionKey(w.topic, w.partition), w.until_offset, w.until_offset)
                               for w in task.windows if w.uniform])


def read_windows(consumer: Consumer, windows: Sequence[PartitionWindow], on_records, poll_timeout_s: float,
                 beyond: dict | None = None) -> None:
    """Read every window exactly, handing runs of one partition's records, in offset order,
    to `on_records(window, topic, partition, records)` (steps 2-3). With `beyond`, the
    records received past a window's end are kept there ((topic, partition) -> records in
    offset order) instead of dropped."""
    # An empty window (a lingering task's idle partition, `positions.idle_windows`) is
    # complete from the start: it is only tailed for copying ahead.
    next_offset = {(w.topic, w.partition): w.from_offset for w in windows}
    pending = {(w.topic, w.partition): w for w in windows if w.count > 0}
    consumer.assign([TopicPartition(w.topic, w.partition, w.from_offset) for w in windows])
    fetching = set(next_offset)
    last_progress = time.monotonic()
    while pending:
        # consume() waits until it has num_messages or the timeout passed: ask for what the
        # windows still hold, so a task whose records are all there does not sit out the wait.
        remaining = sum(w.until_offset - next_offset[tp] for tp, w in pending.items())
        messages = consumer.consume(max(1, min(CONSUME_BATCH, remaining)), CONSUME_WAIT_S)
        progressed = False
        run: list[Message] = []
        run_tp = None
        for msg in messages:
            if msg.error() is not None:
                progressed |= _flush(run_tp, run, pending, next_offset, on_records, beyond)
                run, run_tp = [], None
                _on_error(msg, pending, next_offset)
                continue
            tp = (msg.topic(), msg.partition())
            if tp != run_tp:
                progressed |= _flush(run_tp, run, pending, next_offset, on_records, beyond)
                run, run_tp = [], tp
            run.append(msg)
        progressed |= _flush(run_tp, run, pending, next_offset, on_records, beyond)
        if pending and len(messages) < remaining:
            progressed |= _advance_by_position(consumer, pending, next_offset)
        if pending and len(fetching) > len(pending):
            _stop_fetching_complete(consumer, fetching, pending, windows, beyond)
        if progressed:
            last_progress = time.monotonic()
        elif time.monotonic() - last_progress > poll_timeout_s:
            stuck = ", ".join(f"{w} at {next_offset[tp]}" for tp, w in sorted(pending.items()))
            raise ReadStalled(
                f"no progress for {poll_timeout_s:.0f}s reading {stuck}; the planned range cannot be read "
                f"fully (records lost or broker unreachable)"
            )


def _stop_fetching_complete(consumer: Consumer, fetching: set, pending: dict, windows: Sequence[PartitionWindow],
                            beyond: dict | None) -> None:
    """Unassign the partitions whose window is complete (step 3), so that the broker's answers
    and the consumer's queue carry only the windows still being read. Why: on a backlog, a
    complete partition kept being fetched (up to `max.partition.fetch.bytes` per fetch) and
    its records past the window's end crowded the other partitions out of the fetches; in a
    single-link probe on Kafka (1M-record batches over 8 partitions, 750k records behind each),
    5 windows were done after 4 s and the other 3 got nothing for the next 10 s
    (docs/performance.md, "Single link: bursts"). A partition stays assigned while copying
    ahead (step 3b) may still take its records: a uniform window, fewer than MAX_HELD_AHEAD
    held. `incremental_unassign` also drops what librdkafka queued for it."""
    held = sum(len(v) for v in beyond.values()) if beyond is not None else 0
    uniform = {(w.topic, w.partition) for w in windows if w.uniform}
    done = [tp for tp in fetching if tp not in pending
            and (beyond is None or tp not in uniform or held >= MAX_HELD_AHEAD)]
    if done:
        consumer.incremental_unassign([TopicPartition(t, p) for t, p in done])
        fetching.difference_update(done)


def _flush(tp, run: list, pending: dict, next_offset: dict, on_records, beyond: dict | None = None) -> bool:
    """Hand a run to the copier, cut at its window's end; True if it advanced the window.
    What lies past the end goes to `beyond` (if given), else is dropped."""
    if not run:
        return False
    window = pending.get(tp)
    if window is None:  # already complete: records of the next batch, prefetched
        if beyond is not None and tp in next_offset:
            _keep_beyond(beyond, tp, run, next_offset[tp])
        return False
    first = next_offset[tp]
    if run[0].offset() < first:
        run = [m for m in run if m.offset() >= first]
    if run and run[-1].offset() >= window.until_offset:
        if beyond is not None:
            _keep_beyond(beyond, tp, [m for m in run if m.offset() >= window.until_offset], window.until_offset)
        run = [m for m in run if m.offset() < window.until_offset]
    if not run:
        return False
    on_records(window, tp[0], tp[1], run)
    next_offset[tp] = run[-1].offset() + 1
    if next_offset[tp] >= window.until_offset:
        del pending[tp]
    return True


def _keep_beyond(beyond: dict, tp: tuple, records: list, floor: int) -> None:
    """Append `records` (one partition, offset order) past what `beyond` holds for `tp`,
    none below `floor` (the window's end)."""
    kept = beyond.setdefault(tp, [])
    low = kept[-1].offset() + 1 if kept else floor
    kept.extend(m for m in records if m.offset() >= low)


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
            _keep_beyond(fresh, tp, records, copied_to[tp])
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


def _on_error(msg: Message, pending: dict, next_offset: dict) -> None:
    err = msg.error()
    tp = (msg.topic(), msg.partition())
    if err.code() == KafkaError._PARTITION_EOF:
        window = pending.get(tp)
        if window is not None and msg.offset() >= window.until_offset:
            del pending[tp]
    elif err.retriable():
        log.warning("%s[%s]: retriable consumer error: %s", tp[0], tp[1], err)
    else:
        window = pending.get(tp)
        where = str(window) if window is not None else f"{tp[0]}[{tp[1]}]"
        raise PipelineError(f"{where}: consumer error at offset {msg.offset()}: {err}")


def _advance_by_position(consumer: Consumer, pending: dict, next_offset: dict) -> bool:
    """Offsets can be missing inside a window (compaction, transaction markers): the
    consumer's position then moves past them without a record."""
    progressed = False
    for position in consumer.position([TopicPartition(t, p) for t, p in pending]):
        tp = (position.topic, position.partition)
        if position.offset > next_offset[tp]:
            next_offset[tp] = position.offset
            progressed = True
        if position.offset >= pending[tp].until_offset:
            del pending[tp]
            progressed = True
    return progressed
