"""Exactly once (`distributor.delivery: exactly_once`): a task's copies to a target and the
source positions they cover, committed in one Kafka transaction on that target.

Runs in an executor (a Python worker), inside `treedist.records.task.run_task`. The pure
part (names, which records a replay skips, the positions a transaction records) is tested
without a broker; `TargetTransaction` does the I/O.

Where the positions live: consumer-group offsets on the TARGET, one group per link
(`treedist-link.<source>.L<level>`: named like treedist's own groups, `treedist-*`, which offset
distribution never copies), keyed by the target's name of the topic and the
partition (the copies keep the partition number), value = the next source offset to copy,
metadata = the batch token (`positions.batch_token` of the batch's end). They are written
with `send_offsets_to_transaction`, so they become visible exactly when the copies do.

Steps of one task, per target (`TargetTransaction`):

1. a new transactional producer, `transactional.id` =
   `treedist.<deployment>.<source>.<target>.t<index>` (`transactional_id`; index: the task's
   place in its batch); `init_transactions` fences any earlier producer with that id and
   aborts its open transaction (a killed treedist's, or a lost task's);
2. read the link's positions on the target (`committed()` of a consumer that has the
   link's group.id and read_committed, so Kafka answers with stable offsets only: never
   those of a transaction still open). A position carrying THIS batch's token lies inside the
   window: the target already committed this batch's copies below it (a replay after a
   crash): those records are skipped (`skip_committed`). So does a position carrying the
   token of a batch the driver abandoned, for the level's first batch after it (`task.trusted`:
   a distributor held while its target did not answer, treedist.records.holds). A position of another batch (the
   previous one: it equals the window's start) or none skips nothing;
3. `begin_transaction`; the task copies (steps 2-3 of run_task);
4. `finish()` proves every delivery, then `send_offsets_to_transaction` (the window ends of
   the levels that copy there, under this batch's token) and `commit_transaction`. A
   failure before the commit aborts the transaction (or leaves it to be aborted by step 1 of
   the retry, or by `transaction.timeout.ms`): the target holds none of its copies.

Why a new producer per task and not one kept by the worker (as at_least_once does): tasks of
a query run on whichever worker is free, so two workers would hold producers with the same
`transactional.id` and fence each other at every alternation (a fenced producer fails its
task). A producer per task costs its InitProducerId round trips once per task and target.
Why the id does not contain a digest of the task's partitions: the index is as stable for a
replayed batch (the same windows are packed the same way), and a replay under a partition
set that changed (a partition added in between) still fences the previous attempt.

Why `<deployment>` (`deployment_key`: 12 hex digits of the SHA-256 of the checkpoint root,
`ClusterPlan.deployment_key`): Kafka fences by `transactional.id` alone, on the whole target
cluster. Two deployments copying between the same clusters (two checkpoint locations, or two
etcd prefixes each with its own) would otherwise share `treedist.c1.c2.t0` and fence each
other's tasks at every batch: each failed, was retried, fenced the other, for ever. The
checkpoint root is what decides a deployment's batches: the same for every driver and worker of
one deployment (workers must share it, docs/control-plane.md) and after a restart, and two
deployments cannot share one. Not the etcd deployment id: `treedist run` has no etcd, and the
same hash serves both. The positions group keeps its name (its keys are the target's topic
names: two deployments copying into different topics do not meet there; two copying into the
same topic would duplicate every record anyway).

Upgrading from the ids without `<deployment>`: a transaction that a stopped (or killed)
treedist left open under an old id is not fenced by the new ids. The broker aborts it when its
`transaction.timeout.ms` runs out (delivery timeout + TRANSACTION_MARGIN_MS, 130 s by default);
until then read_committed readers of its partitions (verify, the next hop, users' consumers)
stop at its first record (the last stable offset) and wait. Nothing is lost or duplicated: the
batch's replay finds the positions committed under the same group name and copies the rest.
A clean stop leaves no transaction open.

The same holds when the checkpoint root's spelling changes (the checkpoint moved or restored
elsewhere, another mount point, `hdfs://nn` against `hdfs://nn:8020`): the key changes with it.
So move a checkpoint only after a clean stop. After a kill, a task that was left running (a
lost executor's) under the old key is not fenced by the new ids and could still commit its
transaction, which the replay also copies: duplicates in exactly_once, never a gap. Not done:
a random id kept in the checkpoint root, which would survive a move.

Zombies: a task whose executor Spark lost while its process goes on (a network partition; in
local mode an executor is lost only with its process) is retried under the same index, so the
retry's `init_transactions` fences it: its commit fails, whatever it produced is aborted.

Spark's checkpoint still decides what a batch is (its windows); the transaction decides what
the target holds. Targets commit one after another: a crash between two commits replays the
batch, and the target that committed skips it (step 2).
"""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
from dataclasses import replace
from typing import Iterable, Mapping, Sequence

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from treedist.kafka import clients
from treedist.kafka.retry import with_retries
from treedist.records.errors import PipelineError
from treedist.records.positions import LevelRange, PartitionWindow

log = logging.getLogger(__name__)

AT_LEAST_ONCE = "at_least_once"
EXACTLY_ONCE = "exactly_once"
# librdkafka requires message.timeout.ms <= transaction.timeout.ms; the margin lets a task's
# flush time out (and fail the task) before the broker aborts its transaction.
TRANSACTION_MARGIN_MS = 10_000
# Consumer settings the positions consumer does not need from the source's settings.
_GROUP_CONSUMER = {"enable.auto.commit": "false", "isolation.level": "read_committed"}


class TransactionError(PipelineError):
    """A transaction or a position read on a target failed (the task fails; Spark retries)."""


class TransactionsUnsupported(PipelineError):
    """A cluster that cannot run Kafka transactions, in exactly_once mode; `code`: the
    librdkafka error code of its InitProducerId probe (None when several clusters are named);
    `clusters`: the clusters named, when known."""

    def __init__(self, message: str, code: int | None = None, clusters: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.code = code
        self.clusters = clusters


# -- pure ---------------------------------------------------------------------------------

def positions_group(source: str, level: int) -> str:
    """The consumer group, on the link's target, that holds the link's source positions."""
    return f"treedist-link.{source}.L{level}"


def deployment_key(checkpoint_root: str) -> str:
    """The deployment's part of its transactional.ids: 12 hex digits of the SHA-256 of its
    checkpoint root (`plan.checkpoint_root`: an absolute path, or a URI); why, in the module
    docstring."""
    return hashlib.sha256(checkpoint_root.encode()).hexdigest()[:12]


def transactional_id(deployment: str, source: str, target: str, index: int) -> str:
    """`deployment`: `deployment_key`; `index`: the task's place in its batch."""
    return f"treedist.{deployment}.{source}.{target}.t{index}"


def transactional_settings(settings: Mapping[str, str], deployment: str, source: str, target: str,
                           index: int) -> dict[str, str]:
    """Producer settings of one task's transaction to `target`."""
    delivery = int(settings.get("delivery.timeout.ms", settings.get("message.timeout.ms", "120000")))
    out = dict(settings)
    out["transactional.id"] = transactional_id(deployment, source, target, index)
    out.setdefault("transaction.timeout.ms", str(delivery + TRANSACTION_MARGIN_MS))
    return out


def group_settings(settings: Mapping[str, str], group: str) -> dict[str, str]:
    """Consumer settings (connection and security taken from the target's producer
    settings) of the consumer whose group metadata and committed offsets stand for `group`."""
    producer_only = ("transactional.", "enable.idempotence", "acks", "linger.ms", "batch.", "queue.buffering.",
                     "delivery.", "message.timeout.ms", "allow.auto.create.topics", "compression.", "retries",
                     "max.in.flight", "transaction.")
    kept = {k: v for k, v in settings.items() if not k.startswith(producer_only)}
    return {**kept, **_GROUP_CONSUMER, "group.id": group}


def skip_committed(windows: Sequence[PartitionWindow], committed: Mapping[tuple[int, str, int], int],
                   names: Mapping[int, Mapping[str, str]]) -> list[PartitionWindow]:
    """The windows with every level's range starting at what its target already committed
    for this batch (`committed`: (level, target topic, partition) -> next offset, only
    positions carrying this batch's token); a window no level copies any more is left out.

    A position outside [from, until) of the level's range is not trusted for skipping (it
    belongs to the same batch only if it lies inside): below it the records are copied."""
    out = []
    for w in windows:
        ranges = []
        for r in w.levels:
            done = committed.get((r.level, names[r.level][w.topic], w.partition))
            start = done if done is not None and r.from_offset <= done <= r.until_offset else r.from_offset
            ranges.append(LevelRange(r.level, start, r.until_offset))
        live = [r for r in ranges if r.from_offset < r.until_offset]
        if not live:
            continue
        if all(a == b for a, b in zip(ranges, w.levels)):
            out.append(w)
        else:
            out.append(replace(w, from_offset=min(r.from_offset for r in live), levels=tuple(ranges)))
    return out


def window_ends(windows: Iterable[PartitionWindow], level: int, names: Mapping[str, str]) -> dict[tuple[str, int], int]:
    """(target topic, partition) -> the end of `level`'s range in each window: the positions
    a transaction records for the level."""
    return {(names[w.topic], w.partition): r.until_offset for w in windows for r in w.levels if r.level == level}


# What a probe's InitProducerId answer says (`transactions_verdict`).
HAS_TRANSACTIONS, NO_TRANSACTIONS, CHECK_LATER = "ok", "none", "later"
# Answers that refuse transactions whatever the cluster's state: a broker too old for
# InitProducerId or transactional produce, ACLs refusing the transactional id or idempotent
# writes, a transaction.timeout.ms above the broker's transaction.max.timeout.ms.
REFUSALS = frozenset({
    KafkaError.UNSUPPORTED_VERSION, KafkaError._UNSUPPORTED_FEATURE, KafkaError.UNSUPPORTED_FOR_MESSAGE_FORMAT,
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    KafkaError.INVALID_TRANSACTION_TIMEOUT,
})
# Answers of a transaction coordinator that exists but is not ready yet (its log loading, the
# coordinator moving, a previous transaction of the id finishing): transactions run soon.
SETTLING = frozenset({KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.NOT_COORDINATOR,
                      KafkaError.CONCURRENT_TRANSACTIONS})


def transactions_verdict(code: int | None, answers_after: bool) -> str:
    """What the InitProducerId probe of a cluster that answered metadata before it says.

    `code`: the probe's error code (None: it got a producer id); `answers_after`: the cluster
    answered metadata after the probe. A refusal (REFUSALS) means no transactions, a
    coordinator not ready yet (SETTLING) a check later. Any other failure is a timeout in
    practice: librdkafka retries FindCoordinator and InitProducerId until the call's timeout,
    both for a cluster that went down meanwhile and for one that has no transaction
    coordinator (e.g. a transaction log it cannot create: Kafka answers FindCoordinator with
    COORDINATOR_NOT_AVAILABLE for ever), and returns _TIMED_OUT for both; so only the
    cluster's answer afterwards tells them apart: it answers -> no transactions; it does not
    -> a check when it answers."""
    if code is None:
        return HAS_TRANSACTIONS
    if code in REFUSALS:
        return NO_TRANSACTIONS
    if code in SETTLING or not answers_after:
        return CHECK_LATER
    return NO_TRANSACTIONS


def clusters_to_probe(reached: Mapping[str, str | None]) -> list[str]:
    """The clusters whose transactions can be probed now: those that answered metadata
    (`reached`: cluster -> None if it answered, else why not), in the given order. A cluster
    that is down cannot tell a missing transaction coordinator from its own absence."""
    return [name for name, why in reached.items() if why is None]


# -- executor I/O ---------------------------------------------------------------------------

_GROUP_CONSUMERS: dict[tuple, Consumer] = {}


def _group_consumer(settings: Mapping[str, str]) -> Consumer:
    """A consumer with the group's id, never subscribed (it joins no group): its group
    metadata and its committed() reads. Kept by the worker: it holds no state of a task."""
    key = tuple(sorted(settings.items()))
    consumer = _GROUP_CONSUMERS.get(key)
    if consumer is None:
        consumer = _GROUP_CONSUMERS[key] = clients.consumer(settings)
    return consumer


class TargetTransaction:
    """One task's transaction on one target (executor): steps 1-4 of the module docstring."""

    def __init__(self, producer, source: str, target: str, levels: Sequence[int], settings: Mapping[str, str],
                 timeout_s: float) -> None:
        self.producer = producer  # a DeliveryProducer built with transactional_settings
        self.source = source
        self.target = target
        self.levels = list(levels)
        self.timeout_s = timeout_s
        self._consumers = {lv: _group_consumer(group_settings(settings, positions_group(source, lv))) for lv in levels}
        self._open = False

    def init(self) -> None:
        """Step 1 (fences the previous producer of this id)."""
        try:
            self.producer.raw.init_transactions(self.timeout_s)
        except KafkaException as err:
            raise TransactionError(f"target cluster {self.target!r}: init_transactions failed: {err}") from err

    def committed(self, batch: str, names: Mapping[str, str], partitions: Iterable[tuple[str, int]],
                  trusted: Iterable[tuple[int, str]] = ()) -> dict[tuple[int, str, int], int]:
        """Step 2: (level, target topic, partition) -> next offset, for positions of `batch`,
        or of a batch the driver abandoned that this one replaces for the level (`trusted`:
        (level, token) pairs, treedist.records.holds)."""
        tokens = {level: {batch} for level in self._consumers}
        for level, token in trusted:
            tokens.setdefault(level, set()).add(token)
        wanted = sorted({(names[t], p) for t, p in partitions})
        out: dict[tuple[int, str, int], int] = {}
        if not wanted or not batch:
            return out
        for level, consumer in self._consumers.items():
            # Retried, bounded: Kafka answers NOT_COORDINATOR while it loads __consumer_offsets
            # (a fresh or restarted broker).
            found = with_retries(
                lambda: consumer.committed([TopicPartition(t, p) for t, p in wanted], timeout=self.timeout_s),
                what=f"target cluster {self.target!r}: reading the positions of {positions_group(self.source, level)} "
                     f"failed", error=TransactionError, attempts=8, first_backoff_s=0.2, max_backoff_s=5.0,
            )
            for tp in found:
                if tp.error is None and tp.offset >= 0 and tp.metadata in tokens[level]:
                    out[(level, tp.topic, tp.partition)] = tp.offset
        return out

    def begin(self) -> None:
        """Step 3."""
        try:
            self.producer.raw.begin_transaction()
        except KafkaException as err:
            raise TransactionError(f"target cluster {self.target!r}: begin_transaction failed: {err}") from err
        self._open = True

    def commit(self, batch: str, positions: Mapping[int, Mapping[tuple[str, int], int]]) -> None:
        """Step 4, after `finish()`: the positions (level -> (target topic, partition) -> next
        offset) under `batch`'s token, then the commit."""
        raw = self.producer.raw
        try:
            for level, ends in positions.items():
                offsets = [TopicPartition(t, p, o, batch) for (t, p), o in sorted(ends.items())]
                if offsets:
                    raw.send_offsets_to_transaction(offsets, self._consumers[level].consumer_group_metadata(),
                                                    self.timeout_s)
            raw.commit_transaction(self.timeout_s)
        except KafkaException as err:
            raise TransactionError(f"target cluster {self.target!r}: committing the transaction failed: {err}") from err
        self._open = False

    def abort(self) -> None:
        """After a failure, best effort: abort the open transaction (the retry's step 1, or
        the broker's transaction timeout, aborts it otherwise)."""
        if not self._open:
            return
        self._open = False
        try:
            self.producer.raw.abort_transaction(min(self.timeout_s, 10.0))
        except KafkaException as err:
            log.warning("target cluster %r: abort_transaction failed (the next attempt fences it): %s", self.target, err)


# A coordinator still SETTLING is asked again, this many times at most, after 1, 2, 4, ... s:
# a fresh cluster of three nodes creates its transaction log (50 partitions, replication
# factor 3) at the first InitProducerId and answers NOT_COORDINATOR until its leaders load it.
SETTLING_ATTEMPTS = 5


def probe_transactions(cluster: str, settings: Mapping[str, str], timeout_s: float = 15.0) -> None:
    """Driver (preflight): can `cluster` run transactions? An InitProducerId with a probe
    transactional.id (unique, so it fences nobody); raise TransactionsUnsupported naming the
    cluster otherwise (a broker without transactions, or without a transaction coordinator),
    with the last thing the broker said. A coordinator that is not ready yet (SETTLING) is
    asked again, bounded (SETTLING_ATTEMPTS), each time with a new probe producer.
    librdkafka's logs of the probe are kept off the console: the error is one line."""
    for attempt in range(1, SETTLING_ATTEMPTS + 1):
        try:
            _probe_once(cluster, settings, timeout_s)
            return
        except TransactionsUnsupported as err:
            if attempt == SETTLING_ATTEMPTS or err.code not in SETTLING:
                raise
            log.info("cluster %r: transaction coordinator not ready (%s); asking again in %d s", cluster, err, 2 ** (attempt - 1))
            time.sleep(2 ** (attempt - 1))


def _probe_once(cluster: str, settings: Mapping[str, str], timeout_s: float) -> None:
    said = _LastWords()
    quiet = logging.getLogger(f"treedist.preflight.transactions.{uuid.uuid4().hex}")
    quiet.propagate = False
    quiet.setLevel(logging.DEBUG)
    quiet.addHandler(said)
    conf = {k: v for k, v in settings.items() if k != "delivery.report.only.error"}
    producer = clients.producer(conf, **{
        "transactional.id": f"treedist.preflight.{uuid.uuid4().hex}", "logger": quiet,
        "transaction.timeout.ms": str(int(conf.get("delivery.timeout.ms", 120000)) + TRANSACTION_MARGIN_MS)})
    try:
        producer.init_transactions(timeout_s)
    except KafkaException as err:
        error = err.args[0] if err.args and isinstance(err.args[0], KafkaError) else None
        detail = error.str() if error is not None else str(err)
        if said.last:
            detail += f"; last from the broker: {said.last}"
        raise TransactionsUnsupported(
            f"cluster {cluster!r} does not support Kafka transactions, which distributor.delivery: exactly_once "
            f"needs ({detail})", error.code() if error is not None else KafkaError._FAIL
        ) from None
    finally:
        producer.flush(0)
        logging.Logger.manager.loggerDict.pop(quiet.name, None)


class _LastWords(logging.Handler):
    """The last log line of a probe's client, without librdkafka's thread prefix."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.last = ""

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        self.last = message.split(": ", 1)[-1] if "]: " in message else message
