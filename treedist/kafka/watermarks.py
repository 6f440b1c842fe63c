"""The one reader of a cluster's partitions, offsets and watermarks (driver side).

`OffsetReader` wraps one AdminClient: topic listing, earliest/latest offsets of many
partitions in one ListOffsets request, watermarks and record counts of a topic. Every call is
bounded by `timeout_s` and retried with `treedist.kafka.retry.with_retries`; errors name the
cluster (or its bootstrap servers when no name is given).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from typing import Callable, Iterable, Literal, Mapping, NamedTuple

from confluent_kafka import IsolationLevel, KafkaError, KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from treedist.kafka import clients
from treedist.kafka.errors import ClusterUnreachable
from treedist.kafka.retry import with_retries

log = logging.getLogger(__name__)

_GONE = (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC)
# A cluster without topic IDs answers with the zero UUID (noida-db), or refuses the request.
ZERO_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"
_NO_TOPIC_IDS = (KafkaError.UNSUPPORTED_VERSION, KafkaError._UNSUPPORTED_FEATURE, KafkaError.INVALID_REQUEST)
# A leader the client's cached metadata names wrongly (moved, or restarted with a new leader
# epoch), as the broker answered. librdkafka's admin ListOffsets does not refresh its metadata
# on these: after a Kafka broker's restart a long-lived AdminClient kept failing with
# FENCED_LEADER_EPOCH until its periodic refresh (topic.metadata.refresh.interval.ms, 5 min);
# a metadata request fixes it.
_STALE_LEADER = (KafkaError.FENCED_LEADER_EPOCH, KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError.NOT_LEADER_FOR_PARTITION,
                 KafkaError.LEADER_NOT_AVAILABLE)
# The refresh is best effort and bounded: the broker answered a moment ago.
_REFRESH_TIMEOUT_S = 5.0
# No leader known (_NOENT): cached metadata from a moment the cluster had none, e.g. a refresh
# made while its broker stopped. It stays until the periodic refresh unless asked again, so a
# returned cluster read as leaderless for minutes; asked again at most this often, with a short
# timeout, since during an outage the request only waits.
_NO_LEADER_REFRESH_EVERY_S = 5.0
_NO_LEADER_REFRESH_TIMEOUT_S = 1.0


class TopicPartitionKey(NamedTuple):
    """One partition of one topic."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}[{self.partition}]"


def _code(exc: KafkaException):
    """The KafkaError code an exception carries (None for one without)."""
    return getattr(exc.args[0], "code", lambda: None)() if exc.args else None


class TopicIds(NamedTuple):
    """What `OffsetReader.topic_ids` found: topic -> ID (clusters with IDs), and the topics
    the cluster said do not exist."""

    ids: dict[str, str]
    gone: set[str]


class OffsetReader:
    """Reads one cluster's partitions and offsets (driver; not thread-safe across close())."""

    def __init__(self, client_config: Mapping[str, object], *, cluster: str | None = None, timeout_s: float = 30.0,
                 read_committed: bool | None = None, admin: AdminClient | None = None, attempts: int = 5,
                 first_backoff_s: float = 0.1, max_backoff_s: float = 2.0) -> None:
        self.where = f"cluster {cluster!r}" if cluster else str(client_config.get("bootstrap.servers"))
        self._timeout_s = timeout_s
        self._no_topic_ids = False  # set once the cluster answered that it has no topic IDs
        self._zero_topic_ids = False  # set once the cluster described a topic with the zero UUID
        if read_committed is None:  # as the cluster's consumers read: read_committed unless told otherwise
            read_committed = str(client_config.get("isolation.level", "read_committed")) == "read_committed"
        self._isolation = IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED
        # `admin`: a caller's own AdminClient of the same cluster (GroupClient), not one more
        self._admin = admin if admin is not None else clients.admin(client_config)
        self._retry = {"attempts": attempts, "first_backoff_s": first_backoff_s, "max_backoff_s": max_backoff_s}
        self._no_leader_refresh_at = float("-inf")  # monotonic time of the last refresh for _NOENT

    def partitions(self, select: Callable[[str], bool]) -> list[TopicPartitionKey]:
        """All partitions of the topics `select` accepts, sorted. A topic whose metadata
        carries an error (being created, say) is left out this time."""
        md = with_retries(lambda: self._admin.list_topics(timeout=self._timeout_s),
                          what=f"listing topics on {self.where} failed", error=ClusterUnreachable, **self._retry)
        found: list[TopicPartitionKey] = []
        for name, topic in md.topics.items():
            if not select(name):
                continue
            if topic.error is not None:
                log.warning("topic %s not ready on %s: %s", name, self.where, topic.error)
                continue
            found.extend(TopicPartitionKey(name, p) for p in topic.partitions)
        return sorted(found)

    def topics(self) -> dict[str, int]:
        """Topic -> partition count, of every topic whose metadata carries no error."""
        return dict(Counter(tp.topic for tp in self.partitions(lambda _: True)))

    def offsets(self, tps: Iterable[TopicPartitionKey], which: Literal["earliest", "latest"]) -> dict[TopicPartitionKey, int]:
        """Earliest or latest offset (the last stable offset under read_committed) of each
        partition, in one request. A partition whose topic no longer exists is left out."""
        spec = OffsetSpec.earliest() if which == "earliest" else OffsetSpec.latest()
        found = self._list({TopicPartitionKey(*tp): spec for tp in tps}, f"{which} offsets")
        for tp, offset in found.items():
            if offset < 0:
                raise ClusterUnreachable(f"no {which} offset for {tp} on {self.where}")
        return found

    def offsets_for_times(self, wanted: Mapping[TopicPartitionKey, int]) -> dict[TopicPartitionKey, int | None]:
        """The offset of the first batch whose timestamp is at or after the given ms, per
        partition (ListOffsets by timestamp, in one request); None when no batch is that
        recent. A partition whose topic no longer exists is left out."""
        found = self._list({TopicPartitionKey(*tp): OffsetSpec.for_timestamp(ts) for tp, ts in wanted.items()},
                           "offsets for times")
        return {tp: (offset if offset >= 0 else None) for tp, offset in found.items()}

    def _list(self, specs: Mapping[TopicPartitionKey, OffsetSpec], what: str) -> dict[TopicPartitionKey, int]:
        """One ListOffsets request, retried; partitions that are gone are left out."""
        wanted = sorted(specs)
        if not wanted:
            return {}

        def call() -> dict[TopicPartitionKey, int]:
            futures = self._admin.list_offsets({TopicPartition(tp.topic, tp.partition): specs[tp] for tp in wanted},
                                               isolation_level=self._isolation, request_timeout=self._timeout_s)
            out = {}
            for tp, future in futures.items():
                try:
                    offset = future.result(timeout=self._timeout_s).offset
                except KafkaException as exc:
                    code = _code(exc)
                    if code in _GONE:
                        log.warning("%s[%d] is gone from %s; not read", tp.topic, tp.partition, self.where)
                        continue
                    if code in _STALE_LEADER:
                        self._refresh_metadata()  # so that the retry asks the leader of now
                    elif code == KafkaError._NOENT:
                        self._refresh_after_no_leader()
                    raise
                out[TopicPartitionKey(tp.topic, tp.partition)] = offset
            return out

        return with_retries(call, what=f"reading {what} of {len(wanted)} partitions on {self.where} failed",
                            error=ClusterUnreachable, **self._retry)

    def _refresh_after_no_leader(self) -> None:
        """Ask for the cluster's metadata again, at most every _NO_LEADER_REFRESH_EVERY_S."""
        if time.monotonic() - self._no_leader_refresh_at >= _NO_LEADER_REFRESH_EVERY_S:
            self._no_leader_refresh_at = time.monotonic()
            self._refresh_metadata(_NO_LEADER_REFRESH_TIMEOUT_S)

    def _refresh_metadata(self, timeout_s: float = _REFRESH_TIMEOUT_S) -> None:
        """Fetch the cluster's metadata, which replaces the cached leaders and leader epochs
        (best effort: a cluster that does not answer fails the retry anyway)."""
        try:
            self._admin.list_topics(timeout=min(self._timeout_s, timeout_s))
        except KafkaException:
            pass

    def topic_ids(self, topics: Iterable[str]) -> TopicIds:
        """The topic ID (base64, as Kafka prints it) of each of `topics`, in one request, and
        the topics the cluster says no longer exist.

        A cluster without topic IDs (the zero UUID, or a broker that refuses DescribeTopics:
        noida-db) gives no IDs; a broker that refuses is not asked again by this reader."""
        wanted = sorted(set(topics))
        if not wanted or self._no_topic_ids:
            return TopicIds({}, set())

        def call() -> TopicIds:
            futures = self._admin.describe_topics(TopicCollection(wanted), request_timeout=self._timeout_s)
            ids, gone = {}, set()
            for name, future in futures.items():
                try:
                    topic_id = str(future.result().topic_id)
                except KafkaException as exc:
                    code = _code(exc)
                    if code in _GONE:
                        gone.add(name)
                        continue
                    if code in _NO_TOPIC_IDS:
                        self._no_topic_ids = True
                        log.info("%s does not describe topics (%s): topics recreated between two batches are "
                                 "not told apart there", self.where, exc)
                        return TopicIds({}, set())
                    raise
                if topic_id != ZERO_TOPIC_ID:
                    ids[name] = topic_id
                else:
                    self._zero_topic_ids = True
            return TopicIds(ids, gone)

        return with_retries(call, what=f"describing {len(wanted)} topics on {self.where} failed", error=ClusterUnreachable,
                            **self._retry)

    @property
    def has_topic_ids(self) -> bool:
        """Whether the cluster described its topics with real topic IDs so far (False once it
        refused DescribeTopics or answered the zero UUID: noida-db, whose fetches also return
        at once when empty, so nothing there may long-poll on it)."""
        return not (self._no_topic_ids or self._zero_topic_ids)

    def watermarks(self, topic: str) -> dict[int, tuple[int, int]]:
        """partition -> (low, high) of `topic`; empty when the topic does not exist."""
        tps = self.partitions(lambda name: name == topic)
        low, high = self.offsets(tps, "earliest"), self.offsets(tps, "latest")
        return {tp.partition: (low[tp], high[tp]) for tp in tps if tp in low and tp in high}

    def record_count(self, topic: str) -> int:
        """Records `topic` holds (high - low over its partitions)."""
        return sum(high - low for low, high in self.watermarks(topic).values())
