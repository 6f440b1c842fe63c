"""One task of a cluster's query: read its windows once, copy for every level, prove delivery.

Runs in an executor (a Python worker), inside the source's `read()`. Steps:

1. take a consumer and, per target, a producer from the worker's idle clients
   (`treedist.records.client_pool`); check that every topic of the task exists with its
   partitions on every level's target (named error otherwise), and with
   `on_uncopyable: dead_letter` the dead-letter topic; take each target topic's size limit
   (`treedist.records.uncopyable`: max.message.bytes, asked once per worker and topic);
2. assign the consumer to every window at its first offset and consume large batches; each
   run of records of one partition, cut at the window's end, goes to the RecordCopier, which
   produces the copies of every level (idempotent producer, acks=all, same partition)
   (`treedist.records.window_read`);
3. a window is complete once a record at or past its end arrived, the consumer's position
   reached its end (compaction, transaction markers) or the broker reported end of
   partition there; no progress for `poll_timeout_s` fails the task naming the windows: a
   short batch is never returned;
   3b. copy ahead (`treedist.records.ahead_copy`, intents in `treedist.records.ahead`): the records already received past the end
   of a window that every level copies whole are copied too, and then, while a backlog keeps
   arriving, what the consumer fetches next (about a second at most; with
   `distributor.task_linger`, also without a backlog for that long), each partition's
   intent file written before its records are copied (not with `distributor.copy_ahead` off);
4. unassign the consumer, then `finish()` every producer: flush and check every delivery;
   any failed or undelivered record raises, so the task fails and Spark retries it. Why
   unassign first: a consumer left assigned keeps fetching while the producers flush,
   records that unassign then drops; a broker that answers
   a fetch at a partition's end at once (noida-db) turns that into a loop of empty fetches
   costing it and the task CPU;
5. only then hand the clients back for the next task and return the stats (the source
   yields one summary row; the batch reaches Spark's commit log only after every task of it
   returned). A failed task's clients are purged and dropped.

The delivery mode is an object the task is given (`treedist.records.delivery`): it supplies
each target's producer at step 1, prepares the copy before step 2 (at least once: warm the
kept producers; exactly once: fence, read the link's positions, begin a transaction per target
and skip what a replay's targets already committed), decides whether step 3b may run, commits
after step 4's `finish()` (exactly once: positions and copies, target by target) and takes the
producers back at step 5 (kept, or dropped), or aborts on a failure.
"""

from __future__ import annotations

import gc
import logging
from contextlib import contextmanager
from typing import Iterator, Sequence

from treedist.kafka.clients import lingering_consumer_settings
from treedist.kafka.producer import DeliveryFailed, DeliveryProducer
from treedist.kafka.read_positions import TopicPartitionKey
from treedist.records import ahead, client_pool, holds, transactions, uncopyable
from treedist.records.ahead_copy import copy_ahead
from treedist.records.copier import LevelCopy, RecordCopier, TaskStats
from treedist.records.delivery import Delivery, delivery_of
from treedist.records.errors import PipelineError
from treedist.records.plan import ClusterPlan
from treedist.records.positions import PartitionWindow, ReadTask
from treedist.records.window_read import read_windows

log = logging.getLogger(__name__)


_frozen = False


@contextmanager
def lean_gc() -> Iterator[None]:
    """Executor: keep Python's cycle collector out of the copy loop.

    Spark's reused worker runs a full `gc.collect()` after every task, and the loop's header
    lists trigger young-generation collections all the time; both scanned every object of the
    worker (pyspark, pyarrow and pandas modules included; docs/performance.md, "Figures behind
    the code"). So (1) once per worker, objects alive at the first task (imports, the pooled
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


def run_task(plan: ClusterPlan, task: ReadTask, delivery: Delivery | None = None) -> TaskStats:
    """Steps 1-5 of the module docstring for one task (executor), without the cycle
    collector (`lean_gc`). `delivery`: the plan's delivery mode (`delivery_of(plan)`) unless given."""
    with lean_gc():
        return _run_task(plan, task, delivery if delivery is not None else delivery_of(plan))


def _run_task(plan: ClusterPlan, task: ReadTask, delivery: Delivery) -> TaskStats:
    targets = dict(task.targets)
    # A lingering task tails its partitions: its consumer batches fetches
    # (`treedist.kafka.clients.LINGERING_CONSUMER`). Kept idle under those settings, apart
    # from the others.
    consumer_settings = lingering_consumer_settings(plan.consumer) if task.linger_s > 0 else plan.consumer
    consumer = client_pool.take_consumer(consumer_settings)
    producers: dict[str, DeliveryProducer] = {}
    done = False
    try:
        wanted = _max_partition_per_topic(task.windows)
        # A held level (its target does not answer, treedist.records.holds) copies nothing:
        # no client of its target is made.
        active = [lp for lp in plan.levels if lp.level not in task.held]
        level_targets = [targets.get(lp.level, lp.target) for lp in active]
        names = {t: _target_names(plan, wanted, t) for t in set(level_targets)}
        for target in level_targets:
            if target not in producers:
                producers[target] = delivery.producer(plan, target)
                _check_target(producers[target], target, {names[target][t]: p for t, p in wanted.items()}
                              | _dead_letter_wanted(plan))
        limits = {t: _record_limits(plan, t, list(names[t].values())) for t in set(level_targets)}
        windows = holds.complete_ranges(delivery.begin(plan, task, active, level_targets, names, producers),
                                        [lp.level for lp in plan.levels])
        chosen = dict(zip((lp.level for lp in active), level_targets))
        copier = _copier(plan, [
            LevelCopy(
                lp.level, lp.mask, lp.bit, producers[t].raw.produce, producers[t].produce_when_queue_drains,
                None if all(k == v for k, v in names[t].items()) else names[t], limits[t], t,
            ) if t is not None else _held_copy(lp)
            for lp, t in ((lp, chosen.get(lp.level)) for lp in plan.levels)
        ])
        intents = ahead.Intents.of(plan.checkpoint, plan.store)
        visible = bool(task.batch) and intents.visible()
        beyond: dict | None = {} if visible and delivery.copies_ahead and copies_ahead(plan, task) else None
        if visible and beyond is None:
            reset_intents(task, intents)
        read_windows(consumer, windows, copier.copy, plan.poll_timeout_s, beyond)
        if beyond is not None:
            copy_ahead(consumer, task, beyond, copier.copy, intents, plan.live_targets)
        consumer.unassign()
        for lp, stats in zip(plan.levels, copier.stats.levels):
            if lp.level in chosen:
                producers[chosen[lp.level]].count(stats.copied, 0)
        for producer in producers.values():
            producer.finish()
        delivery.commit(task, names)  # 4b.
        copier.confirm()  # every copy acknowledged (and committed) now: the latency figures
        done = True
        return copier.stats
    finally:
        if done:  # the consumer was unassigned before the flush (step 4)
            client_pool.return_consumer(consumer_settings, consumer)
            delivery.release(plan, producers)
        else:
            delivery.abort()
            for producer in producers.values():
                producer.abandon()  # dropped, not returned: never reused after a failure
            consumer.close()


def _copier(plan: ClusterPlan, level_copies: list[LevelCopy]) -> RecordCopier:
    distributor = plan.distributor
    limit = distributor.max_record_bytes
    return RecordCopier(
        plan.cluster, level_copies, plan.flags_header, plan.origin_header, distributor.malformed_flags,
        limit if limit is not None else uncopyable.record_limit(None, None, {}),
        distributor.on_uncopyable, distributor.dead_letter_topic, explicit_limit=limit is not None,
    )


def _held_copy(lp) -> LevelCopy:
    """The copier's part for a held level: its windows' ranges are empty
    (`holds.without_held`), so nothing ever reaches its produce."""
    def refuse(*_args, **_kwargs):
        raise PipelineError(f"{lp.name} is held (its target does not answer); it copies nothing in this task")

    return LevelCopy(lp.level, lp.mask, lp.bit, refuse, refuse, None, None, "(held)")


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
