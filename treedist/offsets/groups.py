"""One cluster's consumer groups through the Admin API, and record timestamps (driver side).

`GroupClient` wraps one AdminClient and one assign-only Consumer (never joins a group; its
`treedist-offsets-*` group id is one of treedist's own, never distributed), both built by
`treedist.kafka.clients`; topics and offsets are read through `treedist.kafka.watermarks`
(OffsetReader, over the same AdminClient), ranges of records through `treedist.kafka.ranges`. Every broker call
is bounded by `timeout_s` and retried with `treedist.kafka.retry.with_retries`; after the
last attempt it raises `ClusterUnreachable` naming the cluster, and the group or topic where
there is one. A group coordinator that is busy (Apache Kafka's answers while it loads its
`__consumer_offsets` partitions, right after a broker start or when that topic was just
created, or while coordination moves) is waited for within each attempt, up to
COORDINATOR_WAIT_S, with doubling backoff.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from typing import Iterable, Iterator, Mapping

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from confluent_kafka import Consumer, Message

from treedist.kafka import clients, ranges
from treedist.kafka.admin import groups_committed
from treedist.kafka.errors import ClusterUnreachable
from treedist.kafka.watermarks import OffsetReader, TopicPartitionKey
from treedist.kafka.retry import with_retries

log = logging.getLogger(__name__)
TP = tuple[str, int]  # (physical topic, partition)
# Transient answers of a group coordinator. librdkafka does not mark them all retriable (the
# per-broker errors of ListConsumerGroups are not), and an unmarked broker error counts as a
# refusal (treedist.kafka.retry.refused): a pass would fail on every fresh Kafka cluster.
COORDINATOR_BUSY = frozenset({KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE,
                              KafkaError.NOT_COORDINATOR})
COORDINATOR_WAIT_S = 30.0  # loading 50 offsets partitions took a few seconds on a busy 2-core machine

# for_times reads at most this many records past offsets_for_times' answer per partition
SCAN_LIMIT = 100_000


@dataclass(frozen=True)
class Commit:
    """A group's committed offset of one partition, with its metadata string."""

    topic: str
    partition: int
    offset: int
    metadata: str


class GroupClient:
    """Reads and writes one cluster's consumer-group offsets (driver; one thread at a time)."""

    def __init__(self, cluster: str, client_config: Mapping[str, object], timeout_s: float = 10.0, attempts: int = 3,
                 read_past_markers: bool = True):
        self.cluster = cluster
        self._read_past_markers = read_past_markers  # step 2 of for_times
        self._conf = dict(client_config)
        self._timeout_s = timeout_s
        self._attempts = attempts
        self._admin = clients.admin(self._conf)
        # read_committed: an end is the last stable offset, never past the records of a
        # transaction still open (exactly_once copies in flight); a group placed at the end
        # must not lie past records that become readable when it commits
        self._offsets = OffsetReader(self._conf, cluster=cluster, timeout_s=timeout_s, read_committed=True,
                                     admin=self._admin, attempts=attempts, first_backoff_s=0.5, max_backoff_s=4.0)
        self._consumer: Consumer | None = None

    def _retry(self, call, what: str):
        # Retriable broker errors and transport errors are retried with backoff; a busy
        # coordinator is waited for (_patient); a refusal (not authorised) is raised at once.
        return with_retries(_patient(call, f"{what} on cluster {self.cluster!r}"), what=f"{what} on cluster {self.cluster!r} failed",
                            error=ClusterUnreachable, attempts=self._attempts, first_backoff_s=0.5, max_backoff_s=4.0,
                            fail_fast_on_refusal=True)

    def groups(self) -> list[str]:
        """Every consumer group the cluster knows."""
        def call() -> list[str]:
            result = self._admin.list_consumer_groups(request_timeout=self._timeout_s).result(timeout=self._timeout_s)
            if result.errors:
                raise KafkaException(result.errors[0])
            return sorted(g.group_id for g in result.valid)
        return self._retry(call, "listing consumer groups")

    def commits(self, groups: Iterable[str]) -> dict[str, list[Commit]]:
        """group -> its committed offsets with metadata (one request per group, sent at once)."""
        groups = list(groups)
        if not groups:
            return {}

        def call() -> dict[str, list[Commit]]:
            # groups_committed describes the groups first (librdkafka#5040: see its docstring)
            return {group: [Commit(tp.topic, tp.partition, tp.offset, tp.metadata or "")
                            for tp in result.topic_partitions if tp.error is None and tp.offset >= 0]
                    for group, result in groups_committed(self._admin, groups, self._timeout_s).items()}
        return self._retry(call, f"reading committed offsets of {len(groups)} groups")

    def active(self, groups: Iterable[str]) -> dict[str, int]:
        """group -> number of active members (0 for an empty or unknown group)."""
        groups = sorted(set(groups))
        if not groups:
            return {}

        def call() -> dict[str, int]:
            futures = self._admin.describe_consumer_groups(groups, request_timeout=self._timeout_s)
            return {g: len(f.result(timeout=self._timeout_s).members) for g, f in futures.items()}
        return self._retry(call, f"describing groups {groups[:3]}{'...' if len(groups) > 3 else ''}")

    def topics(self) -> dict[str, int]:
        """physical topic -> partition count (`treedist.kafka.watermarks.OffsetReader`)."""
        return self._offsets.topics()

    def ends(self, tps: Iterable[TP]) -> dict[TP, int]:
        wanted = [TopicPartitionKey(*tp) for tp in tps]
        return self._every(self._offsets.offsets(wanted, "latest"), wanted, "end offsets")

    def low(self, tps: Iterable[TP]) -> dict[TP, int]:
        wanted = [TopicPartitionKey(*tp) for tp in tps]
        return self._every(self._offsets.offsets(wanted, "earliest"), wanted, "start offsets")

    def _every(self, found: Mapping, tps: Iterable, what: str) -> dict:
        """`found`, unless a partition asked for is gone (a topic deleted during the pass): then
        ClusterUnreachable naming it, and the pass is tried again later."""
        gone = sorted(set(tps) - set(found))
        if gone:
            raise ClusterUnreachable(f"cluster {self.cluster!r}: reading {what}: {gone[:3]} no longer exist")
        return {(tp[0], tp[1]): offset for tp, offset in found.items()}

    def for_times(self, wanted: Mapping[TP, int]) -> dict[TP, int | None]:
        """tp -> offset of the first record whose timestamp is >= the given ms; None when no
        committed record is that recent.

        Two steps. 1: ListOffsets by timestamp (offsets_for_times), which answers with the
        first offset whose *batch* is that recent, control batches included. A transaction's
        commit marker carries the time its coordinator wrote it, not the time of the records
        it commits: on a partition of exactly_once copies (one marker per batch), whose
        records keep their origin's older timestamps, the answer can be a marker's offset
        well before the record the timestamp points at (every copy in between would be read
        again). 2: the records from that answer are
        read (every partition at once, read_committed) up to the first one that is that
        recent; only markers up to the end means no such record yet. Past SCAN_LIMIT records,
        or when the read makes no progress, the answer of step 1 stands: repeats, never a skip.
        Step 2 is skipped without `read_past_markers` (at_least_once deployments: their
        copies carry no markers, and it costs a fetch per partition)."""
        found = self._offsets.offsets_for_times({TopicPartitionKey(*tp): ts for tp, ts in wanted.items()})
        answer = self._every(found, wanted, "offsets for times")
        if not self._read_past_markers:
            return answer
        return self._first_at_or_after(answer, wanted)

    def _first_at_or_after(self, answer: dict[TP, int | None], wanted: Mapping[TP, int]) -> dict[TP, int | None]:
        """Step 2 of for_times."""
        out = dict(answer)
        todo = {tp: off for tp, off in answer.items() if off is not None}
        if not todo:
            return out
        ends = self.ends(todo)
        todo = {tp: off for tp, off in todo.items() if off < ends.get(tp, 0)}
        if not todo:
            return out
        consumer = self._reader()
        consumer.incremental_assign([TopicPartition(t, p, off) for (t, p), off in todo.items()])
        scanned: dict[TP, int] = {}
        deadline = time.monotonic() + self._timeout_s

        def settle(tp: TP, offset: int | None) -> None:
            out[tp] = offset
            del todo[tp]
            consumer.incremental_unassign([TopicPartition(*tp)])

        try:
            while todo and time.monotonic() < deadline:
                for msg in consumer.consume(num_messages=5000, timeout=0.2):
                    tp = (msg.topic(), msg.partition())
                    if tp not in todo:
                        continue
                    if _at_end(msg):  # nothing that recent but markers: no record yet (the caller retries)
                        settle(tp, None)
                        continue
                    if msg.error() is not None or msg.offset() < todo[tp]:
                        continue
                    scanned[tp] = scanned.get(tp, 0) + 1
                    if msg.timestamp()[1] >= wanted[tp]:
                        settle(tp, msg.offset())
                    elif scanned[tp] >= SCAN_LIMIT:
                        settle(tp, answer[tp])
        finally:
            consumer.unassign()
        if todo:
            log.info("cluster %r: reading the records after offsets_for_times' answer made no progress in %.0f s for "
                     "%d partitions, e.g. %s; its answer stands", self.cluster, self._timeout_s, len(todo), sorted(todo)[:3])
        return out

    def commit(self, group: str, commits: Iterable[Commit]) -> None:
        """Commit the offsets (with metadata) for `group`; creates the group if it has none."""
        tps = [TopicPartition(c.topic, c.partition, c.offset, metadata=c.metadata) for c in commits]
        if not tps:
            return

        def call() -> None:
            futures = self._admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, tps)],
                                                               request_timeout=self._timeout_s)
            result = futures[group].result(timeout=self._timeout_s)
            for tp in result.topic_partitions:
                if tp.error is not None:
                    raise KafkaException(tp.error)
        self._retry(call, f"committing {len(tps)} offsets of group {group!r}")

    def record_timestamps(self, wanted: Mapping[TP, int], timeout_s: float | None = None) -> dict[TP, tuple[int, int] | None]:
        """tp -> (offset, timestamp ms) of the first record at or after the given offset; None
        when the partition holds no such record (deleted, or past the end). One assign-only
        consumer reads all partitions at once; a partition at its end is known from the end
        offsets, so the read waits only for partitions that have a record."""
        if not wanted:
            return {}
        ends = self.ends(wanted)
        out: dict[TP, tuple[int, int] | None] = {tp: None for tp in wanted}
        todo = {tp: off for tp, off in wanted.items() if off < ends.get(tp, 0)}
        if not todo:
            return out
        consumer = self._reader()
        consumer.incremental_assign([TopicPartition(t, p, off) for (t, p), off in todo.items()])
        deadline = time.monotonic() + (timeout_s or self._timeout_s)
        try:
            while todo and time.monotonic() < deadline:
                for msg in consumer.consume(num_messages=1000, timeout=0.2):
                    tp = (msg.topic(), msg.partition())
                    if _at_end(msg) and tp in todo:
                        # Nothing at or after the offset but what is not a record (a compacted
                        # gap, a transaction marker at the end): no such record.
                        del todo[tp]
                        consumer.incremental_unassign([TopicPartition(*tp)])
                        continue
                    if msg.error() is not None or tp not in todo or msg.offset() < todo[tp]:
                        continue
                    out[tp] = (msg.offset(), msg.timestamp()[1])
                    del todo[tp]
                    consumer.incremental_unassign([TopicPartition(*tp)])
        finally:
            consumer.unassign()
        if todo:
            raise ClusterUnreachable(f"cluster {self.cluster!r}: no record read within {timeout_s or self._timeout_s} s "
                                     f"from {len(todo)} partitions, e.g. {sorted(todo)[:3]}")
        return out

    def identities(self, tp: TP, start: int, stop: int, origin_header: str) -> list[tuple[int, tuple[str, int]]]:
        """(offset, identity) of the records of `tp` in [start, stop), in offset order. Identity:
        (cluster, offset) from the origin header, or (this cluster, offset) for a record produced
        here; a record whose origin header does not parse counts as produced here (so it is
        never taken as consumed elsewhere). Exact mode reads partitions with this."""
        from treedist.topology.origin import MalformedOrigin, Origin

        out: list[tuple[int, tuple[str, int]]] = []
        for msg in self._records(tp, start, stop):
            identity = (self.cluster, msg.offset())
            for key, value in msg.headers() or ():
                if key == origin_header and value is not None:
                    try:
                        origin = Origin.decode(value)
                        identity = (origin.cluster, origin.offset)
                    except MalformedOrigin:
                        pass
            out.append((msg.offset(), identity))
        return out

    def _records(self, tp: TP, start: int, stop: int) -> Iterator[Message]:
        """The records of `tp` in [start, stop), in offset order (`treedist.kafka.ranges`, for
        `identities` and `_timestamps`). The read ends at `stop`, or where the partition ends:
        offsets in it that hold no record (compacted away, transaction markers) are never
        delivered. ClusterUnreachable when it makes no progress within 3 x the timeout."""
        try:
            for run in ranges.read_range(self._reader(), tp[0], tp[1], start, stop, stall_s=self._timeout_s * 3,
                                         batch=5000, end_is_complete=True):
                yield from run
        except ranges.RangeReadError as err:
            raise ClusterUnreachable(f"cluster {self.cluster!r}: reading {err}") from None

    def last_record_before(self, tp: TP, offset: int, max_back: int) -> tuple[int, int] | None:
        """(offset, timestamp ms) of the last record of `tp` below `offset`, looking at most
        `max_back` offsets back; None when there is none. For a commit whose previous offset
        holds no record: a transaction's marker, or an aborted transaction's records, which a
        read_committed consumer steps over (its position, hence its commit, lies past them).
        Reads windows growing from 64 offsets back (a marker is one offset; an aborted
        transaction, up to its size)."""
        floor = max(self.low([tp])[tp], offset - max_back)
        stop, width = offset, 64
        while stop > floor:
            start = max(floor, stop - width)
            found = self._timestamps(tp, start, stop)
            if found:
                return found[-1]
            stop, width = start, width * 8
        return None

    def _timestamps(self, tp: TP, start: int, stop: int) -> list[tuple[int, int]]:
        """(offset, timestamp ms) of the records of `tp` in [start, stop), in offset order."""
        return [(msg.offset(), msg.timestamp()[1]) for msg in self._records(tp, start, stop)]

    def _reader(self) -> Consumer:
        if self._consumer is None:
            # partition EOF events tell a read that the partition holds nothing more: offsets that
            # hold no record (compacted, transaction markers) then end a read instead of a wait
            self._consumer = clients.consumer(self._conf, **{
                "group.id": f"treedist-offsets-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
                "enable.partition.eof": True, "auto.offset.reset": "earliest"})
        return self._consumer

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


def _patient(call, what: str, wait_s: float = COORDINATOR_WAIT_S):
    """`call`, run again while the group coordinator answers that it is busy (COORDINATOR_BUSY),
    for at most `wait_s` (backoff 0.5 s doubling to 4 s). A coordinator still busy after that is
    raised as a retriable error (never as a refusal), so the caller's retries go on."""
    def run():
        deadline = time.monotonic() + wait_s
        backoff = 0.5
        while True:
            try:
                return call()
            except KafkaException as exc:
                error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
                if error is None or error.code() not in COORDINATOR_BUSY:
                    raise
                if time.monotonic() + backoff > deadline:
                    raise KafkaException(KafkaError(error.code(), error.str(), retriable=True)) from exc
                log.debug("%s: group coordinator busy (%s); asking again in %.1f s", what, error.str(), backoff)
                time.sleep(backoff)
                backoff = min(backoff * 2, 4.0)
    return run


def _at_end(msg) -> bool:
    error = msg.error()
    return error is not None and error.code() == KafkaError._PARTITION_EOF
