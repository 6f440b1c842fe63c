"""The one reader of a cluster's partitions, offsets and watermarks (driver side).

`OffsetReader` wraps one AdminClient: topic listing, earliest/latest offsets of many
partitions in one ListOffsets request, watermarks and record counts of a topic. Every call is
bounded by `timeout_s` and retried with `treedist.kafka.retry.with_retries`; errors name the
cluster (or its bootstrap servers when no name is given).
"""

from __future__ import annotations

import logging
from typing import Callable, Iterable, Literal, Mapping, NamedTuple

from confluent_kafka import IsolationLevel, KafkaError, KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from treedist.kafka.errors import ClusterUnreachable
from treedist.kafka.logs import client_logger
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
# a metadata request fixes it. Not on errors of a cluster that does not answer (_NOENT: no
# leader known, during an outage): a refresh would only wait there.
_STALE_LEADER = (KafkaError.FENCED_LEADER_EPOCH, KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError.NOT_LEADER_FOR_PARTITION,
                 KafkaError.LEADER_NOT_AVAILABLE)
# The refresh is best effort and bounded: the broker answered a moment ago.
_REFRESH_TIMEOUT_S = 5.0
# Consumer-only settings an AdminClient would warn about.
_CONSUMER_ONLY = {
    "group.id", "group.instance.id", "enable.auto.commit", "enable.auto.offset.store", "auto.offset.reset",
    "enable.partition.eof", "fetch.max.bytes", "max.partition.fetch.bytes", "queued.max.messages.kbytes",
    "queued.min.messages", "fetch.wait.max.ms", "isolation.level", "fetch.min.bytes", "session.timeout.ms",
}


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
                 read_committed: bool | None = None) -> None:
        self.where = f"cluster {cluster!r}" if cluster else str(client_config.get("bootstrap.servers"))
        self._timeout_s = timeout_s
        self._no_topic_ids = False  # set once the cluster answered that it has no topic IDs
        if read_committed is None:  # as the cluster's consumers read: read_committed unless told otherwise
            read_committed = str(client_config.get("isolation.level", "read_committed")) == "read_committed"
        self._isolation = IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED
        # librdkafka's logs through Python logging, condensed (treedist.kafka.logs)
        self._admin = AdminClient({"logger": client_logger(),
                                   **{k: v for k, v in client_config.items() if k not in _CONSUMER_ONLY}})

    def partitions(self, select: Callable[[str], bool]) -> list[TopicPartitionKey]:
        """All partitions of the topics `select` accepts, sorted. A topic whose metadata
        carries an error (being created, say) is left out this time."""
        md = with_retries(lambda: self._admin.list_topics(timeout=self._timeout_s),
                          what=f"listing topics on {self.where} failed", error=ClusterUnreachable)
        found: list[TopicPartitionKey] = []
        for name, topic in md.topics.items():
            if not select(name):
                continue
            if topic.error is not None:
                log.warning("topic %s not ready on %s: %s", name, self.where, topic.error)
                continue
            found.extend(TopicPartitionKey(name, p) for p in topic.partitions)
        return sorted(found)

    def offsets(self, tps: Iterable[TopicPartitionKey], which: Literal["earliest", "latest"]) -> dict[TopicPartitionKey, int]:
        """Earliest or latest offset (the last stable offset under read_committed) of each
        partition, in one request. A partition whose topic no longer exists is left out."""
        wanted = sorted(set(tps))
        if not wanted:
            return {}
        spec = OffsetSpec.earliest() if which == "earliest" else OffsetSpec.latest()

        def call() -> dict[TopicPartitionKey, int]:
            futures = self._admin.list_offsets({TopicPartition(tp.topic, tp.partition): spec for tp in wanted},
                                               isolation_level=self._isolation, request_timeout=self._timeout_s)
            out = {}
            for tp, future in futures.items():
                try:
                    offset = future.result().offset
                except KafkaException as exc:
                    code = _code(exc)
                    if code in _GONE:
                        log.warning("%s[%d] is gone from %s; not read", tp.topic, tp.partition, self.where)
                        continue
                    if code in _STALE_LEADER:
                        self._refresh_metadata()  # so that the retry asks the leader of now
                    raise
                if offset < 0:
                    raise KafkaException(f"no {which} offset for {tp.topic}[{tp.partition}]")
                out[TopicPartitionKey(tp.topic, tp.partition)] = offset
            return out

        return with_retries(call, what=f"reading {which} offsets of {len(wanted)} partitions on {self.where} failed",
                            error=ClusterUnreachable)

    def _refresh_metadata(self) -> None:
        """Fetch the cluster's metadata, which replaces the cached leaders and leader epochs
        (best effort: a cluster that does not answer fails the retry anyway)."""
        try:
            self._admin.list_topics(timeout=min(self._timeout_s, _REFRESH_TIMEOUT_S))
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
            return TopicIds(ids, gone)

        return with_retries(call, what=f"describing {len(wanted)} topics on {self.where} failed", error=ClusterUnreachable)

    def watermarks(self, topic: str) -> dict[int, tuple[int, int]]:
        """partition -> (low, high) of `topic`; empty when the topic does not exist."""
        tps = self.partitions(lambda name: name == topic)
        low, high = self.offsets(tps, "earliest"), self.offsets(tps, "latest")
        return {tp.partition: (low[tp], high[tp]) for tp in tps if tp in low and tp in high}

    def record_count(self, topic: str) -> int:
        """Records `topic` holds (high - low over its partitions)."""
        return sum(high - low for low, high in self.watermarks(topic).values())
